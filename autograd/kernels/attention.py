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

What keeps it from being slower still (it is slower than the composed path, whose four
ops now run on the GEMM kernels; see demos/bench_attention.py):
- a row visits only the keys from its first to its last unmasked one (`key_range`): under a
  causal mask, query i stops near key i, about half the work;
- every inner loop runs along a contiguous 1-D slice, so that it vectorizes: the scores of a
  row are built as  s[:] += q_ic * k^T[c, :]  over c, from a transposed copy of the keys made
  once per matrix (a dot product per key ends in a slow horizontal sum), and likewise
  dout_i . v_j from a transposed copy of the values;
- exp is fast_math's polynomial, which vectorizes (libm's exp is a scalar call).

A query whose keys are all masked gets output 0, lse -inf and zero gradient (as the composed
softmax gives).  Threads split the N = batch x heads matrices, so no two write the same row.
The numpy twins are reference.attention_forward and reference.attention_backward.
"""

import numpy as np
from numba import prange
from numba.extending import register_jitable

from autograd.kernels.fast_math import make_exp_nonpositive, variant
from autograd.kernels.gemm import aligned_empty

BLOCK = 64                    # keys per block of the online softmax
VECTOR = 16                   # numbers per AVX-512 register (float32)


@register_jitable
def key_range(allowed, has_mask, t_k):
    """[first, last + 1) of the keys a query may attend to (empty if none), from its row
    of the mask, widened to a multiple of VECTOR keys where there is room: the masked keys
    this adds get weight 0, and loops without a scalar remainder run faster."""
    if not has_mask:
        return 0, t_k
    low, high = 0, t_k
    while low < high and not allowed[low]:
        low += 1
    while high > low and not allowed[high - 1]:
        high -= 1
    if high > low:
        high = min(t_k, low + (high - low + VECTOR - 1) // VECTOR * VECTOR)
    return low, high


@register_jitable
def transpose_into(x, target):
    """target[c, j] = x[j, c]."""
    for j in range(x.shape[0]):
        for c in range(x.shape[1]):
            target[c, j] = x[j, c]


def _make_attention(dtype):
    """The forward and backward kernels for one dtype (every constant of that dtype: a
    float64 -inf in a float32 kernel would turn its arithmetic into float64)."""
    f = np.dtype(dtype).type
    ZERO, NEG_INF = f(0), f(-np.inf)
    exp_nonpositive = make_exp_nonpositive(dtype)

    @register_jitable
    def scores(q_i, kt, allowed, has_mask, j0, s):
        """s[j] = q_i . k_{j0 + j} * scale (q_i comes scaled), -inf where masked.  Loops run
        over 1-D slices: indexed as row[j0 + j] instead, LLVM did not vectorize them (10x slower)."""
        width = s.shape[0]
        s[:] = ZERO
        for c in range(q_i.shape[0]):
            q_ic = q_i[c]
            row = kt[c, j0:j0 + width]
            for j in range(width):
                s[j] += q_ic * row[j]
        if has_mask:
            allowed = allowed[j0:j0 + width]
            for j in range(width):
                s[j] = s[j] if allowed[j] else NEG_INF

    def attention_forward(q, k, v, mask, mask_of, has_mask, scale, out, lse):
        n_mats, t_q, d = q.shape
        t_k, d_v = k.shape[1], v.shape[2]
        for n in prange(n_mats):
            kt = aligned_empty((d, t_k), q.dtype)          # the keys transposed: rows of scores are contiguous
            transpose_into(k[n], kt)
            block = aligned_empty((BLOCK,), q.dtype)       # one block of scores, then of exp(s - m)
            q_i = aligned_empty((d,), q.dtype)
            acc = aligned_empty((d_v,), q.dtype)           # running sum of exp(s - m) v
            for i in range(t_q):
                allowed = mask[mask_of[n], i] if has_mask else mask[0, 0]
                low, high = key_range(allowed, has_mask, t_k)
                m, l = NEG_INF, ZERO
                acc[:] = ZERO
                for c in range(d):
                    q_i[c] = q[n, i, c] * scale
                for j0 in range(low, high, BLOCK):
                    s = block[:min(BLOCK, high - j0)]
                    scores(q_i, kt, allowed, has_mask, j0, s)
                    block_max = NEG_INF
                    for j in range(s.shape[0]):
                        block_max = max(block_max, s[j])
                    if block_max == NEG_INF:               # every key of this block is masked
                        continue
                    if block_max > m:                      # rescale what was summed under the old maximum
                        correction = exp_nonpositive(m - block_max)
                        l *= correction
                        for c in range(d_v):
                            acc[c] *= correction
                        m = block_max
                    for j in range(s.shape[0]):
                        s[j] = exp_nonpositive(s[j] - m)   # 0 for masked keys (-inf)
                        l += s[j]
                    for j in range(s.shape[0]):
                        p, v_j = s[j], v[n, j0 + j]
                        for c in range(d_v):
                            acc[c] += p * v_j[c]
                if l == ZERO:                              # a fully masked query
                    out[n, i, :] = ZERO
                    lse[n, i] = NEG_INF
                else:
                    for c in range(d_v):
                        out[n, i, c] = acc[c] / l
                    lse[n, i] = m + np.log(l)

    def attention_backward(q, k, v, mask, mask_of, has_mask, scale, out, lse, dout, dq, dk, dv):
        n_mats, t_q, d = q.shape
        t_k, d_v = k.shape[1], v.shape[2]
        for n in prange(n_mats):
            kt = aligned_empty((d, t_k), q.dtype)
            transpose_into(k[n], kt)
            vt = aligned_empty((d_v, t_k), q.dtype)        # the values transposed, for dout_i . v_j
            transpose_into(v[n], vt)
            p_block = aligned_empty((BLOCK,), q.dtype)
            ds_block = aligned_empty((BLOCK,), q.dtype)
            q_i = aligned_empty((d,), q.dtype)
            dq[n] = ZERO
            dk[n] = ZERO
            dv[n] = ZERO
            for i in range(t_q):
                if lse[n, i] == NEG_INF:
                    continue
                allowed = mask[mask_of[n], i] if has_mask else mask[0, 0]
                low, high = key_range(allowed, has_mask, t_k)
                dout_i, q_raw, dq_i = dout[n, i], q[n, i], dq[n, i]
                d_i = ZERO
                for c in range(d_v):
                    d_i += dout_i[c] * out[n, i, c]
                for c in range(d):
                    q_i[c] = q_raw[c] * scale
                for j0 in range(low, high, BLOCK):
                    width = min(BLOCK, high - j0)
                    p, ds = p_block[:width], ds_block[:width]
                    scores(q_i, kt, allowed, has_mask, j0, p)
                    for j in range(width):
                        p[j] = exp_nonpositive(p[j] - lse[n, i])   # the weights again; 0 where masked
                    ds[:] = ZERO
                    for c in range(d_v):                   # dout_i . v_j
                        g, row = dout_i[c], vt[c, j0:j0 + width]
                        for j in range(width):
                            ds[j] += g * row[j]
                    for j in range(width):
                        ds[j] = p[j] * (ds[j] - d_i) * scale   # ds_ij, times the scale of the scores
                    for j in range(width):                 # one loop per output: fewer arrays that might alias
                        p_j, dv_j = p[j], dv[n, j0 + j]
                        for c in range(d_v):
                            dv_j[c] += p_j * dout_i[c]
                    for j in range(width):
                        ds_j, dk_j = ds[j], dk[n, j0 + j]
                        for c in range(d):
                            dk_j[c] += ds_j * q_raw[c]
                    for j in range(width):
                        ds_j, k_j = ds[j], k[n, j0 + j]
                        for c in range(d):
                            dq_i[c] += ds_j * k_j[c]

    name = np.dtype(dtype).name
    return variant(attention_forward, name, parallel=False), variant(attention_backward, name, parallel=False)


_kernels = {}


def _kernels_for(dtype):
    if dtype not in _kernels:
        _kernels[dtype] = _make_attention(dtype)
    return _kernels[dtype]


_NO_MASK = np.ones((1, 1, 1), dtype=np.bool_)


def _mask_matrices(mask, n):
    """(the distinct (T_q, T_k) masks as one C-contiguous (M, T_q, T_k) array, for each of
    the n matrices the index of its mask).  One causal mask broadcast over batch and heads
    stays one matrix instead of being copied n times."""
    if mask is None:
        return _NO_MASK, np.zeros(n, np.int64)
    if mask.strides[0] == 0:
        return np.ascontiguousarray(mask[:1]), np.zeros(n, np.int64)
    return np.ascontiguousarray(mask), np.arange(n)


def attention_forward(q, k, v, mask, scale):
    """q (N, T_q, d), k (N, T_k, d), v (N, T_k, d_v), mask (N, T_q, T_k) bool or None ->
    (out (N, T_q, d_v), lse (N, T_q)).  Same as reference.attention_forward."""
    q, k, v = (np.ascontiguousarray(x) for x in (q, k, v))
    out = np.empty(q.shape[:2] + (v.shape[2],), q.dtype)
    lse = np.empty(q.shape[:2], q.dtype)
    if out.size:
        forward = _kernels_for(q.dtype.type)[0]
        forward(q, k, v, *_mask_matrices(mask, len(q)), mask is not None, q.dtype.type(scale), out, lse)
    else:
        lse[...] = -np.inf
    return out, lse


def attention_backward(q, k, v, mask, scale, out, lse, dout):
    """Gradients (dq, dk, dv) of attention_forward's output; same as reference.attention_backward."""
    q, k, v, out, dout = (np.ascontiguousarray(x) for x in (q, k, v, out, dout.astype(q.dtype, copy=False)))
    dq, dk, dv = np.empty_like(q), np.empty_like(k), np.empty_like(v)
    backward = _kernels_for(q.dtype.type)[1]
    backward(q, k, v, *_mask_matrices(mask, len(q)), mask is not None, q.dtype.type(scale), out, lse, dout, dq, dk, dv)
    return dq, dk, dv
