"""Attention of a few queries over their keys: a step of generation with the key/value cache.

The fused kernel (attention.py) cuts the queries into blocks of QUERY_BLOCK = 32, padding
them to whole blocks and copying q, k and v into padded buffers.  A generated token has one
query per head (G per key/value head under grouped-query attention, stacked by
_pack_groups), so that kernel would copy and multiply some ten to thirty times what is
needed: at SmolLM2-135M's size its call took as long as a layer's q_proj.  Here each
matrix's few query rows (at most MAX_QUERIES) meet the keys and values where they lie, with
three loops over the keys per query:

    s_j = scale q . k_j  (-inf where masked),   m = max_j s_j
    p_j = exp(s_j - m),   l = sum_j p_j,   out = sum_j p_j v_j / l,   lse = m + log l

A query whose keys are all masked gets zeros and lse -inf, as in the fused kernel; its sums
are grouped differently from the fused kernel's, so the two agree to float rounding.  Threads
split the matrices, as there.  The numpy twin is reference.attention_forward.
"""

import numba
import numpy as np

from autograd.engine_room import chunks, gemm
from autograd.engine_room.dispatch import PARALLEL_MIN_FLOPS
from autograd.engine_room.fast_math import JIT, make_exp_nonpositive

MAX_QUERIES = 8                     # query rows per matrix (G T_q under grouped-query attention) that come here


def takes(q4):
    """Whether attention over q4 (B1, B2, T_q, d) goes here: a few queries per matrix."""
    return q4.shape[2] <= MAX_QUERIES


def _make(dtype):
    """The forward chunk function for one dtype (its constants of that dtype, as attention.py's)."""
    f = np.dtype(dtype).type
    ZERO, NEG_INF = f(0), f(-np.inf)
    exp_nonpositive = make_exp_nonpositive(dtype)

    def few_queries_forward(q, k, v, mask, mask_of, has_mask, scale, out, lse, scores, chunk, chunks):
        """Matrices chunk * N // chunks .. of q, k, v (B1, B2, T, d) into out and lse (N, T_q);
        scores (chunks, T_k): each chunk's row of scores."""
        # BEGIN TWIN softmax softmax_backward log_softmax attention
        heads, t_q, d = q.shape[1], q.shape[2], q.shape[3]
        t_k, d_v = k.shape[2], v.shape[3]
        n_mats = q.shape[0] * heads
        s = scores[chunk]
        for n in range(chunk * n_mats // chunks, (chunk + 1) * n_mats // chunks):
            b, h = n // heads, n % heads
            q_n, k_n, v_n, out_n = gemm.matrix_at(q, b, h), gemm.matrix_at(k, b, h), gemm.matrix_at(v, b, h), \
                gemm.matrix_at(out, b, h)
            allowed = mask[mask_of[n]]
            for i in range(t_q):
                query, m = gemm.row_run(q_n, i, 0, d), NEG_INF
                for j in range(t_k):                                       # s_j = scale q . k_j, and its max
                    if has_mask and not allowed[i, j]:
                        s[j] = NEG_INF
                        continue
                    key, total = gemm.row_run(k_n, j, 0, d), ZERO
                    for c in range(d):
                        total += query[c] * key[c]
                    s[j] = total * scale
                    if s[j] > m or s[j] != s[j]:                           # a NaN wins, as in the fused kernel
                        m = s[j]
                target = gemm.row_run(out_n, i, 0, d_v)
                target[:] = ZERO
                if m == NEG_INF:                                           # every key masked
                    lse[n, i] = NEG_INF
                    continue
                l = ZERO
                for j in range(t_k):                                       # p_j = exp(s_j - m), l = sum p_j
                    s[j] = ZERO if s[j] == NEG_INF else exp_nonpositive(s[j] - m)
                    l += s[j]
                for j in range(t_k):                                       # sum p_j v_j
                    if s[j] != ZERO:
                        value, p = gemm.row_run(v_n, j, 0, d_v), s[j]
                        for c in range(d_v):
                            target[c] += p * value[c]
                for c in range(d_v):
                    target[c] /= l
                lse[n, i] = m + np.log(l)
        # END TWIN

    t = numba.from_dtype(np.dtype(dtype))
    given = numba.types.Array(t, 4, "A", readonly=True)                # (B1, B2, T, d), rows contiguous
    argument_types = (given, given, given, numba.types.Array(numba.boolean, 3, "C", readonly=True),
                      numba.types.Array(numba.int64, 1, "C", readonly=True), numba.boolean, t,
                      numba.types.Array(t, 4, "A"), numba.types.Array(t, 2, "C"), numba.types.Array(t, 2, "C"))
    return chunks.chunked(few_queries_forward, np.dtype(dtype).name, argument_types, nogil=True, **JIT)


_kernels = {}


def forward_kernel(dtype):
    """The chunk function for dtype, compiled (or loaded from Numba's cache) on first use."""
    if dtype not in _kernels:
        _kernels[dtype] = _make(dtype)
    return _kernels[dtype]


def forward(q4, k4, v4, masks, mask_of, has_mask, scale, out, lse, chunk_count):
    """attention.py's forward kernel's call, for takes(q4): out (B1, B2, T_q, d_v) and lse
    (N, T_q) written; on one thread unless the work pays for waking the others (a
    generated token's attention, some hundred thousand multiply-adds a layer, does not)."""
    dtype = q4.dtype.type
    if 2 * k4.shape[2] * (q4.size + out.size) < PARALLEL_MIN_FLOPS:                  # q k^T and p v
        chunk_count = 1
    scores = np.empty((chunk_count, k4.shape[2]), q4.dtype)
    forward_kernel(dtype)(q4, k4, v4, masks, mask_of, has_mask, dtype(scale), out, lse, scores, chunk_count)
