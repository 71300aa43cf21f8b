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
with D_i = dout_i . out_i and G = scale P * (dout V^T - D)  (the gradient of the scores,
times the scale both of its uses need):

    dV_blk += P^T dout,   dK_blk += G^T Q,   dQ += G K_blk

The products that sum (the output, the three gradients) add straight into their targets
(the micro-kernel's adding variant), the gradients into dq, dk, dv themselves when the
dims are whole tiles; the first product to reach a strip of a gradient stores instead of
adding, so the gradients are never zeroed beforehand.

A block's scores are kept transposed, S^T (keys x queries): the softmax's statistics per
query (running max, sum, shift) are then vectors across a row of S^T, and every step of
the softmax is an elementwise loop over 32 contiguous queries, which vectorizes; along a
row of S they would be short horizontal reductions, one per query and block.  The
register tile reads either layout of its left operand, so P V and G K take S^T as it is.

Only the keys a block of queries may see are visited: a causal mask skips the blocks above
the diagonal (the composed path computes them and masks them).  Inside a block, the
products that multiply weights (P V, P^T dout, G^T Q, G K) run each strip of MR rows only
over the keys (or queries) that its rows see: under a causal mask, a quarter fewer
multiply-adds; the products of scores (S^T, (dout V^T)^T) skip the register tiles that no
query of theirs sees (`describe` finds these ranges once per distinct mask).  Operands whose
queries are not whole blocks of QUERY_BLOCK, or whose other dims are not multiples of the
register tile, are first copied into zero-padded buffers, so that the products and the
softmax's loops need no edge cases; padded keys and queries count as masked.  q^T and dout^T
are copied a square of registers at a time (transpose.py).

A query whose keys are all masked gets output 0, lse -inf and zero gradient (as the composed
softmax gives).  Threads split the N = batch x heads matrices (chunks.py), so no two write the same row.
The numpy twins are reference.attention_forward and reference.attention_backward.

Grouped-query attention (k and v with KV heads, q with H = G KV) runs on the same kernels:
the G query heads that share a kv head are stacked into one matrix of G T_q rows, their
mask likewise, and attended as one head (_pack_groups): each kv head's blocks are read
once per group, and its gradients sum over the whole group in the kernel's own sums.
"""

import math

import numba
import numpy as np
from numba.extending import register_jitable

from autograd.engine_room import chunks, few_queries, gemm, small_gemm, transpose
from autograd.engine_room.dispatch import threads
from autograd.engine_room.fast_math import JIT, make_exp_nonpositive

MR = small_gemm.MR            # rows of the register tile (8; 4 with AVX2)
QUERY_BLOCK = 32              # queries per block (a multiple of the tile's width)
KEY_BLOCK = 64                # keys per block of the online softmax (a multiple of the tile's width)


@register_jitable
def round_up(x, multiple):
    return (x + multiple - 1) // multiple * multiple


@register_jitable
def describe_rows(mask, has_mask, t_k, first, last):
    """For each query i, the keys [first[i], last[i]) from its first visible one to its
    last (an empty range if it sees none); without a mask, all keys."""
    for i in range(first.shape[0]):
        if not has_mask:
            first[i], last[i] = 0, t_k
            continue
        row = mask[i]
        low = 0
        while low < t_k and not row[low]:
            low += 1
        high = t_k
        while high > low and not row[high - 1]:
            high -= 1
        first[i], last[i] = low, high


@register_jitable
def visible_keys(first, last, rows, width_step, t_k_padded):
    """[low, high) of the keys that queries `rows` (a range) may attend to (low == high:
    none), widened to a multiple of width_step inside the padded keys, low down to a
    multiple of width_step (the gradients' strips of MR rows are counted from key 0): the
    masked keys this adds get weight 0 (`mark_visible`)."""
    low, high = t_k_padded, 0
    for i in rows:
        if last[i] > first[i]:
            low, high = min(low, first[i]), max(high, last[i])
    if high <= low:
        return 0, 0
    low = low // width_step * width_step
    width = (high - low + width_step - 1) // width_step * width_step
    low = min(low, t_k_padded - width)
    return low, low + width


@register_jitable
def describe(mask, has_mask, t_q, t_k, width_step, visible, keys, query_strips, key_strips):
    """What the kernels need of one (T_q, T_k) mask, found once per distinct mask:
    - `visible` (mark_visible);
    - keys[b] = [low, high) of the keys that block b of QUERY_BLOCK queries may see (visible_keys);
    - query_strips[s] = [first, last) of the keys that queries s MR .. s MR + MR - 1 see;
    - key_strips[b, s] = [first, last) of block b's queries that see one of the keys
      low + s MR .. low + s MR + MR - 1 (low = keys[b, 0]).
    Empty ranges are (0, 0): the padded queries' and keys', and a fully masked query's."""
    first, last = np.empty(t_q, np.int64), np.empty(t_q, np.int64)
    describe_rows(mask, has_mask, t_k, first, last)
    mark_visible(mask, has_mask, t_q, t_k, visible)
    query_strips[:] = 0
    for s in range(query_strips.shape[0]):
        for i in range(s * MR, min(s * MR + MR, t_q)):
            widen(query_strips, s, first[i], last[i])
    key_strips[:] = 0
    for b in range(keys.shape[0]):
        i0, i1 = b * QUERY_BLOCK, min((b + 1) * QUERY_BLOCK, t_q)
        keys[b, 0], keys[b, 1] = visible_keys(first, last, range(i0, i1), width_step, visible.shape[0])
        strips = key_strips[b]
        for j in range(keys[b, 0], min(keys[b, 1], t_k)):
            seen = visible[j]
            low, high = i0, i1
            while low < high and not seen[low]:
                low += 1
            while high > low and not seen[high - 1]:
                high -= 1
            widen(strips, (j - keys[b, 0]) // MR, low, high)


@register_jitable
def widen(ranges, s, low, high):
    """ranges[s] = the smallest range that holds ranges[s] and [low, high) (an empty one, (0, 0)
    or high <= low, holds nothing)."""
    if high > low:
        ranges[s, 0] = low if ranges[s, 1] == 0 else min(ranges[s, 0], low)
        ranges[s, 1] = max(ranges[s, 1], high)


@register_jitable
def copy_padded(x, target, factor):
    """target[:rows, :cols] = factor * x (rows, cols); the rest of target keeps its zeros."""
    for i in range(x.shape[0]):
        source, row = x[i], target[i]
        for c in range(x.shape[1]):
            row[c] = factor * source[c]


@register_jitable
def zero_unsummed(x, summed, rows, cols):
    """x[:rows, :cols] = 0 in the strips of MR rows that no product wrote (summed[s] False):
    the gradients are written by their first product, not zeroed and then added to."""
    for s in range(rows // MR):
        if not summed[s]:
            for i in range(s * MR, s * MR + MR):
                row = gemm.row_run(x, i, 0, cols)
                for c in range(cols):
                    row[c] = 0


@register_jitable
def mark_visible(mask, has_mask, t_q, t_k, visible):
    """visible[j, i] = whether query i may see key j: the mask transposed, False for the
    padded keys and queries (visible's extra rows and columns)."""
    for j in range(visible.shape[0]):
        for i in range(visible.shape[1]):
            visible[j, i] = i < t_q and j < t_k and (not has_mask or mask[i, j])


def _make_attention(dtype):
    """The forward and backward kernels for one dtype (every constant of that dtype: a
    float64 -inf in a float32 kernel would turn its arithmetic into float64)."""
    f = np.dtype(dtype).type
    ZERO, ONE, NEG_INF = f(0), f(1), f(-np.inf)
    exp_nonpositive = make_exp_nonpositive(dtype)
    NR = small_gemm.TILES["wide"][dtype]            # columns of the register tile
    # Keys are padded (and key blocks cut) to multiples of KEY_STEP: whole columns of tiles
    # in the scores' products and whole strips of MR rows in dk's and dv's (with AVX2 a
    # float64 tile could be narrower than MR).  Both are powers of two.
    KEY_STEP = max(NR, MR)
    # The micro-kernel prefers 512-bit vectors (gemm.prefer_wide_vectors) and, with AVX-512, is
    # not inlined into the kernels, which do not: their loops over 32 numbers would be shorter
    # than LLVM's unrolled 512-bit loop body (4 x 16) and run entirely in its scalar remainder.
    # With AVX2 it is inlined (gemm.never_inline): there the calls were what cost.
    micro_kernel = gemm.compile_micro_kernel(MR, NR, dtype, inline=False)
    adding_kernel = gemm.compile_micro_kernel(MR, NR, dtype, inline=False, accumulate=True)

    @register_jitable
    def product(a, a_row, rows, b, b_col, cols, k, c, seen_by, strip):
        """c[:rows, :cols] = A @ B on the register tile, rows a multiple of MR and cols of NR:
        A (rows x k) is a[a_row:a_row+rows, :k], B (k x cols) is b[:k, b_col:b_col+cols];
        b's and c's rows are contiguous.  C is scores (keys x queries): seen_by[strip + t]
        is [first, last) of the queries (counted as b_col is) that see one of the keys of
        C's strip t of rows; a tile that none of its queries sees is zeroed, not computed
        (under a causal mask, a sixth of the tiles at T = 64)."""
        for top in range(0, rows, MR):
            a_strip = gemm.submatrix(a, a_row + top, 0, MR, k).T
            first, last = seen_by[strip + top // MR, 0], seen_by[strip + top // MR, 1]
            for left in range(0, cols, NR):
                if last <= b_col + left or first >= b_col + left + NR:
                    for r in range(top, top + MR):
                        tile_row = gemm.row_run(c, r, left, NR)
                        for j in range(NR):
                            tile_row[j] = ZERO
                    continue
                micro_kernel(a_strip, gemm.rows_from(b, 0, b_col + left, k), k, gemm.rows_from(c, top, left, MR))

    @register_jitable
    def add_product(a, a_transposed, rows, b, b_row, cols, k, c, strips, strip, k_origin, summed, c_strip):
        """c[:rows, :cols] += A @ B where A (rows x k) is a[:rows, :k] (with a_transposed:
        a[:k, :rows]^T) and B (k x cols) is b[b_row:b_row+k, :cols], with A zero outside
        the k its rows need: C's strip number strip + t (MR rows each) has its nonzeros in
        strips[strip + t], counted from k_origin.  A is masked attention weights or their
        gradients, so each strip runs over the keys (or queries) it sees, not all k: under
        a causal mask that leaves a quarter of the multiply-adds out.
        summed[c_strip + t] says whether C's strip t holds a sum already: if not, the
        product is stored there (and the strip marked), so C need not be zeroed first."""
        for top in range(0, rows, MR):
            s = strip + top // MR
            k0, k1 = max(strips[s, 0] - k_origin, 0), min(strips[s, 1] - k_origin, k)
            if k1 <= k0:
                continue
            if a_transposed:
                a_strip = gemm.submatrix(a, k0, top, k1 - k0, MR)
            else:
                a_strip = gemm.submatrix(a, top, k0, MR, k1 - k0).T
            adding = summed[c_strip + top // MR]
            summed[c_strip + top // MR] = True
            for left in range(0, cols, NR):
                b_block, c_tile = gemm.rows_from(b, b_row + k0, left, k1 - k0), gemm.rows_from(c, top, left, MR)
                if adding:
                    adding_kernel(a_strip, b_block, k1 - k0, c_tile)
                else:
                    micro_kernel(a_strip, b_block, k1 - k0, c_tile)

    @register_jitable
    def mask_and_max(st, visible, j0, i0, width, block_max):
        """Masked scores to -inf in S^T (width keys x QUERY_BLOCK queries), and each query's
        maximum over them into block_max (NaN if it meets a NaN, as softmax's max).  Its
        loops, and those below, run over QUERY_BLOCK queries, a count known when compiling:
        LLVM then unrolls them into whole vectors, with no remainder loop and no run-time
        overlap checks (with a run-time count these loops took much longer)."""
        gemm.prefer_wide_vectors()
        gemm.never_inline()
        block_max[:] = NEG_INF
        for j in range(width):
            row, seen = gemm.row_run(st, j, 0, QUERY_BLOCK), gemm.row_run(visible, j0 + j, i0, QUERY_BLOCK)
            for r in range(QUERY_BLOCK):
                x = row[r] if seen[r] else NEG_INF
                row[r] = x
                block_max[r] = x if (x > block_max[r] or x != x) else block_max[r]

    @register_jitable(**JIT)
    def exp_and_sum(st, width, shift, l):
        """S^T to P^T = exp(S^T - shift) (0 where masked), summed per query into l."""
        gemm.prefer_wide_vectors()
        gemm.never_inline()
        for j in range(width):
            row = gemm.row_run(st, j, 0, QUERY_BLOCK)
            for r in range(QUERY_BLOCK):
                row[r] = exp_nonpositive(row[r] - shift[r])
                l[r] += row[r]

    @register_jitable
    def operand(x, b, h, buffer, in_place):
        """Matrix (b, h) of x (4-D): read where it is (its rows, typed contiguous) when its
        dims are multiples of the tile's already (in_place), else copied into the
        zero-padded buffer."""
        if in_place:
            return gemm.rows_from(gemm.matrix_at(x, b, h), 0, 0, x.shape[2])
        copy_padded(gemm.matrix_at(x, b, h), buffer, ONE)
        return buffer

    @register_jitable(**JIT)
    def weights_and_grads(pt, gt, visible, j0, i0, width, lse, d, scale):
        """P^T and scale G^T from S^T and (dout V^T)^T (width keys x QUERY_BLOCK queries):
        p = exp(s - lse) (0 where masked), g = scale p (g - D)."""
        # BEGIN TWIN softmax softmax_backward log_softmax attention
        gemm.prefer_wide_vectors()
        gemm.never_inline()
        lse, d = gemm.row_run(lse, 0, i0, QUERY_BLOCK), gemm.row_run(d, 0, i0, QUERY_BLOCK)
        for j in range(width):       # rows as 1-D views: indexed in 2-D, LLVM left the loop scalar
            weights, grads = gemm.row_run(pt, j, 0, QUERY_BLOCK), gemm.row_run(gt, j, 0, QUERY_BLOCK)
            seen = gemm.row_run(visible, j0 + j, i0, QUERY_BLOCK)
            for r in range(QUERY_BLOCK):
                w = exp_nonpositive(weights[r] - lse[r])
                w = w if seen[r] else ZERO
                weights[r] = w
                grads[r] = scale * w * (grads[r] - d[r])
        # END TWIN

    def attention_forward_chunk(q, k, v, mask, mask_of, has_mask, scale, out, lse, chunk, chunks):
        # BEGIN TWIN softmax softmax_backward log_softmax attention
        heads = q.shape[1]
        n_mats, t_q, d = q.shape[0] * heads, q.shape[2], q.shape[3]
        t_k, d_v = k.shape[2], v.shape[3]
        t_q_padded, t_k_padded = round_up(t_q, QUERY_BLOCK), round_up(t_k, KEY_STEP)   # whole query blocks
        d_padded, d_v_padded = round_up(d, NR), round_up(d_v, NR)
        in_place = t_q_padded == t_q and t_k_padded == t_k and d_padded == d and d_v_padded == d_v
        copies = 0 if in_place else 1                                     # padded copies needed?
        gemm.prefer_wide_vectors()
        q_t = gemm.aligned_empty((d_padded, t_q_padded), q.dtype)      # (scale q)^T: S^T's B operand
        k_p = gemm.aligned_empty((copies * t_k_padded, d_padded), q.dtype)
        v_p = gemm.aligned_empty((copies * t_k_padded, d_v_padded), q.dtype)
        st = gemm.aligned_empty((KEY_BLOCK, QUERY_BLOCK), q.dtype)     # S^T, then P^T
        o = gemm.aligned_empty((QUERY_BLOCK, d_v_padded), q.dtype)     # running output (unnormalized)
        visible = np.empty((t_k_padded, t_q_padded), np.bool_)
        keys = np.empty((round_up(t_q_padded, QUERY_BLOCK) // QUERY_BLOCK, 2), np.int64)   # [low, high) per query block
        query_strips = np.empty((t_q_padded // MR, 2), np.int64)           # (see describe)
        key_strips = np.empty((keys.shape[0], t_k_padded // MR, 2), np.int64)
        o_summed = np.ones(QUERY_BLOCK // MR, np.bool_)                # o is zeroed: its strips are sums
        stats = np.empty((5, QUERY_BLOCK), q.dtype)
        m, l, correction, shift, block_max = stats[0], stats[1], stats[2], stats[3], stats[4]
        described = -1                                        # whose mask `visible` holds
        q_t[:] = ZERO
        k_p[:] = ZERO
        v_p[:] = ZERO
        for n in range(chunk * n_mats // chunks, (chunk + 1) * n_mats // chunks):
            b, h = n // heads, n % heads
            transpose.copy_transposed(gemm.matrix_at(q, b, h), q_t, scale)
            k_n, v_n = operand(k, b, h, k_p, in_place), operand(v, b, h, v_p, in_place)
            out_n = gemm.matrix_at(out, b, h)
            if mask_of[n] != described:
                describe(mask[mask_of[n]], has_mask, t_q, t_k, KEY_STEP, visible, keys, query_strips, key_strips)
                described = mask_of[n]
            for i0 in range(0, t_q_padded, QUERY_BLOCK):
                rows = QUERY_BLOCK                                    # t_q_padded is whole blocks
                real = min(rows, t_q - i0)                            # columns beyond t_q are padding
                low, high = keys[i0 // QUERY_BLOCK, 0], keys[i0 // QUERY_BLOCK, 1]
                m[:] = NEG_INF
                l[:] = ZERO
                o[:] = ZERO
                for j0 in range(low, high, KEY_BLOCK):
                    width = min(KEY_BLOCK, high - j0)                 # a multiple of KEY_STEP
                    seen_by, strip = key_strips[i0 // QUERY_BLOCK], (j0 - low) // MR
                    product(k_n, j0, width, q_t, i0, rows, d, st, seen_by, strip)   # S^T (width, rows)
                    mask_and_max(st, visible, j0, i0, width, block_max)
                    for r in range(rows):                             # the running statistics
                        new = block_max[r] if (block_max[r] > m[r] or block_max[r] != block_max[r]) else m[r]
                        correction[r] = ONE if new == NEG_INF else exp_nonpositive(m[r] - new)
                        shift[r] = ZERO if new == NEG_INF else new    # no visible key yet: weights 0
                        m[r] = new
                        l[r] *= correction[r]
                    exp_and_sum(st, width, shift, l)
                    if j0 > low:                                      # O exp(m_old - m), then + P V_blk
                        for r in range(rows):
                            factor, o_row = correction[r], gemm.row_run(o, r, 0, d_v_padded)
                            for c in range(d_v_padded):
                                o_row[c] *= factor
                    add_product(st, True, rows, v_n, j0, d_v_padded, width, o, query_strips, i0 // MR, j0,   # O += P V_blk
                                o_summed, 0)
                for r in range(real):
                    target = gemm.row_run(out_n, i0 + r, 0, d_v)
                    if l[r] == ZERO:                                  # a fully masked query
                        for c in range(d_v):
                            target[c] = ZERO
                        lse[n, i0 + r] = NEG_INF
                    else:
                        o_row = gemm.row_run(o, r, 0, d_v)
                        for c in range(d_v):
                            target[c] = o_row[c] / l[r]
                        lse[n, i0 + r] = m[r] + np.log(l[r])
        # END TWIN

    def attention_backward_chunk(q, k, v, mask, mask_of, has_mask, scale, out, lse, dout, dq, dk, dv, chunk, chunks):
        # BEGIN TWIN softmax softmax_backward log_softmax attention
        heads = q.shape[1]
        n_mats, t_q, d = q.shape[0] * heads, q.shape[2], q.shape[3]
        t_k, d_v = k.shape[2], v.shape[3]
        t_q_padded, t_k_padded = round_up(t_q, QUERY_BLOCK), round_up(t_k, KEY_STEP)   # whole query blocks
        d_padded, d_v_padded = round_up(d, NR), round_up(d_v, NR)
        in_place = t_q_padded == t_q and t_k_padded == t_k and d_padded == d and d_v_padded == d_v
        copies = 0 if in_place else 1
        gemm.prefer_wide_vectors()
        q_t = gemm.aligned_empty((d_padded, t_q_padded), q.dtype)      # (scale q)^T
        q_p = gemm.aligned_empty((copies * t_q_padded, d_padded), q.dtype)
        k_p = gemm.aligned_empty((copies * t_k_padded, d_padded), q.dtype)
        v_p = gemm.aligned_empty((copies * t_k_padded, d_v_padded), q.dtype)
        do_p = gemm.aligned_empty((copies * t_q_padded, d_v_padded), q.dtype)   # dout
        do_t = gemm.aligned_empty((d_v_padded, t_q_padded), q.dtype)   # dout^T
        pt = gemm.aligned_empty((KEY_BLOCK, QUERY_BLOCK), q.dtype)     # P^T
        gt = gemm.aligned_empty((KEY_BLOCK, QUERY_BLOCK), q.dtype)     # (dout V^T)^T, then scale G^T
        # the gradients are summed in place when the dims are whole tiles, else in these
        dq_p = gemm.aligned_empty((copies * t_q_padded, d_padded), q.dtype)
        dk_p = gemm.aligned_empty((copies * t_k_padded, d_padded), q.dtype)
        dv_p = gemm.aligned_empty((copies * t_k_padded, d_v_padded), q.dtype)
        visible = np.empty((t_k_padded, t_q_padded), np.bool_)
        keys = np.empty((round_up(t_q_padded, QUERY_BLOCK) // QUERY_BLOCK, 2), np.int64)
        query_strips = np.empty((t_q_padded // MR, 2), np.int64)
        key_strips = np.empty((keys.shape[0], t_k_padded // MR, 2), np.int64)
        row_lse = np.zeros((1, t_q_padded), q.dtype)                  # lse, 0 for a fully masked query
        d_rows = np.zeros((1, t_q_padded), q.dtype)                   # D_i = dout_i . out_i
        # which strips of MR rows of dq (row 0), dk (1) and dv (2) hold a sum already
        # (views from pointers, as row_run's: numpy views carry a reference count, and
        # passing them to add_product cost two atomic updates per call)
        n_strips = max(t_q_padded, t_k_padded) // MR
        summed = np.empty((3, n_strips), np.bool_)
        summed_q, summed_k, summed_v = (gemm.row_run(summed, 0, 0, n_strips), gemm.row_run(summed, 1, 0, n_strips),
                                        gemm.row_run(summed, 2, 0, n_strips))
        described = -1
        for buffer in (q_t, q_p, k_p, v_p, do_p, do_t):
            buffer[:] = ZERO
        for n in range(chunk * n_mats // chunks, (chunk + 1) * n_mats // chunks):
            b, h = n // heads, n % heads
            out_n, dout_n = gemm.matrix_at(out, b, h), gemm.matrix_at(dout, b, h)
            transpose.copy_transposed(gemm.matrix_at(q, b, h), q_t, scale)
            transpose.copy_transposed(dout_n, do_t, ONE)
            q_n, k_n = operand(q, b, h, q_p, in_place), operand(k, b, h, k_p, in_place)
            v_n, do_n = operand(v, b, h, v_p, in_place), operand(dout, b, h, do_p, in_place)
            # in place: the rows of dq's (b, h) matrix, typed contiguous (and as wide as
            # the row stride: the columns past d belong to other heads, not zeroed here)
            dq_n = gemm.rows_from(gemm.matrix_at(dq, b, h), 0, 0, t_q) if in_place else dq_p
            dk_n = gemm.rows_from(gemm.matrix_at(dk, b, h), 0, 0, t_k) if in_place else dk_p
            dv_n = gemm.rows_from(gemm.matrix_at(dv, b, h), 0, 0, t_k) if in_place else dv_p
            summed[:] = False                                         # dq, dk, dv: nothing written yet
            for i in range(t_q):
                row_lse[0, i] = ZERO if lse[n, i] == NEG_INF else lse[n, i]
                total, grad_row, out_row = ZERO, gemm.row_run(dout_n, i, 0, d_v), gemm.row_run(out_n, i, 0, d_v)
                for c in range(d_v):
                    total += grad_row[c] * out_row[c]
                d_rows[0, i] = total
            if mask_of[n] != described:
                describe(mask[mask_of[n]], has_mask, t_q, t_k, KEY_STEP, visible, keys, query_strips, key_strips)
                described = mask_of[n]
            for i0 in range(0, t_q_padded, QUERY_BLOCK):
                rows = QUERY_BLOCK
                low, high = keys[i0 // QUERY_BLOCK, 0], keys[i0 // QUERY_BLOCK, 1]
                dq_blk = gemm.rows_from(dq_n, i0, 0, rows)
                for j0 in range(low, high, KEY_BLOCK):
                    width = min(KEY_BLOCK, high - j0)
                    seen_by, strip = key_strips[i0 // QUERY_BLOCK], (j0 - low) // MR
                    product(k_n, j0, width, q_t, i0, rows, d, pt, seen_by, strip)       # S^T
                    product(v_n, j0, width, do_t, i0, rows, d_v, gt, seen_by, strip)    # (dout V^T)^T
                    weights_and_grads(pt, gt, visible, j0, i0, width, row_lse, d_rows, scale)
                    add_product(pt, False, width, do_n, i0, d_v_padded, rows,             # dV += P^T dout
                                gemm.rows_from(dv_n, j0, 0, width), seen_by, strip, i0, summed_v, j0 // MR)
                    add_product(gt, False, width, q_n, i0, d_padded, rows,                # dK += scale G^T Q
                                gemm.rows_from(dk_n, j0, 0, width), seen_by, strip, i0, summed_k, j0 // MR)
                    add_product(gt, True, rows, k_n, j0, d_padded, width, dq_blk,        # dQ += scale G K
                                query_strips, i0 // MR, j0, summed_q, i0 // MR)
            zero_unsummed(dq_n, summed_q, t_q_padded, d_padded)                 # rows no key reached
            zero_unsummed(dk_n, summed_k, t_k_padded, d_padded)
            zero_unsummed(dv_n, summed_v, t_k_padded, d_v_padded)
            if not in_place:
                copy_padded(dq_p[:t_q, :d], gemm.matrix_at(dq, b, h), ONE)
                copy_padded(dk_p[:t_k, :d], gemm.matrix_at(dk, b, h), ONE)
                copy_padded(dv_p[:t_k, :d_v], gemm.matrix_at(dv, b, h), ONE)
        # END TWIN

    t = numba.from_dtype(np.dtype(dtype))
    # (B1, B2, T, d) arrays with any strides that keep rows contiguous: q, k, v may be the
    # heads of a (B, T, H, d) array seen as (B, H, T, d), and out and the gradients are
    # written in that layout, so that merging the heads back costs no copy
    given = numba.types.Array(t, 4, "A", readonly=True)
    result = numba.types.Array(t, 4, "A")
    mask_args = (numba.types.Array(numba.boolean, 3, "C", readonly=True),
                 numba.types.Array(numba.int64, 1, "C", readonly=True), numba.boolean, t)
    argument_types = ((given, given, given, *mask_args, result, numba.types.Array(t, 2, "C")),
                      (given, given, given, *mask_args, given, numba.types.Array(t, 2, "C", readonly=True),
                       given, result, result, result))
    with gemm.slp_vectorizer():                # compiled now, with the SLP vectorizer the micro-kernel needs
        return [chunks.chunked(kernel, np.dtype(dtype).name, types, nogil=True, **JIT)
                for kernel, types in zip((attention_forward_chunk, attention_backward_chunk), argument_types)]


_kernels = {}


def _kernels_for(dtype):
    if dtype not in _kernels:
        _kernels[dtype] = _make_attention(dtype)
    return _kernels[dtype]


_NO_MASK = np.ones((1, 1, 1), dtype=np.bool_)


def _mask_matrices(mask, n):
    """(the distinct (T_q, T_k) masks as one C-contiguous (M, T_q, T_k) array, for each of
    the n matrices the index of its mask), from a mask (..., T_q, T_k) whose leading dims
    hold the n matrices.  A dim the mask is broadcast along (stride 0) is not copied: one
    causal mask stays one matrix, a padding mask of shape (B, 1, T, T) broadcast over the
    heads stays B matrices, and the kernels describe each once, not once per head."""
    if mask is None:
        return _NO_MASK, np.zeros(n, np.int64)
    lead = mask.shape[:-2]
    distinct = mask[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in mask.strides[:-2])]
    index = np.arange(distinct[..., 0, 0].size).reshape(distinct.shape[:-2])
    index = np.ascontiguousarray(np.broadcast_to(index, lead), np.int64).reshape(-1)
    return np.ascontiguousarray(distinct).reshape((-1,) + mask.shape[-2:]), index


def _chunks(n):
    """How many runs of matrices the threads share (one when there is a single thread)."""
    count = threads()
    return min(n, 4 * count) if count > 1 else 1


def _as_4d(x, dtype):
    """x (..., T, d) as (B1, B2, T, d) with its rows contiguous: a view when its batch dims
    allow one (any two, such as the heads of a (B, T, H, d) array seen as (B, H, T, d)),
    else a copy."""
    x = np.asarray(x, dtype)
    if x.strides[-1] != x.itemsize or x.strides[-2] < x.shape[-1] * x.itemsize:   # rows apart, in order
        x = np.ascontiguousarray(x)
    if x.ndim <= 4:
        return x[(None,) * (4 - x.ndim)]
    return x.reshape((-1,) + x.shape[-3:])            # merges the batch dims (a copy if it must)


def _empty_laid_out_as(template, shape, dtype):
    """np.empty(shape) whose leading dims lie in memory in the order the template's do, its
    last dim contiguous: the output of heads seen as (B, H, T, d) in (B, T, H, d) memory is
    then (B, T, H, d) memory too, and merging the heads back is a view, not a copy."""
    if template.flags.c_contiguous:                  # (a generated token's queries: no order to find)
        return np.empty(shape, dtype)
    lead = sorted(range(len(shape) - 1), key=lambda i: -template.strides[i])    # outermost first
    order = lead + [len(shape) - 1]
    return np.empty([shape[i] for i in order], dtype).transpose(np.argsort(order))


def _check_mask(mask, q, k):
    """A mask must be boolean (..., T_q, T_k) with the N matrices in its leading dims: the
    kernels index it per matrix and would read past its end otherwise."""
    if mask is None:
        return
    n, t_q, t_k = math.prod(q.shape[:-2]), q.shape[-2], k.shape[-2]
    if mask.dtype != np.bool_ or mask.ndim < 2 or mask.shape[-2:] != (t_q, t_k) or math.prod(mask.shape[:-2]) != n:
        raise ValueError(f"fused attention needs a boolean mask (..., T_q, T_k) = (..., {t_q}, {t_k}) whose leading "
                         f"dims hold the {n} matrices; got {mask.dtype} {mask.shape} (broadcast it first)")


def _query_groups(q, k):
    """G, the query heads per key/value head: q (..., H, T_q, d) with k (..., KV, T_k, d)
    is grouped-query attention when KV < H (1 otherwise, and without a heads dim)."""
    return q.shape[-3] // k.shape[-3] if q.ndim >= 3 and k.shape[-3] else 1


def _pack_groups(x, groups):
    """(..., H, T, d) -> (..., KV, G T, d): the G query heads of each group stacked as one
    matrix of G T rows (a copy), so that the kernels run grouped-query attention as
    attention with KV heads, reading each kv head once for its whole group and summing the
    group's gradients into it as they sum over any queries."""
    return x.reshape(x.shape[:-3] + (x.shape[-3] // groups, groups * x.shape[-2], x.shape[-1]))


def _pack_mask(mask, groups):
    """The mask (..., H, T_q, T_k) for _pack_groups' queries: (..., KV, G T_q, T_k).  The
    dims it is broadcast along (stride 0: the heads, for a causal or padding mask) stay
    broadcast, so the kernels still describe one mask per distinct matrix."""
    if mask is None:
        return None
    lead, (t_q, t_k) = mask.shape[:-3], mask.shape[-2:]
    split = mask.reshape(lead + (mask.shape[-3] // groups, groups, t_q, t_k))   # (..., KV, G, T_q, T_k)
    distinct = split[tuple(slice(0, 1) if stride == 0 else slice(None) for stride in split.strides[:-3])]
    rows = np.ascontiguousarray(distinct).reshape(distinct.shape[:-3] + (groups * t_q, t_k))
    return np.broadcast_to(rows, split.shape[:-3] + rows.shape[-2:])


def attention_forward(q, k, v, mask, scale):
    """q (..., T_q, d), k (..., T_k, d), v (..., T_k, d_v) with the same batch dims (any
    strides), mask (..., T_q, T_k) bool with the matrices in its leading dims, or None ->
    (out (..., T_q, d_v), lse (..., T_q)).  Same as reference.attention_forward; out is
    laid out in memory as q is (_empty_laid_out_as).  k and v with fewer heads than q:
    grouped-query attention, each group's queries packed into one matrix (_pack_groups)."""
    # BEGIN TWIN softmax softmax_backward log_softmax attention
    groups = _query_groups(q, k)
    if groups > 1:
        out, lse = attention_forward(_pack_groups(q, groups), k, v, _pack_mask(mask, groups), scale)
        return out.reshape(q.shape[:-1] + v.shape[-1:]), lse.reshape(q.shape[:-1])   # (..., H, T_q, d_v)
    dtype = q.dtype
    _check_mask(mask, q, k)
    q4, k4, v4 = (_as_4d(x, dtype) for x in (q, k, v))                  # (B1, B2, T, d) each
    n, t_q = q4.shape[0] * q4.shape[1], q4.shape[2]
    out = _empty_laid_out_as(q4, q4.shape[:3] + (v4.shape[3],), dtype)    # (B1, B2, T_q, d_v)
    lse = np.full((n, t_q), -np.inf, dtype)
    if out.size and k4.shape[2]:
        forward = few_queries.forward if few_queries.takes(q4) else _kernels_for(dtype.type)[0]   # a generated token's
        forward(q4, k4, v4, *_mask_matrices(mask, n), mask is not None, dtype.type(scale), out, lse, _chunks(n))
    else:
        out[...] = 0
    return out.reshape(q.shape[:-1] + (v.shape[-1],)), lse.reshape(q.shape[:-1])
    # END TWIN


def attention_backward(q, k, v, mask, scale, out, lse, dout):
    """Gradients (dq, dk, dv) of attention_forward's output, each laid out in memory as its
    operand is; same as reference.attention_backward (grouped queries packed as forward's)."""
    # BEGIN TWIN softmax softmax_backward log_softmax attention
    groups = _query_groups(q, k)
    if groups > 1:
        packed = [_pack_groups(x, groups) for x in (q, out, dout)]
        dq, dk, dv = attention_backward(packed[0], k, v, _pack_mask(mask, groups), scale, packed[1],
                                        lse.reshape(packed[0].shape[:-1]), packed[2])
        return dq.reshape(q.shape), dk, dv
    dtype = q.dtype
    _check_mask(mask, q, k)
    q4, k4, v4 = (_as_4d(x, dtype) for x in (q, k, v))
    n = q4.shape[0] * q4.shape[1]
    grads = [np.empty_like(x, order="K") for x in (q4, k4, v4)]          # the kernel writes every entry
    if q4.size and k4.shape[2]:
        backward = _kernels_for(dtype.type)[1]
        backward(q4, k4, v4, *_mask_matrices(mask, n), mask is not None, dtype.type(scale),
                 _as_4d(out, dtype), np.ascontiguousarray(lse, dtype).reshape(n, -1), _as_4d(dout, dtype), *grads,
                 _chunks(n))
    else:
        for g in grads:
            g[...] = 0
    return tuple(g.reshape(x.shape) for g, x in zip(grads, (q, k, v)))
    # END TWIN
