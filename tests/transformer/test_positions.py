"""Positions inside attention (RoPE, ALiBi, relative bias): gradients, the math, the cache,
and every model's `positional` option."""

import numpy as np
import pytest

import nn
from autograd import Tensor, gradcheck, manual_seed, no_grad
from nn import functional as F
from tests.helpers import leaf
from tests.transformer.helpers import tiny_transformer, to_float64
from transformer.decoding import greedy_decode
from transformer.encoder_decoder import TransformerConfig
from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig
from transformer.families.encoder_only import EncoderOnly, EncoderOnlyConfig
from transformer.families.vit import VisionTransformer, ViTConfig
from transformer.positional import POSITIONAL_KINDS
from transformer.relative_position import ALiBiScore, RelativeBiasScore, RotaryScore, alibi_slopes

ATTENTION_KINDS = ("rope", "alibi", "relative")


def make_score(kind, heads=3, d_head=4):
    score = {"rope": lambda: RotaryScore(d_head), "alibi": lambda: ALiBiScore(heads),
             "relative": lambda: RelativeBiasScore(heads, max_distance=2)}[kind]()
    for p in score.parameters():      # random, so that the bias's gradient is checked at a generic point
        p.data = np.random.default_rng(1).standard_normal(p.shape)
    return score


@pytest.mark.parametrize("kind", ATTENTION_KINDS)
@pytest.mark.parametrize("q_offset", [0, 3])
def test_position_scores_gradcheck(kind, q_offset):
    score = make_score(kind)
    q, k = leaf(2, 3, 2, 4, seed=2), leaf(2, 3, 5, 4, seed=3)     # T_q = 2 queries, T_k = 5 keys
    assert gradcheck(lambda q, k, *p: score(q, k, q_offset=q_offset), [q, k, *score.parameters()])


def test_rope_scores_depend_only_on_the_offset_between_positions():
    rope = RotaryScore(8)
    rng = np.random.default_rng(0)
    q, k = Tensor(rng.standard_normal((1, 1, 1, 8))), Tensor(rng.standard_normal((1, 1, 1, 8)))
    at = lambda i, j: (rope.rotate(q, np.array([i])) @ rope.rotate(k, np.array([j])).transpose(-2, -1)).item()
    assert at(5, 2) == pytest.approx(at(13, 10), rel=1e-12)
    assert at(0, 0) == pytest.approx((q @ k.transpose(-2, -1)).item(), rel=1e-12)   # no rotation at 0
    assert at(5, 2) != pytest.approx(at(2, 5))                                      # but direction matters


def test_alibi_and_relative_bias_are_the_documented_tables():
    zeros_q, zeros_k = Tensor(np.zeros((1, 2, 3, 4))), Tensor(np.zeros((1, 2, 6, 4)))
    alibi = ALiBiScore(2)(zeros_q, zeros_k, q_offset=2).data[0]           # (H, T_q, T_k)
    i, j = np.arange(2, 5)[:, None], np.arange(6)[None, :]
    np.testing.assert_allclose(alibi, -alibi_slopes(2)[:, None, None] * np.abs(i - j))
    np.testing.assert_allclose(alibi_slopes(8), 2.0 ** -np.arange(1, 9))
    rel = RelativeBiasScore(2, max_distance=2)
    rel.bias.data = np.arange(10.0).reshape(2, 5)
    out = rel(zeros_q, zeros_k, q_offset=2).data[0]
    np.testing.assert_array_equal(out[1], 5 + np.clip(j - i, -2, 2) + 2)


@pytest.mark.parametrize("kind", POSITIONAL_KINDS)
def test_transformer_gradcheck_with_every_positional_scheme(kind):
    model = tiny_transformer(positional=kind)
    for name, p in model.named_parameters():
        if name.endswith("score.bias"):
            p.data = np.random.default_rng(4).standard_normal(p.shape)
    src = np.array([[3, 4, 5, 0], [6, 3, 4, 4]])
    tgt_in, tgt_out = np.array([[1, 3, 4], [1, 5, 0]]), np.array([[3, 4, 2], [5, 2, 0]])
    assert gradcheck(lambda *p: F.cross_entropy(model(src, tgt_in), tgt_out, ignore_index=0),
                     model.parameters(), atol=1e-5, rtol=1e-3)


