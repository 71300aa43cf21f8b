"""Batched GEMM for small matrices (attention's per-head products): no packing, no set-up.

The Goto driver (gemm.py) pays, per matrix, for packing B into panels, setting up its
buffers and blocking K: a fixed cost that a 512 x 512 product hides but that a 10 x 16 by
16 x 10 one (attention's scores at one head) cannot.  Here
the micro-kernel reads the operands where they are:

- a strip of MR rows of A is read in place whether A is row-major or a transposed view
  (the micro-kernel loads single numbers of A, to broadcast them);
- B's panel of NR columns is read in place when B's rows are contiguous and less than
  1 KiB apart (the micro-kernel loads NR consecutive numbers of a row of B at a time);
  else B is first copied into a row-major buffer (k x n numbers, 1/m of the work).  A
  transposed B, such as the keys k^T of q @ k^T, is copied a square of vector registers
  at a time (transpose.py: a number at a time, the copy would cost a large share of the
  product);
- the MR x NR tile is stored straight into C.

Edges cost no extra code: when m is not a multiple of MR, the last strip starts at row
m - MR and overlaps the one before it, computing a few rows twice (to identical values);
the last panel likewise starts at column n - NR.  A product at most one vector register
wide runs on a tile that narrow, and so does a wide product's last panel when at most that
many columns are left.  Only a matrix smaller than one tile, or an operand with no
contiguous dimension, goes through zero-padded buffers.

Each entry of C is the same sum in the same order (kk = 0, 1, ..., k - 1, one fused
multiply-add each) as in the Goto driver when k <= KC, so the two give identical bits and
which of them runs never changes a result.  A product with at most FEW_ROWS rows comes
here whatever k: K is then cut into blocks of KC as the Goto driver cuts it, the first
block's tiles stored into C and each later block's added (through a buffer, and only the
rows and columns that an overlapping strip or panel before it has not added), the same
sums again.
"""

import numba
import numpy as np

from autograd.engine_room import chunks, gemm, transpose

