"""Encoder-only, decoder-only (with key/value cache) and Vision Transformer models."""

import numpy as np
import pytest

from autograd import gradcheck, manual_seed
from nn import functional as F
from nn.recipe import make_optimizer, optimize
from tests.transformer.helpers import to_float64
from transformer.data.toy_data import (CLS, FIRST_SYMBOL, MASK, bars, corruption_task, lm_batch, mask_for_mlm,
                                       progressions, sort_dataset, with_cls)
from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig
from transformer.families.encoder_only import EncoderOnly, EncoderOnlyConfig
from transformer.families.vit import VisionTransformer, ViTConfig, patchify, unpatchify


def tiny_encoder_only(seed=0):
    manual_seed(seed)
    return to_float64(EncoderOnly(EncoderOnlyConfig(vocab=8, num_classes=3, d_model=8, num_heads=2, d_ff=8,
                                                    num_layers=1, max_len=6)))


def tiny_decoder_only(seed=0, layers=1):
    manual_seed(seed)
    return to_float64(DecoderOnly(DecoderOnlyConfig(vocab=7, d_model=8, num_heads=2, d_ff=8, num_layers=layers,
                                                    max_len=12)))


def test_encoder_only_gradcheck_both_heads():
    model = tiny_encoder_only()
    tokens = np.array([[CLS, 3, 4, 5, 0], [CLS, 6, MASK, 3, 4]])
    targets = np.array([[-100, -100, 4, -100, -100], [-100, -100, 7, -100, -100]])
    assert gradcheck(lambda *p: F.cross_entropy(model.mlm_logits(tokens), targets), model.parameters())
    assert gradcheck(lambda *p: F.cross_entropy(model.classify(tokens), np.array([2, 0])), model.parameters())


def test_mlm_masking_proportions():
    rng = np.random.default_rng(0)
    tokens = with_cls(progressions(20000, 20, 10, rng))   # about 60,000 chosen positions
    inputs, targets = mask_for_mlm(tokens, 10, rng)
    chosen = targets != -100
    assert not chosen[:, 0].any()                                       # <class> is never chosen
    assert abs(chosen[:, 1:].mean() - 0.15) < 0.005
    as_mask = (inputs == MASK) & chosen
    kept = (inputs == tokens) & chosen
    randomised = chosen & ~as_mask & ~kept
    assert abs(as_mask.sum() / chosen.sum() - 0.8) < 0.01
    # a random replacement equals the original 1 time in 10, so "kept" is 10% + 10% / 10
    assert abs(kept.sum() / chosen.sum() - 0.11) < 0.01
    assert abs(randomised.sum() / chosen.sum() - 0.09) < 0.01
    np.testing.assert_array_equal(inputs[~chosen], tokens[~chosen])
    assert (targets[chosen] == tokens[chosen]).all() and (targets[chosen] >= FIRST_SYMBOL).all()


def test_corruption_task_labels():
    x, y = corruption_task(200, 6, 10, np.random.default_rng(1))
    steps = np.diff(x[:, 1:] - FIRST_SYMBOL, axis=1) % 10
    intact = (steps == steps[:, :1]).all(axis=1)
    np.testing.assert_array_equal(intact, y == 1)


def test_decoder_only_gradcheck():
    model = tiny_decoder_only()
    inputs, targets = np.array([[1, 3, 4, 2, 3], [1, 5, 3, 2, 3]]), np.array([[-100, -100, -100, 3, 4], [-100, -100, -100, 3, 5]])
    assert gradcheck(lambda *p: F.cross_entropy(model(inputs), targets), model.parameters())


def test_decoder_only_is_causal():
    model = tiny_decoder_only(seed=1, layers=2)
    tokens = np.array([[1, 3, 4, 5, 6, 3, 4]])
    base = model(tokens).data
    for t in range(tokens.shape[1] - 1):
        changed = tokens.copy()
        changed[0, t + 1:] = 5
        np.testing.assert_allclose(model(changed).data[0, : t + 1], base[0, : t + 1], rtol=1e-12, atol=1e-12)


def test_kv_cached_generation_gives_the_uncached_logits_at_every_step():
    model = tiny_decoder_only(seed=2, layers=2)
    prompt = np.array([[1, 3, 4], [1, 6, 5]])
    cached, cached_logits = model.generate(prompt, 6, use_cache=True, return_logits=True)
    plain, plain_logits = model.generate(prompt, 6, use_cache=False, return_logits=True)
    np.testing.assert_array_equal(cached, plain)
    np.testing.assert_allclose(cached_logits, plain_logits, rtol=1e-12, atol=1e-12)


def test_sort_dataset_split_and_batch():
    train_rows, heldout = sort_dataset(length=6, digits=3, seed=0)
    assert len(train_rows) + len(heldout) == 3 ** 6 and len(heldout) == 145
    seen = {tuple(r) for r in train_rows}
    assert not any(tuple(r) in seen for r in heldout)
    inputs, targets = lm_batch(heldout[:2], 6)
    assert (targets[:, :7] == -100).all() and (targets[:, 7:] == heldout[:2, 8:]).all()


def test_patchify_round_trips_and_orders_patches():
    images = np.random.default_rng(3).standard_normal((2, 8, 12))
    patches = patchify(images, 4)
    assert patches.shape == (2, 6, 16)
    np.testing.assert_array_equal(patches[0, 1], images[0, 0:4, 4:8].reshape(-1))   # row-major patch order
    np.testing.assert_array_equal(unpatchify(patches, 4, 8, 12), images)
    with pytest.raises(ValueError, match="not a multiple of the patch size 4"):
        patchify(np.zeros((1, 6, 8)), 4)


def test_vit_gradcheck():
    manual_seed(4)
    model = to_float64(VisionTransformer(ViTConfig(image_size=4, patch_size=2, num_classes=3, d_model=8,
                                                   num_heads=2, d_ff=8, num_layers=1)))
    images = np.random.default_rng(5).standard_normal((2, 4, 4))
    assert gradcheck(lambda *p: F.cross_entropy(model(images), np.array([1, 2])), model.parameters())
    assert model.cls_attention().shape == (2, 2, 4)


def _halves(model, batch, loss_fn, steps=60, lr=3e-3):
    optimizer, schedule = make_optimizer(model.parameters(), lr, 10, steps)
    losses = [optimize(loss_fn(model, *batch(i)), optimizer, schedule, 1.0) for i in range(steps)]
    return np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])


def test_short_training_runs_halve_each_loss():
    rng = np.random.default_rng(0)
    manual_seed(0)
    enc = EncoderOnly(EncoderOnlyConfig(vocab=13, d_model=32, num_heads=2, d_ff=64, num_layers=2, max_len=9))
    assert _halves(enc, lambda i: mask_for_mlm(with_cls(progressions(64, 8, 10, rng)), 10, rng),
                   lambda m, x, y: F.cross_entropy(m.mlm_logits(x), y), steps=300, lr=5e-3)
    train_rows, _ = sort_dataset()
    dec = DecoderOnly(DecoderOnlyConfig(vocab=6, d_model=32, num_heads=2, d_ff=32, num_layers=1, max_len=14))
    assert _halves(dec, lambda i: lm_batch(train_rows[rng.integers(0, len(train_rows), 32)], 6),
                   lambda m, x, y: F.cross_entropy(m(x), y))
    vit = VisionTransformer(ViTConfig(d_model=32, num_heads=2, d_ff=32, num_layers=1))
    assert _halves(vit, lambda i: bars(32, 16, rng), lambda m, x, y: F.cross_entropy(m(x), y), steps=150)
