"""Grouped-query attention (num_kv_heads < num_heads; multi-query with 1 kv head): the fused
kernels of every tier against their numpy twin, the twin against attention with each kv
head repeated over its group, gradients (fused and composed), the layer, the Llama config,
the key/value cache (its bytes, cached decoding) and PyTorch's scaled_dot_product_attention."""

import numpy as np
import pytest

from autograd import Tensor, gradcheck, kernels, manual_seed, no_grad
from autograd.kernels import reference
from autograd.ops import ScaledDotProductAttention
from nn import functional as F
from tests.helpers import ENGINE_ROOM, ENGINE_ROOM_ABSENT
from tests.transformer.helpers import to_float64
from transformer.attention import MultiHeadAttention, scaled_dot_product_attention
from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig, llama_config
from transformer.masks import causal_mask
from transformer.training.checkpoints import model_from, run_state

# (query heads, kv heads): groups of 2 and 3, multi-query (one kv head), and no grouping
HEAD_PAIRS = [(4, 2), (6, 3), (6, 1), (3, 3)]
TOLERANCE = {np.float32: dict(rtol=2e-5, atol=2e-5), np.float64: dict(rtol=1e-11, atol=1e-12)}
needs_engine_room = pytest.mark.skipif(not ENGINE_ROOM, reason=ENGINE_ROOM_ABSENT)


def operands(heads, kv_heads, t_q, t_k, dtype=np.float64, d=5, d_v=3, batch=2, seed=0):
    """q (B, H, T_q, d), k (B, KV, T_k, d), v (B, KV, T_k, d_v) of odd sizes."""
    rng = np.random.default_rng(seed)
    shapes = ((batch, heads, t_q, d), (batch, kv_heads, t_k, d), (batch, kv_heads, t_k, d_v))
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