# The register tile: MR rows (8 with 32 vector registers, AVX-512's or NEON's; 4 with 16,
# AVX2's or SSE's, which 8 rows of two would overflow) by two vector registers ("wide"); a
# product at most one register wide, and
# a wide product's last panel if it has at most that many columns left, run on a tile one
# register wide ("narrow": a two-register tile would be half padding).  With A read in place
# (rows apart in memory), AVX2's 4 x 16 float32 tile outruns 8 x 8, and 8 x 16 spills.
MR = 8 if gemm.VECTOR_REGISTERS == 32 else 4
_ONE_REGISTER = {dtype: gemm.VECTOR_BYTES // np.dtype(dtype).itemsize for dtype in (np.float32, np.float64)}
TILES = {"wide": {dtype: 2 * cols for dtype, cols in _ONE_REGISTER.items()}, "narrow": _ONE_REGISTER}
MAX_COLS = 96                                # products with n <= MAX_COLS and k <= KC take this path,
FEW_ROWS = 16                                # and those with at most FEW_ROWS rows whatever k
BLOCK_ROWS = 64                              # what threads share: (matrix, block of rows)
GOTO_FROM_ROWS = None if gemm.VECTOR_REGISTERS == 32 else 256   # see small_enough


def small_enough(m, k, n):
    """Whether an (m x k) @ (k x n) product should take this path: with k <= KC whatever m,
    A's strips are read in place and stay in L1 while the few panels of B (in L2) go past
    them, so packing A would buy nothing.  With at most FEW_ROWS rows, also a longer k (the
    13-wide output layer's weight gradient g^T @ x, k = 640-704): K is cut into blocks of KC
    as the Goto driver cuts it (each block's sums added to C: the same sums, the same bits),
    and a block of B, 32 columns wide, stays in L1 for the strips that read it, where the
    Goto driver streamed its 64-wide panel from L2 once for every 4 rows.
    With AVX2 a product of at least GOTO_FROM_ROWS rows whose columns are whole Goto panels
    goes to the Goto driver, whose 3 x 32 tile outruns this driver's 4 x 16 there (the
    smallest model's layers, for one)."""
    if GOTO_FROM_ROWS is not None and m >= GOTO_FROM_ROWS and n % gemm.NR[np.float32] == 0:
        return False
    return n <= MAX_COLS and (k <= gemm.KC or m <= FEW_ROWS)


@numba.extending.register_jitable
def row_blocks(m):
    """The blocks of rows work is shared out in; the last takes the remainder, so that each
    block has at least MR rows (or is the whole matrix) and no two blocks overlap."""
    return max(1, m // BLOCK_ROWS)


# ----- views built from pointers, so that in-place operands and buffers have one type
# (see gemm.k_major_strip); with NUMBA_DISABLE_JIT=1, the plain slices they stand for.

@numba.extending.register_jitable
def _a_strip_jit(a, top, k0, k):
    """A[top:top+MR, k0:k0+k].T, (k, MR), of an A whose rows or columns are contiguous."""
    if a.strides[1] == a.itemsize:
        step = a.strides[0] // gemm.item_size(a)
        return numba.carray(gemm.element_pointer(a, top * step + k0), (MR, step))[:, :k].T
    step = a.strides[1] // gemm.item_size(a)
    return numba.carray(gemm.element_pointer(a, top + k0 * step), (k, step))[:, :MR]


def _a_strip_python(a, top, k0, k):
    return a[top:top + MR, k0:k0 + k].T


a_strip = _a_strip_python if numba.config.DISABLE_JIT else _a_strip_jit


@numba.extending.register_jitable(**gemm.JIT)
def copy_b(b, target):
    """target[:, :n] = B (k x n), into the row-major buffer the micro-kernel reads."""
    k, n = b.shape
    if b.strides[1] == b.itemsize:                              # rows contiguous: along them
        for kk in range(k):
            source, row = gemm.row_run(b, kk, 0, n), target[kk]
            for j in range(n):
                row[j] = source[j]
    elif b.strides[0] == b.itemsize:                            # a transposed B: a square of
        transpose.copy_transposed(b.T, target, 1.0)            # registers at a time
    else:
        for kk in range(k):
            for j in range(n):
                target[kk, j] = b[kk, j]


@numba.extending.register_jitable
def store_tile(tile, c, top, left, row_from, col_from, rows, cols, first):
    """C's block at (top, left) from tile[:rows, :cols]: stored whole for the first block of
    K (rows an overlapping strip or panel wrote already get the same values); for a later
    block, added, but only where r >= row_from and j >= col_from: the rest the strip and the
    panel before it (which this one overlaps) added already.  Through row views indexed from
    0, which LLVM can tell are never negative, so Numba's negative-index checks drop out and
    the loops vectorize (indexed c[top + r, left + j], they ran one number at a time)."""
    for r in range(0 if first else row_from, rows):
        source, target = gemm.row_run(tile, r, 0, cols), gemm.row_run(c, top + r, left, cols)
        if first:
            for j in range(cols):
                target[j] = source[j]
        else:
            for j in range(col_from, cols):
                target[j] += source[j]


def _make_small_gemm(dtype):
    nr, edge = TILES["wide"][dtype], TILES["narrow"][dtype]
    micro_kernel = gemm.compile_micro_kernel(MR, nr, dtype)
    # The narrow tile computes a product at most `edge` columns wide (a wide tile would be half
    # padding), and a wide product's last panel when it has at most `edge` columns left (n 33
    # or 65: attention over T + 1 positions), instead of a whole overlapping wide panel (twice
    # the work on 33 columns).
    edge_kernel = gemm.compile_micro_kernel(MR, edge, dtype)

    def small_gemm_chunk(a, b, a_of, b_of, c, chunk, chunks):
        """c[t] = a[a_of[t]] @ b[b_of[t]] for every t; the arguments are gemm.gemm_kernel's.
        Work items are (matrix, block of rows), split into `chunks` runs; this call does
        run `chunk` (chunks.py)."""
        c2, m, n = c.shape[1:]
        t_count = c.shape[0] * c2
        k = a.shape[3]
        a2, b2 = a.shape[1], b.shape[1]
        size = a.itemsize
        blocks = row_blocks(m)
        work = t_count * blocks
        # which operands are read in place (else copied into a zero-padded buffer).  B's
        # panel is read again by every strip, so its rows stay in L1 only if they spread over
        # its sets: rows IN_PLACE_MAX_STRIDE bytes apart or more (dout at 8 heads of 32
        # float32, in P^T @ dout) crowd a few, and are faster copied first.
        a_direct = m >= MR and ((a.strides[3] == size and a.strides[2] >= k * size)
                                or (a.strides[2] == size and a.strides[3] >= m * size))
        tile_cols = edge if n <= edge else nr               # the product's tile: narrow or wide
        b_direct = (n >= tile_cols and b.strides[3] == size and b.strides[2] >= n * size
                    and b.strides[2] < gemm.IN_PLACE_MAX_STRIDE)
        c_direct = m >= MR and n >= tile_cols
        cols = max(n, tile_cols)
        # the narrow tile computes the panels from column narrow_from on: all of a product at
        # most `edge` wide, or a wide one's last columns (when C is written in place)
        narrow_from = cols - edge if c_direct or n <= edge else cols
        narrow_left = max(n - edge, 0)                      # where a narrow panel starts
        gemm.prefer_wide_vectors()
        a_copy = gemm.aligned_empty((0 if a_direct else max(m, MR), k), c.dtype)
        b_copy = gemm.aligned_empty((0 if b_direct else k, cols), c.dtype)
        c_copy = gemm.aligned_empty((0 if c_direct and k <= gemm.KC else MR, nr), c.dtype)
        a_copy[m:] = 0
        b_copy[:, n:] = 0
        copied_for = -1                                     # which B b_copy holds
        for item in range(chunk * work // chunks, (chunk + 1) * work // chunks):
            t, blk = item // blocks, item % blocks
            low = blk * BLOCK_ROWS
            high = m if blk == blocks - 1 else low + BLOCK_ROWS
            # these three views hold no reference; c_t is typed row-major, (m, C's row stride)
            a_t = gemm.matrix_at(a, a_of[t] // a2, a_of[t] % a2)
            b_t = gemm.matrix_at(b, b_of[t] // b2, b_of[t] % b2)
            c_t = gemm.rows_from(gemm.matrix_at(c, t // c2, t % c2), 0, 0, m)
            if not a_direct:
                for i in range(low, high):
                    for kk in range(k):
                        a_copy[i, kk] = a_t[i, kk]
            if not b_direct and b_of[t] != copied_for:
                copied_for = b_of[t]
                copy_b(b_t, b_copy)
            last = max(high, low + MR) - MR                 # where the last strip starts
            for k0 in range(0, k, gemm.KC):                 # one block of K unless FEW_ROWS (small_enough)
                kc = min(gemm.KC, k - k0)
                first = k0 == 0                             # a later block's tiles are added to C
                for q in range(low, high, MR):
                    top = min(q, last)                      # the last strip overlaps the one before
                    strip = a_strip(a_t, top, k0, kc) if a_direct else a_strip(a_copy, top, k0, kc)
                    for p in range(0, cols, nr):
                        if p >= narrow_from:                # overlapping the panel before
                            panel = (gemm.rows_from(b_t, k0, narrow_left, kc) if b_direct
                                     else gemm.rows_from(b_copy, k0, narrow_left, kc))
                            if c_direct and first:
                                edge_kernel(strip, panel, kc, gemm.rows_from(c_t, top, narrow_left, MR))
                            else:
                                edge_kernel(strip, panel, kc, gemm.rows_from(c_copy, 0, 0, MR))
                                store_tile(c_copy, c_t, top, narrow_left, q - top, p - narrow_left,
                                           min(MR, m - top), min(edge, n - narrow_left), first)
                            continue
                        left = min(p, cols - nr)            # the last panel overlaps too
                        panel = gemm.rows_from(b_t, k0, left, kc) if b_direct else gemm.rows_from(b_copy, k0, left, kc)
                        if c_direct and first:
                            micro_kernel(strip, panel, kc, gemm.rows_from(c_t, top, left, MR))
                            continue
                        micro_kernel(strip, panel, kc, gemm.rows_from(c_copy, 0, 0, MR))
                        store_tile(c_copy, c_t, top, left, q - top, p - left, min(MR, m - top), min(nr, n - left), first)

    with gemm.slp_vectorizer():
        return chunks.chunked(small_gemm_chunk, np.dtype(dtype).name, gemm.driver_argument_types(dtype), **gemm.JIT)


_kernels = {}


def small_gemm_kernel(dtype):
    """The compiled small-matrix driver for dtype (made once): kernel(a, b, a_of, b_of, c,
    chunks), on one thread when chunks is 1."""
    return gemm.made_once(_kernels, _make_small_gemm, dtype)
