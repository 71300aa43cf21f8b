"""The fused attention op: its Numba kernels against their numpy twins, and the op against
the composed path (matmul, masked_fill, softmax, matmul) it replaces."""

import numpy as np
import pytest

from autograd import Tensor, manual_seed
from autograd.engine_room import attention as fused
from autograd.kernels import reference
from transformer.attention import MultiHeadAttention
from transformer.masks import causal_mask
from tests.transformer.helpers import to_float64

TOLERANCE = {np.float32: 2e-5, np.float64: 1e-12}


def operands(dtype, n=3, t_q=5, t_k=130, d=6, d_v=7, seed=0):
    """Odd sizes, T_k beyond one key block, a random mask with one fully masked row."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal(shape).astype(dtype) for shape in ((n, t_q, d), (n, t_k, d), (n, t_k, d_v)))
    mask = rng.random((n, t_q, t_k)) < 0.6
    mask[min(1, n - 1), min(2, t_q - 1)] = False
    return q, k, v, mask


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_mask", [True, False])
@pytest.mark.parametrize("t_q,t_k,d", [(5, 130, 6), (70, 33, 6), (64, 96, 32)])
def test_kernels_match_their_numpy_twins(dtype, with_mask, t_q, t_k, d):
    """Several key blocks; several query blocks; dims that are whole register tiles, so
    that the kernels read the operands in place instead of padded copies."""
    q, k, v, mask = operands(dtype, t_q=t_q, t_k=t_k, d=d, d_v=d + 1 if d == 6 else d)
    mask = mask if with_mask else None
    out, lse = fused.attention_forward(q, k, v, mask, 0.4)
    want_out, want_lse = reference.attention_forward(q, k, v, mask, 0.4)
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(out, want_out, atol=tol, rtol=tol)
    np.testing.assert_allclose(lse, want_lse, atol=tol, rtol=tol)
    dout = np.random.default_rng(1).standard_normal(out.shape).astype(dtype)
    for got, want in zip(fused.attention_backward(q, k, v, mask, 0.4, out, lse, dout),
                         reference.attention_backward(q, k, v, mask, 0.4, want_out, want_lse, dout)):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, atol=10 * tol, rtol=10 * tol)
    if with_mask:
        assert lse[1, 2] == -np.inf and (out[1, 2] == 0).all()          # the fully masked query


def assert_kernels_match_twins(q, k, v, mask, scale=0.2):
    """Forward and backward (a random upstream gradient) against the numpy twins."""
    tol = TOLERANCE[q.dtype.type]
    out, lse = fused.attention_forward(q, k, v, mask, scale)
    want_out, want_lse = reference.attention_forward(q, k, v, mask, scale)
    np.testing.assert_allclose(out, want_out, atol=tol, rtol=tol)
    dout = np.random.default_rng(4).standard_normal(out.shape).astype(q.dtype)
    for got, want in zip(fused.attention_backward(q, k, v, mask, scale, out, lse, dout),
                         reference.attention_backward(q, k, v, mask, scale, want_out, want_lse, dout)):
        np.testing.assert_allclose(got, want, atol=10 * tol, rtol=10 * tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("t", [64, 96, 40])
def test_causal_mask_skips_the_keys_each_strip_does_not_see(dtype, t):
    """Under a causal mask each strip of 8 queries (or keys) multiplies only over the keys
    (or queries) it sees; whole tiles (64, 96: read in place) and padded ones (40)."""
    q, k, v, _ = operands(dtype, n=2, t_q=t, t_k=t, d=32, d_v=32, seed=3)
    assert_kernels_match_twins(q, k, v, np.broadcast_to(causal_mask(t), (2, t, t)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("t_q", [64, 45])                         # whole tiles, padded
def test_a_tile_of_scores_one_query_sees_is_computed(dtype, t_q):
    """The scores' products skip the tiles no query of theirs sees.  Here each strip of MR
    keys is seen by one query only (strip s by query s), so every column of a tile, its
    first and its last included, is the only one to see some strip: a tile skipped when
    the query seeing it sits on its edge would show up."""
    t_k = fused.MR * t_q
    mask = np.zeros((2, t_q, t_k), bool)
    for s in range(t_q):
        mask[:, s, s * fused.MR:(s + 1) * fused.MR] = True
    q, k, v, _ = operands(dtype, n=2, t_q=t_q, t_k=t_k, d=32, d_v=32, seed=5)
    assert_kernels_match_twins(q, k, v, mask)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("t_q,t_k,d", [(33, 65, 16), (66, 65, 5), (40, 65, 16), (64, 64, 16)])
@pytest.mark.parametrize("first_seen", [1, 3, 9])
def test_keys_no_query_sees_at_the_start_leave_the_gradients_right(dtype, t_q, t_k, d, first_seen):
    """Left padding: keys 0 .. first_seen - 1 masked for every query.  A block's first
    visible key was taken as the origin of its strips of MR gradient rows, so where it was
    not a multiple of the strip (and the keys were not a whole number of tiles) dk and dv
    came out with rows never written (0.5 off, or inf)."""
    rng = np.random.default_rng(first_seen)
    q, k, v = (rng.standard_normal((2, 2, t, d)).astype(dtype) for t in (t_q, t_k, t_k))
    padding = rng.random((2, 1, 1, t_k)) < 0.7
    padding[:, :, :, :first_seen] = False
    assert_kernels_match_twins(q, k, v, np.broadcast_to(padding, (2, 2, t_q, t_k)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("t,d", [(64, 32), (45, 6)])              # whole tiles (written in place), padded
def test_gradient_rows_no_product_reaches_are_zeroed_not_left_as_they_were(monkeypatch, dtype, t, d):
    """Each strip of MR gradient rows is written by the first product that reaches it (not
    zeroed first, then added to); strips no product reaches (keys no query sees, queries
    that see no key) must still come out zero, whatever the memory held: here it holds NaN."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, t, d)).astype(dtype) for _ in range(3))
    mask = rng.random((t, t)) < 0.5                             # seeded, True = may attend
    mask[:, 16:32] = False                                      # 16 keys (two strips) no query sees
    mask[40:] = False                                           # queries 40.. see no key
    mask = np.broadcast_to(mask, (2, t, t))
    out, lse = fused.attention_forward(q, k, v, mask, 0.3)
    dout = rng.standard_normal(out.shape).astype(dtype)
    monkeypatch.setattr(fused.np, "empty_like", lambda x, order="K": np.full_like(x, np.nan, order=order))
    got = fused.attention_backward(q, k, v, mask, 0.3, out, lse, dout)
    want = reference.attention_backward(q, k, v, mask, 0.3, *reference.attention_forward(q, k, v, mask, 0.3), dout)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])
    assert not got[1][:, 16:32].any() and not got[2][:, 16:32].any() and not got[0][:, 40:].any()