def masks(batch, heads, t_q, t_k, seed=0):
    """{name: mask broadcast to (B, H, T_q, T_k)}: causal (as a decoder's, over every head),
    padding (per batch element) with a fully masked query, and random per head with a fully
    masked query in one head only."""
    rng = np.random.default_rng(seed)
    causal = causal_mask(t_k)[t_k - t_q:]                      # the last t_q queries of t_k positions
    padding = np.repeat((rng.random((batch, 1, 1, t_k)) < 0.7), t_q, axis=2)
    padding[1, 0, t_q // 2] = False
    per_head = rng.random((batch, heads, t_q, t_k)) < 0.6
    per_head[0, heads - 1, 0] = False
    return {name: np.broadcast_to(m, (batch, heads, t_q, t_k))
            for name, m in (("causal", causal), ("padding", padding), ("per head", per_head))}


def repeated(x, groups):
    """Each kv head (dim 1) repeated over its group: kv head j serves query heads j G .. j G + G - 1
    (Hugging Face's repeat_kv)."""
    return np.repeat(x, groups, axis=1)


@pytest.mark.parametrize("heads,kv_heads", HEAD_PAIRS)
@pytest.mark.parametrize("mask_name", ["causal", "padding", "per head"])
def test_the_numpy_twin_is_attention_with_each_kv_head_repeated_over_its_group(heads, kv_heads, mask_name):
    """The definition: query head h attends with kv head h // G, G = H / KV; the gradient of
    a kv head is the sum of its group's.  Checked against plain attention on repeated heads
    (which tells h // G from h % KV whenever KV > 1 and G > 1)."""
    groups = heads // kv_heads
    for t_q, t_k in ((7, 7), (3, 8)):
        q, k, v = operands(heads, kv_heads, t_q, t_k)
        mask = masks(2, heads, t_q, t_k)[mask_name]
        out, lse = reference.attention_forward(q, k, v, mask, 0.4)
        want_out, want_lse = reference.attention_forward(q, repeated(k, groups), repeated(v, groups), mask, 0.4)
        np.testing.assert_allclose(out, want_out, **TOLERANCE[np.float64])
        np.testing.assert_allclose(lse, want_lse, **TOLERANCE[np.float64])
        dout = np.random.default_rng(1).standard_normal(out.shape)
        dq, dk, dv = reference.attention_backward(q, k, v, mask, 0.4, out, lse, dout)
        want_dq, want_dk, want_dv = reference.attention_backward(q, repeated(k, groups), repeated(v, groups), mask,
                                                                 0.4, want_out, want_lse, dout)
        assert dk.shape == k.shape and dv.shape == v.shape
        np.testing.assert_allclose(dq, want_dq, **TOLERANCE[np.float64])
        for got, want in ((dk, want_dk), (dv, want_dv)):
            np.testing.assert_allclose(got, want.reshape(2, kv_heads, groups, *want.shape[2:]).sum(2),
                                       **TOLERANCE[np.float64])


@pytest.mark.parametrize("tier", ["loops", pytest.param("fast", marks=needs_engine_room)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("heads,kv_heads", HEAD_PAIRS + [(8, 2)])
def test_every_tier_matches_the_numpy_twin(tier, dtype, heads, kv_heads):
    """Odd sizes, more than one block of queries and keys (the engine room's 32 and 64), a
    causal, a padding and a per-head mask with fully masked rows, and no mask."""
    chosen = kernels._load(tier)
    for t_q, t_k, d, d_v in ((37, 37, 5, 3), (5, 70, 8, 7), (33, 65, 16, 16)):
        q, k, v = operands(heads, kv_heads, t_q, t_k, dtype, d, d_v, seed=t_q)
        for mask in [None, *masks(2, heads, t_q, t_k, seed=t_k).values()]:
            out, lse = chosen.attention_forward(q, k, v, mask, 0.3)
            want_out, want_lse = reference.attention_forward(q, k, v, mask, 0.3)
            np.testing.assert_allclose(out, want_out, **TOLERANCE[dtype])
            np.testing.assert_allclose(lse, want_lse, **TOLERANCE[dtype])
            dout = np.random.default_rng(2).standard_normal(out.shape).astype(dtype)
            for got, want in zip(chosen.attention_backward(q, k, v, mask, 0.3, out, lse, dout),
                                 reference.attention_backward(q, k, v, mask, 0.3, want_out, want_lse, dout)):
                assert got.dtype == dtype and got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=10 * TOLERANCE[dtype]["rtol"],
                                           atol=10 * TOLERANCE[dtype]["atol"])


@pytest.fixture(params=["numpy", pytest.param("fast", marks=needs_engine_room)])
def kernel_tier(request):
    previous = kernels.tier()
    kernels.use_tier(request.param)
    yield request.param
    kernels.use_tier(previous)


@pytest.mark.parametrize("heads,kv_heads", HEAD_PAIRS)
def test_fused_op_gradchecks(kernel_tier, heads, kv_heads):
    """Float64 central differences of the fused op on every tier, T_q != T_k, a mask with
    fully masked rows in one head."""
    q, k, v = (Tensor(x, requires_grad=True) for x in operands(heads, kv_heads, 3, 4, seed=heads + kv_heads))
    mask = masks(2, heads, 3, 4, seed=3)["per head"]
    assert gradcheck(lambda q, k, v: ScaledDotProductAttention.apply(q, k, v, mask=mask, scale=0.6), [q, k, v])


@pytest.mark.parametrize("heads,kv_heads", HEAD_PAIRS)
@pytest.mark.parametrize("mask_name", ["causal", "per head"])
def test_composed_attention_gradchecks_and_equals_the_fused(heads, kv_heads, mask_name):
    q, k, v = (Tensor(x, requires_grad=True) for x in operands(heads, kv_heads, 3, 4, seed=heads))
    mask = masks(2, heads, 3, 4, seed=1)[mask_name]
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask, enable_gqa=True)[0], [q, k, v])
    composed, weights = scaled_dot_product_attention(q, k, v, mask, enable_gqa=True)
    fused, _ = scaled_dot_product_attention(q, k, v, mask, enable_gqa=True, fused=True)
    assert weights.shape == (2, heads, 3, 4)
    np.testing.assert_allclose(composed.data, fused.data, **TOLERANCE[np.float64])
    dout = np.random.default_rng(5).standard_normal(composed.shape)
    grads = []
    for out in (composed, fused):
        for x in (q, k, v):
            x.grad = None
        out.backward(dout)
        grads.append([x.grad for x in (q, k, v)])
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, **TOLERANCE[np.float64])


