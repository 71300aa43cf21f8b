"""Fused attention kernels: softmax(q k^T * scale, masked) v in one pass, and its backward.

The composed path (matmul, masked_fill, softmax, matmul) writes the (N, T_q, T_k) scores
and weights to memory and reads them back several times.  Here each query row streams over
the keys in blocks of BLOCK, FlashAttention-style, keeping only a running maximum m, a
running sum l of exp(s - m) and a running weighted sum of values; when a block raises the
maximum, what was accumulated so far is rescaled by exp(m_old - m_new):

    out_i = sum_j exp(s_ij - m) v_j / l,        lse_i = m + log l   (log-sum-exp of the row)

Only `out` and `lse` are saved.  The backward recomputes each weight p_ij = exp(s_ij - lse_i)
instead of storing them, with D_i = dout_i . out_i:

    dv_j += p_ij dout_i,   ds_ij = p_ij (dout_i . v_j - D_i),   dq_i += ds_ij k_j scale,   dk_j += ds_ij q_i scale

A query whose keys are all masked gets output 0, lse -inf and zero gradient (as the composed
softmax gives).  Threads split the N = batch x heads matrices, so no two write the same row.
The numpy twins are reference.attention_forward and reference.attention_backward.
"""

import numpy as np
from numba import njit, prange

FASTMATH = {"nsz", "reassoc", "contract", "arcp", "afn"}
BLOCK = 64


@njit(parallel=True, fastmath=FASTMATH, cache=True, boundscheck=False, error_model="numpy")
def _forward(q, k, v, mask, has_mask, scale, zero, out, lse):
    n_mats, t_q, d = q.shape
    t_k, d_v = k.shape[1], v.shape[2]
    neg_inf = -np.inf
    for n in prange(n_mats):
        s = np.empty(BLOCK, q.dtype)                       # one block of scores
        acc = np.empty(d_v, q.dtype)                       # running sum of exp(s - m) v
        for i in range(t_q):
            m, l = zero + neg_inf, zero
            acc[:] = 0
            for j0 in range(0, t_k, BLOCK):
                j1 = min(j0 + BLOCK, t_k)
                block_max = neg_inf
                for j in range(j0, j1):
                    if has_mask and not mask[n, i, j]:
                        s[j - j0] = neg_inf
                        continue
                    dot = zero
                    for c in range(d):
                        dot += q[n, i, c] * k[n, j, c]
                    s[j - j0] = dot * scale
                    block_max = max(block_max, s[j - j0])
                if block_max == neg_inf:                   # every key of this block is masked
                    continue
                new_m = max(m, block_max)
                if new_m != m:                             # rescale what was summed under the old maximum
                    correction = np.exp(m - new_m)
                    l *= correction
                    for c in range(d_v):
                        acc[c] *= correction
                    m = new_m
                for j in range(j0, j1):
                    if s[j - j0] == neg_inf:
                        continue
                    p = np.exp(s[j - j0] - m)
                    l += p
                    for c in range(d_v):
                        acc[c] += p * v[n, j, c]
            if l == zero:                                  # a fully masked query
                out[n, i, :] = 0
                lse[n, i] = neg_inf
            else:
                for c in range(d_v):
                    out[n, i, c] = acc[c] / l
                lse[n, i] = m + np.log(l)


@njit(parallel=True, fastmath=FASTMATH, cache=True, boundscheck=False, error_model="numpy")
def _backward(q, k, v, mask, has_mask, scale, zero, out, lse, dout, dq, dk, dv):
    n_mats, t_q, d = q.shape
    t_k, d_v = k.shape[1], v.shape[2]
    for n in prange(n_mats):
        dq[n] = 0
        dk[n] = 0
        dv[n] = 0
        for i in range(t_q):
            if lse[n, i] == -np.inf:
                continue
            d_i = zero
            for c in range(d_v):
                d_i += dout[n, i, c] * out[n, i, c]
            for j in range(t_k):
                if has_mask and not mask[n, i, j]:
                    continue
                dot = zero
                for c in range(d):
                    dot += q[n, i, c] * k[n, j, c]
                p = np.exp(dot * scale - lse[n, i])
                dp = zero
                for c in range(d_v):
                    dv[n, j, c] += p * dout[n, i, c]
                    dp += dout[n, i, c] * v[n, j, c]
                ds = p * (dp - d_i) * scale
                for c in range(d):
                    dq[n, i, c] += ds * k[n, j, c]
                    dk[n, j, c] += ds * q[n, i, c]


_NO_MASK = np.ones((1, 1, 1), dtype=np.bool_)


def attention_forward(q, k, v, mask, scale):
    """q (N, T_q, d), k (N, T_k, d), v (N, T_k, d_v), mask (N, T_q, T_k) bool or None ->
    (out (N, T_q, d_v), lse (N, T_q)).  Same as reference.attention_forward."""
    q, k, v = (np.ascontiguousarray(x) for x in (q, k, v))
    out = np.empty(q.shape[:2] + (v.shape[2],), q.dtype)
    lse = np.empty(q.shape[:2], q.dtype)
    if out.size:
        has_mask = mask is not None
        t = q.dtype.type
        _forward(q, k, v, np.ascontiguousarray(mask) if has_mask else _NO_MASK, has_mask, t(scale), t(0), out, lse)
    else:
        lse[...] = -np.inf
    return out, lse


def attention_backward(q, k, v, mask, scale, out, lse, dout):
    """Gradients (dq, dk, dv) of attention_forward's output; same as reference.attention_backward."""
    q, k, v, out, dout = (np.ascontiguousarray(x) for x in (q, k, v, out, dout.astype(q.dtype, copy=False)))
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    has_mask = mask is not None
    t = q.dtype.type
    _backward(q, k, v, np.ascontiguousarray(mask) if has_mask else _NO_MASK, has_mask, t(scale), t(0),
              out, lse, dout, dq, dk, dv)
    return dq, dk, dv