def test_init_leaves_new_parameters_alone():
    model = tiny_transformer(positional="relative")
    biases = [p for name, p in model.named_parameters() if name.endswith("score.bias")]
    assert len(biases) == 2 and all((b.data == 0).all() for b in biases)     # not re-initialised as a matrix
    gpt = DecoderOnly(DecoderOnlyConfig(vocab=7, positional="relative", init="gpt2"))
    assert all((p.data == 0).all() for name, p in gpt.named_parameters() if name.endswith("score.bias"))


@pytest.mark.parametrize("kind", POSITIONAL_KINDS)
def test_encoder_decoder_cached_decoding_gives_the_uncached_logits(kind):
    model = tiny_transformer(seed=3, positional=kind).eval()
    for name, p in model.named_parameters():
        if name.endswith("score.bias"):
            p.data = np.random.default_rng(5).standard_normal(p.shape)
    src = np.array([[3, 4, 5, 6, 0], [6, 3, 4, 4, 5]])
    tgt = np.array([[1, 3, 4, 5, 3, 4], [1, 5, 5, 4, 3, 3]])
    with no_grad():
        memory = model.encode(src)
        full = model.decode(tgt, memory, model.make_src_mask(src)).data     # (B, T, V)
        cache, steps = model.new_cache(), []
        for t in range(tgt.shape[1]):
            steps.append(model.decode(tgt[:, t:t + 1], memory, model.make_src_mask(src), cache=cache).data[:, 0])
    np.testing.assert_allclose(np.stack(steps, 1), full, atol=1e-10)
    np.testing.assert_array_equal(greedy_decode(model, src, 8, 1, 2, 0, use_cache=True),
                                  greedy_decode(model, src, 8, 1, 2, 0, use_cache=False))


@pytest.mark.parametrize("kind", ATTENTION_KINDS + ("learned",))
def test_decoder_only_generates_the_same_with_and_without_the_cache(kind):
    manual_seed(0)
    model = to_float64(DecoderOnly(DecoderOnlyConfig(vocab=9, d_model=8, num_heads=2, d_ff=16, max_len=12,
                                                     positional=kind))).eval()
    for name, p in model.named_parameters():
        if name.endswith("score.bias"):
            p.data = np.random.default_rng(6).standard_normal(p.shape)
    prompt = np.array([[1, 4, 5], [1, 6, 3]])
    cached, cached_logits = model.generate(prompt, 14, use_cache=True, return_logits=True)   # outgrows max_len
    plain, plain_logits = model.generate(prompt, 14, use_cache=False, return_logits=True)
    np.testing.assert_array_equal(cached, plain)
    np.testing.assert_allclose(cached_logits, plain_logits, atol=1e-10)


@pytest.mark.parametrize("kind", ATTENTION_KINDS)
def test_encoder_only_and_vit_take_every_scheme(kind):
    manual_seed(0)
    bert = EncoderOnly(EncoderOnlyConfig(vocab=8, positional=kind))
    assert bert(np.array([[1, 3, 4, 5]])).shape == (1, 2)
    vit = VisionTransformer(ViTConfig(image_size=8, patch_size=4, positional=kind))
    assert vit(np.zeros((2, 8, 8))).shape == (2, 4)
    expected = {"rope": RotaryScore, "alibi": ALiBiScore, "relative": RelativeBiasScore}[kind]
    assert isinstance(vit.encoder.layers[0].self_attn.score, expected)
    assert isinstance(bert.encoder.layers[1].self_attn.score, expected)


def test_without_positions_self_attention_is_order_blind():
    """The lecture's "dog bit man" / "man bit dog": with positional="none" the encoder's
    outputs for a permuted sentence are the same vectors, permuted; with sinusoidal they are not."""
    dog_bit_man, man_bit_dog = np.array([[3, 4, 5]]), np.array([[5, 4, 3]])
    for kind, order_blind in (("none", True), ("sinusoidal", False), ("rope", False)):
        model = tiny_transformer(positional=kind).eval()
        with no_grad():
            a, b = model.encode(dog_bit_man).data[0], model.encode(man_bit_dog).data[0]
        assert np.allclose(a, b[::-1], atol=1e-12) == order_blind, kind