def test_grouped_shapes_that_do_not_fit_are_refused_in_one_line():
    q, k, v = (Tensor(x) for x in operands(6, 4, 3, 3))
    with pytest.raises(ValueError, match=r"6 query heads .* not a multiple of the 4 key/value heads"):
        scaled_dot_product_attention(q, k, v, enable_gqa=True)
    q, k, v = (Tensor(x) for x in operands(4, 2, 3, 3))
    with pytest.raises(ValueError, match="same batch dims"):
        scaled_dot_product_attention(q, k[:1], v[:1], enable_gqa=True)
    with pytest.raises(ValueError, match=r"do not fit: .*batch dims that broadcast \(fewer key/value heads .*enable_gqa=True"):
        scaled_dot_product_attention(q, k, v)
    with pytest.raises(ValueError, match="num_heads=4 is not a multiple of num_kv_heads=3"):
        MultiHeadAttention(12, 4, num_kv_heads=3)
    with pytest.raises(ValueError, match="num_kv_heads must be an integer >= 1, got 0"):
        MultiHeadAttention(12, 4, num_kv_heads=0)
    with pytest.raises(ValueError, match="num_heads=4 is not a multiple of num_kv_heads=3"):
        llama_config(11, n_head=4, n_kv_head=3)
    with pytest.raises(ValueError, match="scaled dot product score, not 'cosine'"):
        DecoderOnlyConfig(vocab=11, d_model=8, num_heads=4, num_kv_heads=2, score="cosine")


def test_a_grouped_layer_is_a_full_layer_whose_kv_projections_repeat_per_group():
    """MultiHeadAttention(num_kv_heads=KV) equals the plain layer whose key and value
    projections hold each kv head's rows once per query head of its group, for the composed
    and the fused attention; its k_proj and v_proj are KV d_head wide."""
    rng = np.random.default_rng(0)
    for heads, kv_heads in HEAD_PAIRS:
        d_model, d_head = 4 * heads, 4
        manual_seed(heads)
        grouped = to_float64(MultiHeadAttention(d_model, heads, num_kv_heads=kv_heads))
        assert grouped.k_proj.weight.shape == grouped.v_proj.weight.shape == (kv_heads * d_head, d_model)
        full = to_float64(MultiHeadAttention(d_model, heads))
        state = grouped.state_dict()
        for name in ("k_proj", "v_proj"):
            for kind in ("weight", "bias"):
                tail = state[f"{name}.{kind}"].shape[1:]                       # (d_model,) or () for the bias
                rows = state[f"{name}.{kind}"].reshape((kv_heads, d_head) + tail)
                state[f"{name}.{kind}"] = np.repeat(rows, heads // kv_heads, axis=0).reshape((heads * d_head,) + tail)
        full.load_state_dict(state)
        x = Tensor(rng.standard_normal((2, 5, d_model)))
        mask = causal_mask(5)
        for fused in (False, True):
            grouped.fused = full.fused = fused
            np.testing.assert_allclose(grouped(x, x, x, mask).data, full(x, x, x, mask).data, **TOLERANCE[np.float64])
        assert grouped.attn_weights.shape == (2, heads, 5, 5)


@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (4, 1)])
def test_the_grouped_layer_gradchecks(heads, kv_heads):
    manual_seed(1)
    layer = to_float64(MultiHeadAttention(8, heads, num_kv_heads=kv_heads))
    rng = np.random.default_rng(2)
    x, memory = Tensor(rng.standard_normal((2, 3, 8)), requires_grad=True), Tensor(rng.standard_normal((2, 4, 8)))
    upstream = rng.standard_normal((2, 3, 8))
    assert gradcheck(lambda x, *_: (layer(x, memory, memory) * upstream).sum(), [x, *layer.parameters()])