def test_a_mask_that_does_not_hold_the_matrices_is_refused():
    """The kernels index the mask per matrix: a (T_q, T_k) mask for N matrices, or one of
    the wrong size or dtype, is an error (before, it read past the mask's end)."""
    q, k, v, _ = operands(np.float32, n=3, t_q=4, t_k=6)
    for mask, seen in ((np.ones((4, 6), bool), r"bool \(4, 6\)"), (np.ones((3, 4, 5), bool), r"\(3, 4, 5\)"),
                       (np.ones((3, 4, 6), np.float32), "float32")):
        with pytest.raises(ValueError, match=r"leading dims hold the 3 matrices; got .*" + seen):
            fused.attention_forward(q, k, v, mask, 1.0)
        with pytest.raises(ValueError, match="boolean mask"):
            fused.attention_backward(q, k, v, mask, 1.0, q, q[..., 0], q)


def test_a_mask_broadcast_over_heads_is_kept_once_per_batch_element():
    """(B, 1, T_q, T_k) padding masks broadcast over H heads: B distinct matrices, not B x H,
    and the same results as the mask copied out to (B H, T_q, T_k)."""
    q, k, v, _ = operands(np.float64, n=6, t_q=5, t_k=9)                 # N = B x H = 3 x 2
    per_batch = np.random.default_rng(5).random((3, 1, 5, 9)) < 0.7
    mask = np.broadcast_to(per_batch, (3, 2, 5, 9))
    matrices, index = fused._mask_matrices(mask, 6)
    assert matrices.shape == (3, 5, 9) and index.tolist() == [0, 0, 1, 1, 2, 2]
    copied = np.ascontiguousarray(mask).reshape(6, 5, 9)
    out, lse = fused.attention_forward(q, k, v, mask, 0.5)
    want_out, want_lse = reference.attention_forward(q, k, v, copied, 0.5)
    np.testing.assert_allclose(out, want_out, atol=1e-12)
    for got, want in zip(fused.attention_backward(q, k, v, mask, 0.5, out, lse, out),
                         reference.attention_backward(q, k, v, copied, 0.5, want_out, want_lse, want_out)):
        np.testing.assert_allclose(got, want, atol=1e-11)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("t,d", [(64, 32), (13, 20)])              # whole tiles (read in place), padded
