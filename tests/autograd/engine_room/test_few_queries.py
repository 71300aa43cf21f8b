"""few_queries.py: attention of a few queries (a generated token's) against the numpy
definition, for every query count it takes, both dtypes, odd sizes, masks with a fully
masked query, grouped-query heads, operands that are views, empty and size-1 dims, and any
number of threads' shares; and the fused kernel it stands in for gives the same to rounding."""

import numpy as np
import pytest

from autograd.engine_room import attention as fused
from autograd.engine_room import few_queries
from autograd.kernels import reference

TOLERANCE = {np.float32: 2e-5, np.float64: 1e-12}


def operands(dtype, batch, heads, kv_heads, t_q, t_k, d, d_v, seed, with_mask):
    """q (B, H, T_q, d), k (B, KV, T_k, d), v (B, KV, T_k, d_v) and a mask (B, H, T_q, T_k)
    broadcast over the heads, with the last query of the first sequence fully masked."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, heads, t_q, d)).astype(dtype)
    k, v = (rng.standard_normal((batch, kv_heads, t_k, width)).astype(dtype) for width in (d, d_v))
    if not with_mask:
        return q, k, v, None
    mask = rng.random((batch, 1, t_q, t_k)) < 0.6
    mask[0, 0, -1] = False
    return q, k, v, np.broadcast_to(mask, (batch, heads, t_q, t_k))


def assert_matches_numpy(q, k, v, mask, scale=0.3):
    dtype = q.dtype.type
    out, lse = fused.attention_forward(q, k, v, mask, scale)
    want_out, want_lse = reference.attention_forward(q, k, v, mask, scale)
    assert out.dtype == lse.dtype == dtype and out.shape == want_out.shape and lse.shape == want_lse.shape
    np.testing.assert_allclose(out, want_out, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])
    np.testing.assert_allclose(lse, want_lse, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])
    return out, lse


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_mask", [True, False])
@pytest.mark.parametrize("batch, heads, kv_heads, t_q, t_k, d, d_v", [
    (1, 9, 3, 1, 100, 64, 64),           # SmolLM2-135M's step: three queries per kv head
    (2, 4, 4, 1, 7, 5, 3),               # one query per matrix, odd dims
    (2, 3, 3, 8, 33, 17, 9),             # as many queries as it takes
    (1, 8, 1, 1, 130, 6, 7),             # multi-query: eight queries on one kv head
    (3, 2, 2, 2, 1, 1, 1),               # one key, size-1 dims
])
def test_few_queries_match_numpy(dtype, with_mask, batch, heads, kv_heads, t_q, t_k, d, d_v):
    q, k, v, mask = operands(dtype, batch, heads, kv_heads, t_q, t_k, d, d_v, t_q * t_k + d, with_mask)
    assert few_queries.takes(q.reshape(batch, kv_heads, heads // kv_heads * t_q, d))
    out, lse = assert_matches_numpy(q, k, v, mask)
    if with_mask:
        assert (lse[0, :, -1] == -np.inf).all() and (out[0, :, -1] == 0).all()        # the fully masked query


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_heads_seen_through_a_transpose_are_read_in_place(dtype):
    """q, k, v as MultiHeadAttention makes them: heads of (B, T, H, d) arrays seen as (B, H, T, d)."""
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, t, 3, 5)).astype(dtype).transpose(0, 2, 1, 3) for t in (2, 11, 11))
    assert_matches_numpy(q, k, v, None)


def test_empty_dims_give_empty_or_zero_results():
    rng = np.random.default_rng(2)
    q = rng.standard_normal((2, 3, 1, 4)).astype(np.float32)
    out, lse = fused.attention_forward(q, np.zeros((2, 3, 0, 4), np.float32), np.zeros((2, 3, 0, 5), np.float32),
                                       None, 1.0)                                     # no keys: nothing to attend
    assert out.shape == (2, 3, 1, 5) and not out.any() and (lse == -np.inf).all()
    out, lse = fused.attention_forward(q[:0], np.zeros((0, 3, 4, 4), np.float32), np.zeros((0, 3, 4, 5), np.float32),
                                       None, 1.0)                                     # no sequences
    assert out.shape == (0, 3, 1, 5) and lse.shape == (0, 3, 1)


def test_a_nan_reaches_its_query_only():
    q, k, v, _ = operands(np.float32, 1, 2, 2, 2, 9, 4, 4, 3, False)
    k[0, 1, 4, 0] = np.nan                                                          # one key of head 1
    out, lse = fused.attention_forward(q, k, v, None, 0.5)
    assert np.isnan(out[0, 1]).all() and np.isnan(lse[0, 1]).all() and np.isfinite(out[0, 0]).all()


@pytest.mark.parametrize("chunks", [1, 2, 3, 5])
def test_any_number_of_shares_gives_the_same_bits(chunks):
    q, k, v, _ = operands(np.float32, 2, 6, 3, 2, 40, 8, 8, chunks, False)
    q4 = q.reshape(2, 3, 4, 8)                                       # two queries of two heads per kv head
    masks, mask_of = fused._mask_matrices(np.random.default_rng(chunks).random((2, 3, 4, 40)) < 0.6, 6)
    outs = []
    for count in (1, chunks):                # the kernel itself: forward keeps work this small on one thread
        out, lse = np.full((2, 3, 4, 8), np.nan, np.float32), np.full((6, 4), np.nan, np.float32)
        scores = np.empty((count, 40), np.float32)                      # a row of scores per share
        few_queries.forward_kernel(np.float32)(q4, k, v, masks, mask_of, True, np.float32(0.5), out, lse, scores, count)
        outs.append((out, lse))
    for one, shared in zip(*outs):
        np.testing.assert_array_equal(shared, one)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_fused_kernel_it_stands_in_for_agrees(monkeypatch, dtype):
    """The same few queries through the blocked fused kernel (few_queries turned off)."""
    q, k, v, mask = operands(dtype, 2, 6, 2, 1, 70, 16, 16, 7, True)
    ours = fused.attention_forward(q, k, v, mask, 0.25)
    monkeypatch.setattr(few_queries, "MAX_QUERIES", 0)
    blocked = fused.attention_forward(q, k, v, mask, 0.25)
    for got, want in zip(ours, blocked):
        np.testing.assert_allclose(got, want, atol=TOLERANCE[dtype], rtol=TOLERANCE[dtype])


def test_more_queries_go_to_the_blocked_kernel():
    q = np.zeros((1, 2, few_queries.MAX_QUERIES + 1, 4), np.float32)
    assert few_queries.takes(q[:, :, :-1]) and not few_queries.takes(q)