def tiny_llama(heads=4, kv_heads=2, attention="composed", seed=0, dtype="float32", layers=2):
    manual_seed(seed)
    config = llama_config(13, block_size=12, n_layer=layers, n_head=heads, n_embd=4 * heads, d_ff=20,
                          attention=attention, n_kv_head=kv_heads)
    return DecoderOnly(DecoderOnlyConfig(**{**vars(config), "dtype": dtype}))


@pytest.mark.parametrize("heads,kv_heads", [(4, 2), (4, 1)])
def test_a_grouped_llama_gradchecks(heads, kv_heads):
    model = tiny_llama(heads, kv_heads, dtype="float64", layers=1)        # every parameter is perturbed: one block
    rng = np.random.default_rng(3)
    x, y = rng.integers(0, 13, (2, 5)), rng.integers(0, 13, (2, 5))
    assert gradcheck(lambda *p: F.cross_entropy(model(x), y), model.parameters())


@pytest.mark.parametrize("attention", ["composed", "fused"])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2), (4, 1), (6, 3)])
def test_cached_decoding_equals_uncached_and_the_cache_holds_only_the_kv_heads(attention, heads, kv_heads):
    model = tiny_llama(heads, kv_heads, attention, seed=heads + kv_heads)
    tokens = np.random.default_rng(kv_heads).integers(0, 13, (3, 10))
    with no_grad():
        whole = model(tokens).data
        cache = model.new_cache()
        parts = [model(tokens[:, :4], cache).data] + [model(tokens[:, t:t + 1], cache).data for t in range(4, 10)]
    np.testing.assert_allclose(np.concatenate(parts, axis=1), whole, rtol=1e-5, atol=1e-5)
    assert cache.self_attention[0]["k"].shape == (3, kv_heads, 10, 4)
    generated = model.generate(tokens[:, :3], 6)
    assert (generated == model.generate(tokens[:, :3], 6, use_cache=False)).all()


def test_the_cache_of_a_grouped_model_takes_kv_heads_over_heads_of_a_full_ones_bytes():
    """The target: at most KV / H of a full cache's bytes (+10%), measured on the same tokens."""
    tokens = np.random.default_rng(0).integers(0, 13, (2, 12))
    bytes_of = {}
    for kv_heads in (8, 4, 2, 1):
        model = tiny_llama(8, kv_heads)
        cache = model.new_cache()
        with no_grad():
            model(tokens, cache)
        bytes_of[kv_heads] = cache.nbytes()
    assert bytes_of[8] == 2 * 2 * 2 * 8 * 12 * 4 * 4          # k and v, 2 layers, B 2, 8 heads, T 12, d_head 4, float32
    for kv_heads in (4, 2, 1):
        assert bytes_of[kv_heads] <= kv_heads / 8 * bytes_of[8] * 1.1
        assert bytes_of[kv_heads] == bytes_of[8] * kv_heads // 8


def test_a_checkpoint_keeps_the_kv_heads():
    model = tiny_llama(6, 2)
    restored = model_from(run_state(model))
    assert restored.config.num_kv_heads == 2
    assert restored.blocks.layers[1].self_attn.k_proj.weight.shape == (8, 24)
    tokens = np.arange(8)[None] % 13
    np.testing.assert_array_equal(restored(tokens).data, model(tokens).data)