def test_heads_of_a_b_t_h_d_array_go_in_and_out_without_copies(dtype, t, d):
    """q, k, v as MultiHeadAttention makes them: heads of a (B, T, H, d) array seen as
    (B, H, T, d).  The kernels read them where they are; out is written in (B, T, H, d)
    memory and each gradient in its operand's, so merging the heads back is a view."""
    rng = np.random.default_rng(t + d)
    b, h = 3, 2
    q, k, v = (rng.standard_normal((b, t, h, d)).astype(dtype).transpose(0, 2, 1, 3) for _ in range(3))
    mask = np.broadcast_to(causal_mask(t), (b, h, t, t))
    out, lse = fused.attention_forward(q, k, v, mask, 0.3)
    assert out.shape == (b, h, t, d) and lse.shape == (b, h, t)
    assert out.transpose(0, 2, 1, 3).flags.c_contiguous                   # (B, T, H, d) memory
    want_out, want_lse = reference.attention_forward(q, k, v, mask, 0.3)
    tol = TOLERANCE[dtype]
    np.testing.assert_allclose(out, want_out, atol=tol, rtol=tol)
    np.testing.assert_allclose(lse, want_lse, atol=tol, rtol=tol)
    dout = rng.standard_normal((b, t, h, d)).astype(dtype).transpose(0, 2, 1, 3)
    grads = fused.attention_backward(q, k, v, mask, 0.3, out, lse, dout)
    for got, want in zip(grads, reference.attention_backward(q, k, v, mask, 0.3, want_out, want_lse, dout)):
        assert got.transpose(0, 2, 1, 3).flags.c_contiguous
        np.testing.assert_allclose(got, want, atol=10 * tol, rtol=10 * tol)


def test_more_than_two_batch_dims_and_rows_out_of_order():
    """(2, 3, 2, T, d) batches are merged to two dims; rows read backwards are copied first."""
    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 3, 2, 9, 5)) for _ in range(3))
    out, lse = fused.attention_forward(q, k[..., ::-1, :], v, None, 0.7)
    want_out, want_lse = reference.attention_forward(q, k[..., ::-1, :], v, None, 0.7)
    assert out.shape == (2, 3, 2, 9, 5) and lse.shape == (2, 3, 2, 9)
    np.testing.assert_allclose(out, want_out, atol=1e-12)
    np.testing.assert_allclose(lse, want_lse, atol=1e-12)
    for got, want in zip(fused.attention_backward(q, k[..., ::-1, :], v, None, 0.7, out, lse, out),
                         reference.attention_backward(q, k[..., ::-1, :], v, None, 0.7, want_out, want_lse, want_out)):
        np.testing.assert_allclose(got, want, atol=1e-11)


