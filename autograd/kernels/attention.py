"""Fused attention kernels: softmax(q k^T * scale, masked) v in one pass, and its backward.

The composed path (matmul, masked_fill, softmax, matmul) writes the (N, T_q, T_k) scores
and weights to memory and reads them back several times.  Here, as in FlashAttention, each
matrix is cut into blocks of QUERY_BLOCK queries x KEY_BLOCK keys, small enough to stay in
L1 with their operands; every product of a block runs on the small GEMM's register tile
(`product`, the micro-kernel of small_gemm.py), and only `out` and each row's log-sum-exp
`lse` are written out.

Forward, for a block of queries: stream over the blocks of keys with an online softmax,
keeping per query a running maximum m, a running sum l of exp(s - m) and a running
output O; when a block raises the maximum, what was accumulated is rescaled by
exp(m_old - m_new):

    S = (scale Q) K_blk^T,   P = exp(S - m),   O = O exp(m_old - m) + P V_blk
    out_i = O_i / l_i,       lse_i = m_i + log l_i

Backward recomputes the weights P = exp(S - lse) block by block instead of storing them;
with D_i = dout_i . out_i and G = P * (dout V^T - D)  (the gradient of the scores):

    dV_blk += P^T dout,   dK_blk += G^T (scale Q),   dQ += scale G K_blk

Only the keys a block of queries may see are visited: a causal mask skips the blocks above
the diagonal (the composed path computes them and masks them).  All operands are first
copied into zero-padded buffers whose dims are multiples of the register tile, so that the
products need no edge cases; padded keys count as masked.

A query whose keys are all masked gets output 0, lse -inf and zero gradient (as the composed
softmax gives).  Threads split the N = batch x heads matrices, so no two write the same row.
The numpy twins are reference.attention_forward and reference.attention_backward.
"""

import numba
import numpy as np
from numba import prange
from numba.extending import register_jitable

from autograd.kernels import gemm, small_gemm
from autograd.kernels.fast_math import JIT, make_exp_nonpositive, make_row_max

MR = small_gemm.MR            # rows of the register tile (8)
QUERY_BLOCK = 32              # queries per block (a multiple of MR)
KEY_BLOCK = 64                # keys per block of the online softmax (a multiple of the tile's width)


@register_jitable
def round_up(x, multiple):
    return (x + multiple - 1) // multiple * multiple


@register_jitable
def describe_rows(mask, has_mask, t_k, first, last, holes):
    """For each query i, the keys [first[i], last[i]) from its first visible one to its
    last (an empty range if it sees none), and whether masked keys lie in between
    (holes[i]; a causal or padding mask has none).  Without a mask: all keys, no holes."""
    for i in range(first.shape[0]):
        if not has_mask:
            first[i], last[i], holes[i] = 0, t_k, False
            continue
        row = mask[i]
        low = 0
        while low < t_k and not row[low]:
            low += 1
        high = t_k
        while high > low and not row[high - 1]:
            high -= 1
        seen = 0
        for j in range(low, high):
            seen += row[j]
        first[i], last[i], holes[i] = low, high, seen < high - low


@register_jitable
def visible_keys(first, last, rows, width_step, t_k_padded):
    """[low, high) of the keys that queries `rows` (a range) may attend to (low == high:
    none), widened to a multiple of width_step inside the padded keys: the masked keys this
    adds get weight 0 (`hide_masked`)."""
    low, high = t_k_padded, 0
    for i in rows:
        if last[i] > first[i]:
            low, high = min(low, first[i]), max(high, last[i])
    if high <= low:
        return 0, 0
    width = (high - low + width_step - 1) // width_step * width_step
    low = min(low, t_k_padded - width)
    return low, low + width


@register_jitable
def copy_padded(x, target, factor):
    """target[:rows, :cols] = factor * x (rows, cols); the rest of target keeps its zeros."""
    for i in range(x.shape[0]):
        source, row = x[i], target[i]
        for c in range(x.shape[1]):
            row[c] = factor * source[c]


@register_jitable
def copy_transposed_padded(x, target):
    """target[c, j] = x[j, c]."""
    for j in range(x.shape[0]):
        for c in range(x.shape[1]):
            target[c, j] = x[j, c]