@pytest.mark.parametrize("heads,kv_heads", HEAD_PAIRS)
@pytest.mark.parametrize("fused", [False, True])
def test_equals_pytorchs_scaled_dot_product_attention_with_enable_gqa(heads, kv_heads, fused):
    torch = pytest.importorskip("torch", reason="PyTorch (the optional bench extra) is not installed: "
                                                "no scaled_dot_product_attention(enable_gqa=True) to compare with")
    arrays = operands(heads, kv_heads, 6, 9, seed=heads * kv_heads)
    mask = masks(2, heads, 6, 9, seed=2)["padding"].copy()
    mask[:, :, 3] = True                                   # PyTorch gives NaN at fully masked rows; we give 0
    ours = [Tensor(x, requires_grad=True) for x in arrays]
    theirs = [torch.tensor(x, requires_grad=True) for x in arrays]
    out, _ = scaled_dot_product_attention(*ours, mask, enable_gqa=True, fused=fused)
    want = torch.nn.functional.scaled_dot_product_attention(*theirs, attn_mask=torch.tensor(mask), enable_gqa=True)
    np.testing.assert_allclose(out.data, want.detach().numpy(), **TOLERANCE[np.float64])
    dout = np.random.default_rng(7).standard_normal(out.shape)
    out.backward(dout)
    want.backward(torch.tensor(dout))
    for mine, theirs_ in zip(ours, theirs):
        np.testing.assert_allclose(mine.grad, theirs_.grad.numpy(), **TOLERANCE[np.float64])


def test_demos_gpt_arch_llama_takes_kv_heads(tmp_path, capsys):
    from demos import gpt
    small = ["--max-iters", "2", "--eval-every", "2", "--eval-iters", "1", "--block-size", "8", "--batch-size", "2",
             "--layers", "1", "--d-model", "16", "--heads", "4", "--sample-tokens", "3", "--data", __file__]
    metrics = gpt.main(small + ["--arch", "llama", "--kv-heads", "2", "--out", str(tmp_path)])
    assert metrics["model_config"]["num_kv_heads"] == 2
    assert "4 heads (2 key/value heads)" in capsys.readouterr().out
    resumed = gpt.main(["--resume", str(tmp_path), "--max-iters", "3"])
    assert resumed["model_config"]["num_kv_heads"] == 2 and resumed["iterations"] == 3
    capsys.readouterr()
    for argv, message in ((small + ["--arch", "llama", "--kv-heads", "3"], "--heads 4 is not a multiple of --kv-heads 3"),
                          (small + ["--kv-heads", "2"], "--kv-heads is not a flag of --arch gpt2"),
                          (["--resume", str(tmp_path), "--kv-heads", "4"], "--kv-heads 4 contradicts")):
        with pytest.raises(SystemExit) as stop:
            gpt.main(argv + ["--out", str(tmp_path / "other")])
        assert stop.value.code == 2 and message in capsys.readouterr().err


def test_the_learning_paths_cache_bytes_are_the_recipes_models():
    """docs/LEARNING_PATH.md's table of the cache's bytes: llama_config's model at the recipe's
    size (demos.gpt's defaults), one 64-token context, float32."""
    import os
    import re
    from fractions import Fraction
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "LEARNING_PATH.md")
    with open(path) as f:
        rows = re.findall(r"^\| (\d) [^|]*\| ([\d,]+) \| ([\d/]+) \|$", f.read(), re.M)
    assert [int(kv) for kv, _, _ in rows] == [4, 2, 1]
    full = None
    for kv_heads, nbytes, fraction in rows:
        manual_seed(0)
        model = DecoderOnly(llama_config(101, n_kv_head=int(kv_heads)))
        cache = model.new_cache()
        with no_grad():
            model(np.zeros((1, 64), np.int64), cache)
        full = full or cache.nbytes()
        assert cache.nbytes() == int(nbytes.replace(",", ""))
        assert Fraction(cache.nbytes(), full) == Fraction(fraction)