def test_bad_positional_options_are_reported():
    with pytest.raises(ValueError, match="positional must be one of"):
        TransformerConfig(src_vocab=5, tgt_vocab=5, positional="rotary")
    with pytest.raises(ValueError, match="head size d_model/num_heads = 3 must be even"):
        TransformerConfig(src_vocab=5, tgt_vocab=5, d_model=6, num_heads=2, positional="rope")
    with pytest.raises(ValueError, match="expected q"):
        ALiBiScore(4)(Tensor(np.zeros((1, 2, 3, 4))), Tensor(np.zeros((1, 2, 3, 4))))


def test_the_lectures_criteria_rule_out_the_naive_encodings():
    from transformer.positional import (binary_table, encoding_criteria, integer_table, one_hot_table, scaled_table,
                                        sinusoidal_table)
    fails = {name: {c for c, ok in encoding_criteria(table).items() if not ok}
             for name, table in (("integer", integer_table), ("one-hot", one_hot_table), ("scaled", scaled_table),
                                 ("binary", binary_table), ("sinusoidal", sinusoidal_table))}
    assert fails == {"integer": {"generalises to longer"}, "one-hot": {"generalises to longer"},
                     "scaled": {"same neighbour distance", "generalises to longer"},
                     "binary": {"same neighbour distance"}, "sinusoidal": set()}


def test_order_blind_demo_measures_a_permutation():
    from demos.positional_encoding import order_blindness, self_attention_outputs
    from transformer.positional import sinusoidal_table
    assert order_blindness(self_attention_outputs(None)) < 1e-5
    assert order_blindness(self_attention_outputs(sinusoidal_table)) > 1e-2


def _slopes_as_the_alibi_authors_make_them(n):
    """The released recipe, written out independently: a geometric series starting at
    2^(-8/n) for a power of two; else the power below, then every other slope of twice it."""
    if (n & (n - 1)) == 0:
        start = 2.0 ** (-8.0 / n)
        return [start * start ** i for i in range(n)]
    below = 1 << (n.bit_length() - 1)
    return _slopes_as_the_alibi_authors_make_them(below) + _slopes_as_the_alibi_authors_make_them(2 * below)[0::2][:n - below]


@pytest.mark.parametrize("heads", range(1, 17))
def test_alibi_slopes_follow_the_authors_recipe_for_every_head_count(heads):
    np.testing.assert_allclose(alibi_slopes(heads), _slopes_as_the_alibi_authors_make_them(heads), rtol=1e-12)


def test_alibi_slopes_for_three_and_six_heads():
    np.testing.assert_allclose(alibi_slopes(3), [2.0 ** -4, 2.0 ** -8, 2.0 ** -2])
    np.testing.assert_allclose(alibi_slopes(6), [2.0 ** -2, 2.0 ** -4, 2.0 ** -6, 2.0 ** -8, 2.0 ** -1, 2.0 ** -3])


def test_a_score_that_uses_positions_without_declaring_it_is_refused_when_the_attention_is_built():
    from transformer.attention import MultiHeadAttention

    class DistancePenalty(nn.Module):
        """q k^T - |i - j|, with i counted from 0 within the queries it is given: the
        position_aware declaration (and q_offset) forgotten."""

        def forward(self, q, k):
            i, j = np.arange(q.shape[-2])[:, None], np.arange(k.shape[-2])[None, :]
            return q @ k.transpose(-2, -1) - Tensor(np.abs(i - j).astype(q.dtype))

    with pytest.raises(ValueError, match="DistancePenalty: the last query's scores change when it is scored alone, "
                                         "as under the key/value cache; .* must declare position_aware = True"):
        MultiHeadAttention(8, 2, score=DistancePenalty())

    class Declared(DistancePenalty):
        position_aware = True

        def forward(self, q, k, q_offset=0):
            i, j = q_offset + np.arange(q.shape[-2])[:, None], np.arange(k.shape[-2])[None, :]
            return q @ k.transpose(-2, -1) - Tensor(np.abs(i - j).astype(q.dtype))

    MultiHeadAttention(8, 2, score=Declared())                     # declared and offset: accepted