def _make_attention(dtype):
    """The forward and backward kernels for one dtype (every constant of that dtype: a
    float64 -inf in a float32 kernel would turn its arithmetic into float64)."""
    f = np.dtype(dtype).type
    ZERO, ONE, NEG_INF = f(0), f(1), f(-np.inf)
    itype = np.int32 if dtype == np.float32 else np.int64
    exp_nonpositive = make_exp_nonpositive(dtype)
    row_max = make_row_max(dtype)
    NR = small_gemm.TILES["wide"][dtype]            # columns of the register tile
    micro_kernel = gemm.compile_micro_kernel(MR, NR, dtype)

    @register_jitable
    def product(a, a_row, a_transposed, rows, b, b_row, b_col, cols, k, c):
        """c[:rows, :cols] = A @ B on the register tile, rows a multiple of MR and cols of NR.
        A (rows x k) is a[a_row:a_row+rows, :k], or with a_transposed a[a_row:a_row+k, :rows]^T;
        B (k x cols) is b[b_row:b_row+k, b_col:b_col+cols]; b's and c's rows are contiguous."""
        for top in range(0, rows, MR):
            if a_transposed:
                strip = a[a_row:a_row + k, top:top + MR]
            else:
                strip = a[a_row + top:a_row + top + MR, :k].T
            for left in range(0, cols, NR):
                micro_kernel(strip, small_gemm.rows_from(b, b_row, b_col + left, k), k,
                             small_gemm.rows_from(c, top, left, MR))

    @register_jitable
    def hide_masked(scores, mask_row, first, last, holes, j0):
        """scores[j] = -inf where the query may not see key j0 + j (masked, or padding):
        outside its [first, last) by two fills, inside it key by key only if it has holes."""
        width = scores.shape[0]
        low, high = min(max(first - j0, 0), width), min(max(last - j0, 0), width)
        scores[:low] = NEG_INF
        scores[high:] = NEG_INF
        if holes:
            inside, allowed = scores[low:high], mask_row[j0 + low:j0 + high]
            for j in range(high - low):
                inside[j] = inside[j] if allowed[j] else NEG_INF

    def attention_forward(q, k, v, mask, mask_of, has_mask, scale, chunks, out, lse):
        n_mats, t_q, d = q.shape
        t_k, d_v = k.shape[1], v.shape[2]
        t_q_padded, t_k_padded = round_up(t_q, MR), round_up(t_k, NR)
        d_padded, d_v_padded = round_up(d, NR), round_up(d_v, NR)
        for chunk in prange(chunks):
            gemm.prefer_wide_vectors()
            q_s = gemm.aligned_empty((t_q_padded, d_padded), q.dtype)      # scale * q, zero padded
            k_t = gemm.aligned_empty((d_padded, t_k_padded), q.dtype)      # k transposed: S's B operand
            v_p = gemm.aligned_empty((t_k_padded, d_v_padded), q.dtype)
            s = gemm.aligned_empty((QUERY_BLOCK, KEY_BLOCK), q.dtype)      # scores, then weights
            o = gemm.aligned_empty((QUERY_BLOCK, d_v_padded), q.dtype)     # running output
            o_blk = gemm.aligned_empty((QUERY_BLOCK, d_v_padded), q.dtype)
            m = np.empty(QUERY_BLOCK, q.dtype)
            l = np.empty(QUERY_BLOCK, q.dtype)
            correction = np.empty(QUERY_BLOCK, q.dtype)
            first, last = np.empty(t_q, np.int64), np.empty(t_q, np.int64)
            holes = np.empty(t_q, np.bool_)
            described = -1                                        # whose mask first/last/holes describe
            q_s[:] = ZERO
            k_t[:] = ZERO
            v_p[:] = ZERO
            for n in range(chunk * n_mats // chunks, (chunk + 1) * n_mats // chunks):
                copy_padded(q[n], q_s, scale)
                copy_transposed_padded(k[n], k_t)
                copy_padded(v[n], v_p, ONE)
                masks = mask[mask_of[n]]
                if mask_of[n] != described:
                    describe_rows(masks, has_mask, t_k, first, last, holes)
                    described = mask_of[n]
                for i0 in range(0, t_q_padded, QUERY_BLOCK):
                    rows = min(QUERY_BLOCK, t_q_padded - i0)              # a multiple of MR
                    real = min(rows, t_q - i0)                            # rows beyond t_q are padding
                    low, high = visible_keys(first, last, range(i0, i0 + real), NR, t_k_padded)
                    m[:] = NEG_INF
                    l[:] = ZERO
                    o[:] = ZERO
                    for j0 in range(low, high, KEY_BLOCK):
                        width = min(KEY_BLOCK, high - j0)                 # a multiple of NR
                        product(q_s, i0, False, rows, k_t, 0, j0, width, d, s)     # (rows, width)
                        for r in range(rows):
                            scores = s[r, :width]
                            correction[r] = ONE
                            if r >= real:                                 # a padded query: weight 0
                                scores[:] = ZERO
                                continue
                            i = i0 + r
                            hide_masked(scores, masks[i if has_mask else 0], first[i], last[i], holes[i], j0)
                            block_max = row_max(scores.view(itype))
                            new_max = m[r] if m[r] >= block_max else block_max   # NaN stays NaN
                            if new_max == NEG_INF:                        # no visible key yet
                                scores[:] = ZERO
                                continue
                            correction[r] = exp_nonpositive(m[r] - new_max)
                            total = ZERO
                            for j in range(width):
                                scores[j] = exp_nonpositive(scores[j] - new_max)   # 0 where masked
                                total += scores[j]
                            l[r] = l[r] * correction[r] + total
                            m[r] = new_max
                        product(s, 0, False, rows, v_p, j0, 0, d_v_padded, width, o_blk)   # P V_blk
                        for r in range(real):
                            out_row, new, factor = o[r], o_blk[r], correction[r]
                            for c in range(d_v_padded):
                                out_row[c] = out_row[c] * factor + new[c]
                    for r in range(real):
                        if l[r] == ZERO:                                  # a fully masked query
                            out[n, i0 + r, :] = ZERO
                            lse[n, i0 + r] = NEG_INF
                        else:
                            for c in range(d_v):
                                out[n, i0 + r, c] = o[r, c] / l[r]
                            lse[n, i0 + r] = m[r] + np.log(l[r])

    def attention_backward(q, k, v, mask, mask_of, has_mask, scale, chunks, out, lse, dout, dq, dk, dv):
        n_mats, t_q, d = q.shape
        t_k, d_v = k.shape[1], v.shape[2]
        t_q_padded, t_k_padded = round_up(t_q, MR), round_up(t_k, NR)
        d_padded, d_v_padded = round_up(d, NR), round_up(d_v, NR)
        for chunk in prange(chunks):
            gemm.prefer_wide_vectors()
            q_s = gemm.aligned_empty((t_q_padded, d_padded), q.dtype)      # scale * q
            k_p = gemm.aligned_empty((t_k_padded, d_padded), q.dtype)      # k: dQ's B operand
            k_t = gemm.aligned_empty((d_padded, t_k_padded), q.dtype)      # k^T: S's
            v_t = gemm.aligned_empty((d_v_padded, t_k_padded), q.dtype)    # v^T: dout v^T's
            do = gemm.aligned_empty((t_q_padded, d_v_padded), q.dtype)     # dout
            p = gemm.aligned_empty((QUERY_BLOCK, KEY_BLOCK), q.dtype)      # the weights
            g = gemm.aligned_empty((QUERY_BLOCK, KEY_BLOCK), q.dtype)      # dout v^T, then G
            dq_blk = gemm.aligned_empty((QUERY_BLOCK, d_padded), q.dtype)
            dk_acc = gemm.aligned_empty((t_k_padded, d_padded), q.dtype)
            dv_acc = gemm.aligned_empty((t_k_padded, d_v_padded), q.dtype)
            part = gemm.aligned_empty((max(QUERY_BLOCK, KEY_BLOCK), max(d_padded, d_v_padded)), q.dtype)
            d_rows = np.empty(QUERY_BLOCK, q.dtype)                       # D_i = dout_i . out_i
            first, last = np.empty(t_q, np.int64), np.empty(t_q, np.int64)
            holes = np.empty(t_q, np.bool_)
            described = -1
            for buffer in (q_s, k_p, k_t, v_t, do):
                buffer[:] = ZERO
            for n in range(chunk * n_mats // chunks, (chunk + 1) * n_mats // chunks):
                copy_padded(q[n], q_s, scale)
                copy_padded(k[n], k_p, ONE)
                copy_transposed_padded(k[n], k_t)
                copy_transposed_padded(v[n], v_t)
                copy_padded(dout[n], do, ONE)
                dk_acc[:] = ZERO
                dv_acc[:] = ZERO
                masks = mask[mask_of[n]]
                if mask_of[n] != described:
                    describe_rows(masks, has_mask, t_k, first, last, holes)
                    described = mask_of[n]
                for i0 in range(0, t_q_padded, QUERY_BLOCK):
                    rows = min(QUERY_BLOCK, t_q_padded - i0)
                    real = min(rows, t_q - i0)
                    low, high = visible_keys(first, last, range(i0, i0 + real), NR, t_k_padded)
                    dq_blk[:] = ZERO
                    for r in range(real):
                        total = ZERO
                        for c in range(d_v):
                            total += dout[n, i0 + r, c] * out[n, i0 + r, c]
                        d_rows[r] = total
                    for j0 in range(low, high, KEY_BLOCK):
                        width = min(KEY_BLOCK, high - j0)
                        product(q_s, i0, False, rows, k_t, 0, j0, width, d, p)     # S
                        product(do, i0, False, rows, v_t, 0, j0, width, d_v, g)    # dout V^T
                        for r in range(rows):
                            weights, grads = p[r, :width], g[r, :width]
                            if r >= real or lse[n, i0 + r] == NEG_INF:   # padded or fully masked
                                weights[:] = ZERO
                                grads[:] = ZERO
                                continue
                            i = i0 + r
                            hide_masked(weights, masks[i if has_mask else 0], first[i], last[i], holes[i], j0)
                            row_lse, d_r = lse[n, i0 + r], d_rows[r]
                            for j in range(width):
                                weights[j] = exp_nonpositive(weights[j] - row_lse)   # 0 where masked
                                grads[j] = weights[j] * (grads[j] - d_r)
                        product(p, 0, True, width, do, i0, 0, d_v_padded, rows, part)   # P^T dout
                        for jj in range(width):
                            target, new = dv_acc[j0 + jj], part[jj]
                            for c in range(d_v_padded):
                                target[c] += new[c]
                        product(g, 0, True, width, q_s, i0, 0, d_padded, rows, part)    # G^T (scale Q)
                        for jj in range(width):
                            target, new = dk_acc[j0 + jj], part[jj]
                            for c in range(d_padded):
                                target[c] += new[c]
                        product(g, 0, False, rows, k_p, j0, 0, d_padded, width, part)   # G K_blk
                        for r in range(rows):
                            target, new = dq_blk[r], part[r]
                            for c in range(d_padded):
                                target[c] += new[c]
                    for r in range(real):
                        for c in range(d):
                            dq[n, i0 + r, c] = scale * dq_blk[r, c]
                for j in range(t_k):
                    for c in range(d):
                        dk[n, j, c] = dk_acc[j, c]
                    for c in range(d_v):
                        dv[n, j, c] = dv_acc[j, c]

    t = numba.from_dtype(np.dtype(dtype))
    given = numba.types.Array(t, 3, "C", readonly=True)
    result = numba.types.Array(t, 3, "C")
    mask_args = (numba.types.Array(numba.boolean, 3, "C", readonly=True),
                 numba.types.Array(numba.int64, 1, "C", readonly=True), numba.boolean, t, numba.int64)
    signatures = (numba.void(given, given, given, *mask_args, result, numba.types.Array(t, 2, "C")),
                  numba.void(given, given, given, *mask_args, given, numba.types.Array(t, 2, "C", readonly=True),
                             given, result, result, result))
    kernels = []
    for kernel, signature in zip((attention_forward, attention_backward), signatures):
        kernel.__qualname__ = f"{kernel.__qualname__}[{np.dtype(dtype).name}]"   # Numba's cache key (fast_math.variant)
        with gemm.slp_vectorizer():            # compiled now, with the SLP vectorizer the micro-kernel needs
            kernels.append(numba.njit(signature, parallel=True, nogil=True, **JIT)(kernel))
    return kernels


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


def _chunks(n):
    """How many runs of matrices the threads share (one when there is a single thread)."""
    return min(n, 4 * numba.get_num_threads()) if numba.get_num_threads() > 1 else 1


def attention_forward(q, k, v, mask, scale):
    """q (N, T_q, d), k (N, T_k, d), v (N, T_k, d_v), mask (N, T_q, T_k) bool or None ->
    (out (N, T_q, d_v), lse (N, T_q)).  Same as reference.attention_forward."""
    q, k, v = (np.ascontiguousarray(x) for x in (q, k, v))        # one compiled signature
    out = np.empty(q.shape[:2] + (v.shape[2],), q.dtype)
    lse = np.full(q.shape[:2], -np.inf, q.dtype)
    if out.size and k.shape[1]:
        forward = _kernels_for(q.dtype.type)[0]
        forward(q, k, v, *_mask_matrices(mask, len(q)), mask is not None, q.dtype.type(scale), _chunks(len(q)), out, lse)
    else:
        out[...] = 0
    return out, lse


def attention_backward(q, k, v, mask, scale, out, lse, dout):
    """Gradients (dq, dk, dv) of attention_forward's output; same as reference.attention_backward."""
    q, k, v, out, dout = (np.ascontiguousarray(x, q.dtype) for x in (q, k, v, out, dout))
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    if q.size and k.shape[1]:
        backward = _kernels_for(q.dtype.type)[1]
        backward(q, k, v, *_mask_matrices(mask, len(q)), mask is not None, q.dtype.type(scale), _chunks(len(q)),
                 out, lse, dout, dq, dk, dv)
    return dq, dk, dv