def test_prepare_with_fused_attention_makes_its_kernels_ready(monkeypatch):
    from autograd import kernels
    monkeypatch.setattr(fused, "_kernels", {})                  # as in a process that has not used them
    kernels.prepare(np.float64, fused_attention=True)
    cut = "attention_forward" in kernels.kernels_cut()         # a student copy without them (twins.py) makes none
    assert set(fused._kernels) == (set() if cut else {np.float64})


def test_kernels_take_non_contiguous_size_one_and_empty_inputs():
    q, k, v, mask = operands(np.float64, n=2, t_q=1, t_k=1, d=3, d_v=1)
    out, lse = fused.attention_forward(q, k, v, None, 1.0)
    np.testing.assert_allclose(out, v)                                   # one key: weight 1
    big = np.random.default_rng(2).standard_normal((2, 6, 4))
    q_t = np.swapaxes(big, 1, 2)                                         # (2, 4, 6), not contiguous
    np.testing.assert_allclose(fused.attention_forward(q_t, q_t, q_t, None, 0.3)[0],
                               reference.attention_forward(q_t, q_t, q_t, None, 0.3)[0], atol=1e-12)
    empty = np.zeros((2, 0, 3))
    out, lse = fused.attention_forward(empty, np.zeros((2, 4, 3)), np.zeros((2, 4, 5)), None, 1.0)
    assert out.shape == (2, 0, 5) and lse.shape == (2, 0)


def test_nan_propagates_like_the_composed_softmax():
    q, k, v, _ = operands(np.float64, n=1, t_q=2, t_k=4, d=3, d_v=2)
    k[0, 1, 0] = np.nan
    out, _ = fused.attention_forward(q, k, v, None, 1.0)
    assert np.isnan(out).all()


def layer_of(dtype, dropout=0.0, fused=False):
    manual_seed(3)
    layer = MultiHeadAttention(8, 2, dropout=dropout, fused=fused)
    return to_float64(layer) if dtype == np.float64 else layer


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_equals_composed_with_causal_padding_and_fully_masked_rows(dtype):
    rng = np.random.default_rng(4)
    x_data = rng.standard_normal((2, 5, 8)).astype(dtype)
    padding = np.array([[True] * 5, [True, True, True, False, False]])[:, None, None, :]    # (B, 1, 1, T)
    mask = causal_mask(5) & padding
    mask = mask & np.array([True, True, True, True, False])[:, None]                        # query 4: no keys
    grad = rng.standard_normal((2, 5, 8)).astype(dtype)
    results = {}
    for fused_mode in (True, False):
        layer = layer_of(dtype, fused=fused_mode)             # the same weights both ways
        x = Tensor(x_data, requires_grad=True)
        out = layer(x, x, x, mask)
        out.backward(grad)
        results[fused_mode] = (out.data, x.grad, [p.grad for p in layer.parameters()], layer.attn_weights)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    (out_f, dx_f, dp_f, w_f), (out_c, dx_c, dp_c, w_c) = results[True], results[False]
    np.testing.assert_allclose(out_f, out_c, atol=tol, rtol=tol)
    np.testing.assert_allclose(dx_f, dx_c, atol=tol, rtol=tol)
    for a, b in zip(dp_f, dp_c):
        np.testing.assert_allclose(a, b, atol=tol, rtol=tol)
    np.testing.assert_allclose(w_f, w_c, atol=tol)                       # the heatmaps' weights, both ways
    assert (w_f[:, :, 4] == 0).all() and np.allclose(w_f[:, :, :4].sum(-1), 1)


def test_attention_dropout_uses_the_composed_path():
    layer = layer_of(np.float64, dropout=0.5, fused=True)
    x = Tensor(np.ones((1, 3, 8)))
    layer(x, x, x)
    assert layer._weights is not None and layer._weights_from is None   # weights came from the composed graph
    layer.eval()
    layer(x, x, x)
    assert layer._weights is None and layer._weights_from is not None   # no dropout in eval: fused
