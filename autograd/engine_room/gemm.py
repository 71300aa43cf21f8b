"""GEMM (C = A @ B) in Numba, organised the way BLAS libraries do it (Goto's method, as in BLIS).

The arithmetic is simple; what makes a matmul fast is where the operands sit when the
multiply-adds run.  The work is cut three times:

1. K is cut into blocks of KC (the packed panels below then fit in the caches whatever K
   is; the partial products of the blocks are added into C).
2. For each K block, B (KC x N) is *packed*: copied into panels of NR columns, each stored
   k-major (row kk of the panel is NR consecutive numbers).  A is taken MC rows at a time,
   in strips of MR rows; a strip is read where it is when A's rows (or, for a transposed
   A, its columns) are contiguous, else packed k-major (row kk of the strip is MR
   consecutive numbers).  Packing reads a transposed or strided operand once, in whatever
   order is cheap for it; afterwards every operand streams, so a transposed view costs
   about the same as a contiguous array.
3. Loops in Goto's order: for each B panel (KC x NR), for each A strip (MR x KC) of the
   A block, the micro-kernel computes one MR x NR tile of C.  It keeps MR x NR
   accumulators in registers the whole time (with AVX-512, 4 x 64 float32 = 16 of its 32
   registers of 16 numbers; with AVX2, 3 x 32 = 12 of its 16 registers of 8 numbers, the
   rest holding a row of B; `tile_rows`); for each kk it loads NR numbers of B,
   broadcasts MR numbers of A and does MR x NR multiply-adds.  That register block is what runs at the CPU's peak.  It then
   stores the tile straight into C; only a tile on C's edge, or one of a later K block
   (added to C), goes through a buffer.

Numba has no vector types, so the micro-kernel is written as straight-line scalar code
(one local variable per accumulator) and LLVM's SLP vectorizer packs it into vector
registers.  Numba leaves that vectorizer off by default; these kernels are compiled with
it on (`slp_vectorizer`), and with only the 'contract' fast-math flag (fused multiply-add): with
'reassoc' LLVM would instead vectorize the kk loop as a reduction and spill.

LLVM tunes Intel's AVX-512 cores (Skylake-server to Sapphire Rapids) to *prefer* 256-bit
vectors although they have 512-bit ones (early AVX-512 chips slowed their clock for 512-bit
code), and AMD's Zen 4 and 5 to prefer 512-bit ones.  On 256-bit vectors the micro-kernel
does half the multiply-adds per instruction it could, and the matmul falls to half the
speed of the BLAS it is measured against.  So the functions of this file that vectorize
call `prefer_wide_vectors()`, which marks the function being compiled with LLVM's
"prefer-vector-width"="512" attribute (target.WIDE_VECTORS; on CPUs without AVX-512 LLVM
ignores it), and so does every function the micro-kernel is inlined into (micro_kernel.py:
LLVM vectorizes it as part of the function it lands in).  Only these functions: a
process-wide setting would change how every other kernel's sums are grouped, and with it
every trained model's last bits.  The register tiles are sized from the vector registers of
the CPU compiled for, and the row blocks from its L2 cache read at run time (target.py).

The micro-kernel is in micro_kernel.py: its Python source is generated for each (MR, NR)
(`micro_kernel_source` shows it); with NUMBA_DISABLE_JIT=1 it runs as Python and a debugger
steps through it.
"""

import contextlib
import sys

import llvmlite.ir
import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.np.arrayobj import populate_array
from numba.extending import intrinsic, register_jitable

from autograd.engine_room import chunks, micro_kernel, target

VECTOR_BYTES = target.vector_bytes()
VECTOR_REGISTERS = target.vector_registers()


def tile_rows(registers, vector_bytes):
    """MR, the rows of the register tile, whose rows are four vector registers wide: with
    32 registers of 64 bytes (AVX-512) four rows, 16 accumulators; with 32 narrower ones
    (NEON's 128 bits) six, 24 accumulators and four registers for a row of B; with 16 (AVX2)
    three, 12 accumulators and four for B.  With AVX2, tiles of 6 x 16 and 4 x 24 (12
    accumulators too) spill accumulators to the stack, LLVM loading all of a kk's numbers of
    A before its first FMA; 3 x 32 does not (`python -m demos.bench.kernels` measures the
    driver against numpy).  A tile sized for 32 registers, compiled for 16, spills its
    accumulators and runs at a fraction of numpy's speed."""
    if registers < 32:
        return 3
    return 4 if vector_bytes == 64 else 6


MR = tile_rows(VECTOR_REGISTERS, VECTOR_BYTES)
NR = {dtype: 4 * VECTOR_BYTES // np.dtype(dtype).itemsize for dtype in (np.float32, np.float64)}
# Products at most 96 columns wide with k <= KC go to small_gemm.py instead.
KC = 256                                # K block: a B panel is KC x NR (64 KiB with AVX-512, 32 with AVX2)
# Rows of the packing buffer between one A strip (kc x MR) and the next: four more than KC
# (one cache line or more).  At exactly KC the strips would start a multiple of 2 KiB apart
# (4 KiB for 4 x 256 float32), and packing a transposed A, which writes MR numbers into each
# strip in turn, would send its writes to a few sets of L1 (and pay 4K-aliasing stalls).
A_STRIP_ROWS = KC + 4
PREFETCH_COLUMNS = 8                    # packing a transposed A asks for its columns this far ahead


def row_block_strips(l2_bytes, mr, vector_bytes):
    """How many strips of MR rows of A are packed together (MC = strips x MR rows), from
    the size of one core's L2 cache (target.cache_bytes(2), read at run time): the packed
    block (MC x KC, float32) takes at most a quarter of L2, which also holds the B panel
    going past it and C's rows.  Each B panel streams from L3 once per row block, so the
    longer the block the fewer times, up to a longest beyond which nothing is gained: 16
    strips with AVX-512 (64 KiB), 48 with AVX2's smaller tile (144 KiB), whose panels are
    read more often (`python -m demos.bench.kernels --sizes L` measures the large weight
    gradients, which gain most).  A CPU with a small L2 gets shorter blocks, at least four
    strips."""
    longest = 16 if vector_bytes == 64 else 48
    return max(4, min(longest, l2_bytes // 4 // (KC * 4 * mr)))


ROW_BLOCK_STRIPS = row_block_strips(target.cache_bytes(2), MR, VECTOR_BYTES)
# ... but when that leaves fewer blocks than the threads have tasks (one 128-row matrix: one
# block), blocks as short as 16 strips, so that both threads get work
THREAD_BLOCK_STRIPS = 16
IN_PLACE_PANELS = 4                     # see in_place in gemm()
IN_PLACE_MAX_STRIDE = 1024              # bytes; ditto
B_IN_PLACE_MAX_ROWS = 16                # see b_in_place in gemm()
FASTMATH = {"contract"}
JIT = dict(fastmath=FASTMATH, cache=True, boundscheck=False, nogil=True, error_model="numpy")


@contextlib.contextmanager
def slp_vectorizer():
    """Compile with LLVM's SLP (straight-line) vectorizer on, which the micro-kernel needs."""
    previous = numba.config.SLP_VECTORIZE
    numba.config.SLP_VECTORIZE = 1
    try:
        yield
    finally:
        numba.config.SLP_VECTORIZE = previous


def compile_micro_kernel(mr, nr, dtype, inline=True, accumulate=False):
    """The mr x nr micro-kernel (micro_kernel.py), callable from the drivers'
    compiled code:  tile (=, or += with accumulate) a_panel^T @ b_panel  over k rows.
    inline=False keeps it a function of its own with AVX-512 (see `never_inline`)."""
    return micro_kernel.micro_kernel(mr, nr, dtype, accumulate, separate=not inline and VECTOR_BYTES == 64)


@register_jitable
def aligned_empty(shape, dtype):
    """np.empty(shape, dtype) starting on a 64-byte (cache-line) boundary.  numpy only
    promises 16 bytes; a packed panel that starts mid-line makes half of the micro-kernel's
    vector loads straddle two cache lines, and the matmul would slow down in a process
    whose heap happens to hand out such addresses."""
    size = 1
    for extent in shape:
        size *= extent
    flat = np.empty(size + 64, dtype)
    offset = ((-flat.ctypes.data) % 64) // flat.itemsize
    return flat[offset:offset + size].reshape(shape)


@intrinsic
def element_pointer(typingctx, array, offset):
    """A typed pointer to the element `offset` elements past the array's first (LLVM `gep`)."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        return builder.gep(context.make_array(signature.args[0])(context, builder, args[0]).data, [args[1]])
    return types.CPointer(array.dtype)(array, types.intp), codegen


@intrinsic
def _item_size_jit(typingctx, array):
    """array.itemsize as a constant of the compiled code.  Numba reads `x.itemsize` from the
    array at run time, so `x.strides[0] // x.itemsize` became an integer division (`idiv`,
    tens of cycles) in every view built below, per register tile and per row of a block,
    which in a loop over short rows (the fused attention's masking) dominates.
    Divided by this constant (a power of two), it is a shift."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        return context.get_constant(types.intp, context.get_abi_sizeof(context.get_data_type(signature.args[0].dtype)))
    return types.intp(array), codegen


def _item_size_python(array):
    return array.itemsize


item_size = _item_size_python if numba.config.DISABLE_JIT else _item_size_jit


@intrinsic
def _matrix_at_jit(typingctx, array, i, j):
    """array[i, j] of a 4-D array: the 2-D view of one matrix of a batch, with the array's
    own strides, but holding no reference to the array's memory (a numpy view, taken per
    matrix, costs two atomic reference-count updates, a large share of a product as small
    as attention's per-head ones)."""
    if not (isinstance(array, types.Array) and array.ndim == 4):
        return None
    result = types.Array(array.dtype, 2, "A", readonly=not array.mutable)

    def codegen(context, builder, signature, args):
        source = context.make_array(signature.args[0])(context, builder, args[0])
        shape, strides = cgutils.unpack_tuple(builder, source.shape), cgutils.unpack_tuple(builder, source.strides)
        byte_offset = builder.add(builder.mul(args[1], strides[0]), builder.mul(args[2], strides[1]))
        data = builder.bitcast(builder.gep(builder.bitcast(source.data, llvmlite.ir.IntType(8).as_pointer()),
                                           [byte_offset]), source.data.type)
        view = context.make_array(signature.return_type)(context, builder)
        populate_array(view, data=data, shape=shape[2:], strides=strides[2:], itemsize=source.itemsize, meminfo=None)
        return view._getvalue()
    return result(array, types.intp, types.intp), codegen


def _matrix_at_python(array, i, j):
    return array[i, j]


matrix_at = _matrix_at_python if numba.config.DISABLE_JIT else _matrix_at_jit


@intrinsic
def _prefetch_jit(typingctx, array, offset):
    """Ask the CPU to start loading the cache line of the element `offset` elements past the
    array's first (LLVM's `prefetch`, for reading, into all cache levels); no instruction
    waits for it."""
    if not isinstance(array, types.Array):
        return None

    def codegen(context, builder, signature, args):
        pointer = builder.gep(context.make_array(signature.args[0])(context, builder, args[0]).data, [args[1]])
        i32 = llvmlite.ir.IntType(32)
        kind = llvmlite.ir.FunctionType(llvmlite.ir.VoidType(), [pointer.type, i32, i32, i32])
        function = cgutils.get_or_insert_function(builder.module, kind, "llvm.prefetch.p0")
        builder.call(function, [pointer, i32(0), i32(3), i32(1)])
        return context.get_dummy_value()
    return types.none(array, types.intp), codegen


def _prefetch_python(array, offset):
    """(Nothing to prefetch without the JIT.)"""


prefetch = _prefetch_python if numba.config.DISABLE_JIT else _prefetch_jit
# This module, for the kernels' closures to reach `prefetch` through: Numba's cache key
# pickles a closure together with the globals it names, and a pickled intrinsic differs from
# process to process (named directly, every process missed the cache and compiled the
# GEMM drivers again).
this_module = sys.modules[__name__]


@intrinsic
def _prefer_wide_vectors(typingctx):
    """Mark the function being compiled with LLVM's "prefer-vector-width"="512" (see the
    module docstring); it emits no instruction."""
    def codegen(context, builder, signature, args):
        set.add(builder.function.attributes, target.WIDE_VECTORS)
        return context.get_dummy_value()
    return types.none(), codegen


def _prefer_wide_vectors_python():
    """(No vectors without the JIT.)"""


prefer_wide_vectors = _prefer_wide_vectors_python if numba.config.DISABLE_JIT else _prefer_wide_vectors


@intrinsic
def _never_inline(typingctx):
    """Mark the function being compiled `noinline`: it keeps its own "prefer-vector-width"
    when its caller has none (inlined, it would be compiled as part of the caller, whose
    short loops run better on 256-bit vectors; see attention.product).  Only with AVX-512:
    on an AVX2 CPU there is no wider vector to keep (LLVM ignores the preference), and the
    calls cost more than they save (the fused attention's backward, whose micro-kernel
    calls run 32 multiply-add steps each, was slower with them)."""
    def codegen(context, builder, signature, args):
        if VECTOR_BYTES == 64:
            builder.function.attributes.add("noinline")
        return context.get_dummy_value()
    return types.none(), codegen


def _never_inline_python():
    """(Nothing to inline without the JIT.)"""


never_inline = _never_inline_python if numba.config.DISABLE_JIT else _never_inline


def _row_run_python(x, i, j, n):
    return x[i, j:j + n]


def _col_run_python(x, i, j, n):
    return x[i:i + n, j]


@register_jitable
def _row_run_jit(x, i, j, n):
    step = x.strides[0] // item_size(x)
    return numba.carray(element_pointer(x, i * step + j), n)


@register_jitable
def _col_run_jit(x, i, j, n):
    step = x.strides[1] // item_size(x)
    return numba.carray(element_pointer(x, i + j * step), n)


def _submatrix_python(a, row, col, rows, cols):
    return a[row:row + rows, col:col + cols]


@register_jitable
def _submatrix_jit(a, row, col, rows, cols):
    step = a.strides[0] // item_size(a)
    return numba.carray(element_pointer(a, row * step + col), (rows, step))[:, :cols]


@register_jitable
def _rows_from_jit(x, i, j, rows):
    """x[i:i+rows, j:] of an x whose rows are contiguous, typed as a C-contiguous array
    (reading past column x.shape[1] - j would run into the next row)."""
    step = x.strides[0] // item_size(x)
    return numba.carray(element_pointer(x, i * step + j), (rows, step))


def _rows_from_python(x, i, j, rows):
    return x[i:i + rows, j:]


# a[row:row+rows, col:col+cols] and a[row:row+rows, col:] of an a whose rows are contiguous,
# built from a pointer (as row_run): a view of `a` itself costs two atomic reference-count
# updates (`lock inc`, `lock dec`), which taken per register tile add up.  rows_from's view is typed C-contiguous, so that the micro-kernel
# knows its rows are (a view typed with runtime strides, it loads B's rows by gathers).
submatrix = _submatrix_python if numba.config.DISABLE_JIT else _submatrix_jit
rows_from = _rows_from_python if numba.config.DISABLE_JIT else _rows_from_jit


def _k_major_strip_python(a, top, k0, kc, mr):
    return a[top:top + mr, k0:k0 + kc].T


@register_jitable
def _k_major_strip_jit(a, top, k0, kc, mr):
    step = a.strides[1] // item_size(a)
    return numba.carray(element_pointer(a, top + k0 * step), (kc, step))[:, :mr]


# A[top:top+mr, k0:k0+kc].T of an A whose columns are contiguous: the (kc, mr) strip the
# micro-kernel reads, in place.  Built from a pointer so that it has the very type of a
# strip of the packing buffer and one call site of the micro-kernel serves both (each call
# site inlines a copy of it, seconds of compilation; and a helper returning a view of either
# the read-only A or the buffer was miscompiled).
k_major_strip = _k_major_strip_python if numba.config.DISABLE_JIT else _k_major_strip_jit


# x[i, j:j+n] and x[i:i+n, j] of a 2-D x whose rows (columns) are contiguous, typed as
# contiguous 1-D arrays: Numba compiles any view for runtime strides, so a copy out of one
# runs element by element; out of these it is a vectorized copy.
row_run = _row_run_python if numba.config.DISABLE_JIT else _row_run_jit
col_run = _col_run_python if numba.config.DISABLE_JIT else _col_run_jit


MC = ROW_BLOCK_STRIPS * MR             # rows of A packed together
MC_THREADED = THREAD_BLOCK_STRIPS * MR


def _make_gemm(dtype):
    """The batched GEMM driver for one dtype: a function that runs its compiled chunks on
    one thread or on Numba's threads (chunks.py)."""
    nr = NR[dtype]
    micro_kernel = compile_micro_kernel(MR, nr, dtype)

    @register_jitable(**JIT)
    def pack_b(b, k0, kc, p, packed):
        """Panel p of B[k0:k0+kc, :] (its columns p nr .. p nr + nr - 1), k-major, into the
        rows p KC .. p KC + kc of packed:  packed[p KC + kk, j] = B[k0 + kk, p nr + j], zero
        padded (whatever np.empty left there could be a denormal, whose arithmetic is slow)."""
        n = b.shape[1]
        j0, top = p * nr, p * KC
        width = min(nr, n - j0)
        if width < nr:
            packed[top:top + kc, width:] = 0
        if b.strides[1] == b.itemsize:                            # rows contiguous: copy along them
            for kk in range(kc):
                source, target = row_run(b, k0 + kk, j0, width), row_run(packed, top + kk, 0, width)
                for j in range(width):
                    target[j] = source[j]
        elif b.strides[0] == b.itemsize:                          # a transposed view: down its columns
            for j in range(width):
                source = col_run(b, k0, j0 + j, kc)
                for kk in range(kc):
                    packed[top + kk, j] = source[kk]
        else:
            for kk in range(kc):
                for j in range(width):
                    packed[top + kk, j] = b[k0 + kk, j0 + j]

    @register_jitable(**JIT)
    def prefetch_tile(c, top, height, j0, width):
        """Ask for the cache lines of c[top:top+height, j0:j0+width] (a register tile's
        rows, each one or two lines)."""
        for r in range(height):
            row = row_run(c, top + r, j0, width)
            this_module.prefetch(row, 0)
            this_module.prefetch(row, width - 1)

    @register_jitable(**JIT)
    def pack_a(a, i0, rows, k0, kc, in_place, packed):
        """A[i0:i0+rows, k0:k0+kc] into k-major strips of MR rows, strip q in the rows
        q S .. q S + kc of packed (S = A_STRIP_ROWS):  packed[q S + kk, r] = A[i0 + q MR + r, k0 + kk], zero
        padded below A's last row.  Each strip is what one micro-kernel call reads.  With
        in_place, A's whole strips are read where they are and only a last, partial one is
        packed."""
        whole = rows // MR
        first = whole * MR if in_place else 0
        if a.strides[0] == a.itemsize:                            # a transposed view: along its columns
            ahead = a.strides[1] // this_module.item_size(a) * PREFETCH_COLUMNS
            for kk in range(kc):
                source = col_run(a, i0, k0 + kk, rows)
                for line in range(0, rows, 64 // this_module.item_size(a)):
                    this_module.prefetch(source, ahead + line)
                for q in range(first // MR, whole):
                    target = row_run(packed, q * A_STRIP_ROWS + kk, 0, MR)
                    for r in range(MR):                     # a constant count: unrolled
                        target[r] = source[q * MR + r]
                for i in range(whole * MR, rows):
                    packed[whole * A_STRIP_ROWS + kk, i - whole * MR] = source[i]
        else:
            for i in range(first, rows):
                for kk in range(kc):
                    packed[i // MR * A_STRIP_ROWS + kk, i % MR] = a[i0 + i, k0 + kk]
        for i in range(rows, -(-rows // MR) * MR):
            packed[i // MR * A_STRIP_ROWS:i // MR * A_STRIP_ROWS + kc, i % MR] = 0

    @register_jitable(**JIT)
    def block(a, packed_a, b, packed_b, b_in_place, c, i0, rows, k0, kc, in_place, first, tile):
        """c[i0:i0+rows] (+)= A[i0:i0+rows, k0:k0+kc] (packed in packed_a) @ B[k0:k0+kc]
        (packed in packed_b, or read in place).  Goto's loop order: one B panel (kc x NR)
        meets every A strip.  The first block of K stores a whole register tile straight
        into C; a later block (whose tile is added to C) or a tile on C's edge goes through
        `tile`.
        While a tile computes, the next one's rows of C are asked for (the next strip's, or
        the next panel's first): a tile walks down C's columns, a row of C per page when its
        rows are 4 KiB apart, where the CPU's prefetcher does not follow, and a later K
        block reads the rows it adds to; the large products gain most.  (B is packed a panel
        at a time: a row of B at a time made the weight gradients slower.)"""
        n = c.shape[1]
        strips = (rows + MR - 1) // MR
        panels = (n + nr - 1) // nr
        for p in range(panels):
            j0 = p * nr
            width = min(nr, n - j0)
            panel = rows_from(b, k0, j0, kc) if b_in_place else rows_from(packed_b, p * KC, 0, kc)
            for q in range(strips):
                top = i0 + q * MR
                height = min(MR, rows - q * MR)
                if in_place and height == MR and a.strides[1] == a.itemsize:   # A's own rows
                    strip = submatrix(a, top, k0, MR, kc).T
                elif in_place and height == MR:                   # a transposed A's own columns
                    strip = k_major_strip(a, top, k0, kc, MR)
                else:
                    strip = submatrix(packed_a, q * A_STRIP_ROWS, 0, kc, MR)
                next_p, next_top = (p, top + MR) if q + 1 < strips else (p + 1, i0)
                if next_p < panels:
                    prefetch_tile(c, next_top, min(MR, i0 + rows - next_top), next_p * nr, min(nr, n - next_p * nr))
                direct = first and height == MR and width == nr
                micro_kernel(strip, panel, kc, rows_from(c, top, j0, MR) if direct else rows_from(tile, 0, 0, MR))
                if direct:
                    continue
                for r in range(height):                           # rows typed contiguous: vectorized
                    target, source = row_run(c, top + r, j0, width), row_run(tile, r, 0, width)
                    if first:
                        for j in range(width):
                            target[j] = source[j]
                    else:
                        for j in range(width):
                            target[j] += source[j]

    @register_jitable
    def plan(a, b, c, chunks):
        """How gemm shares out its work and reads its operands (the same in every chunk)."""
        m, n = c.shape[2:]
        t_count = c.shape[0] * c.shape[1]
        k = a.shape[3]
        k_blocks = (k + KC - 1) // KC
        n_panels = (n + nr - 1) // nr
        row_blocks = -(-m // MC)
        if t_count < chunks:                      # few matrices: each cut into whole multiples of the
            tasks = -(-chunks // t_count)         # tasks it is shared among, down to MC_THREADED rows
            row_blocks = min(-(-row_blocks // tasks) * tasks, -(-m // MC_THREADED))
        mc = -(-m // row_blocks)                  # rows of a block, the blocks even (768 rows as
        mc = -(-mc // MR) * MR                    # 5 x 144 + 48, two threads would wait for the
        row_blocks = -(-m // mc)                  # longer half), in whole strips
        work = t_count * row_blocks
        # A's strips are read in place when its rows are contiguous: the MR rows stream side
        # by side (packing them k-major instead costs more than it saves).
        # A transposed A (a weight gradient's g.T) is already k-major: its strips are read
        # in place when few B panels read each (packing would cost more than it saves); with
        # many, the strided reads repeat and a packed copy wins.
        # Each kk of a strip read in place is a cache line of its own, `a.strides[3]` bytes
        # from the last; from 1 KiB apart they crowd a few of L1's sets (4 KiB: all one set),
        # and packing wins.
        in_place = a.strides[3] == a.itemsize or (a.strides[2] == a.itemsize and n_panels <= IN_PLACE_PANELS
                                                   and a.strides[3] < IN_PLACE_MAX_STRIDE)
        # B's rows read in place, unpacked, when few A rows would reuse a packed panel (the
        # 13-wide output layer's weight gradient g^T @ x: packing x cost more than the product)
        b_in_place = m <= B_IN_PLACE_MAX_ROWS and b.strides[3] == b.itemsize and n % nr == 0
        return k_blocks, n_panels, row_blocks, mc, work, in_place, b_in_place

    def shared_panels(a, b, c, chunks):
        """The buffer for B's packed panels, when they are packed once, up front: on threads,
        for a B that several work items use (a weight, or a matrix with many row blocks),
        rather than by every chunk; on one thread, for a B that several matrices use.  Else
        an empty one: each chunk packs its own, a K block at a time, as it uses them.
        Plain Python (plan and aligned_empty run as Python too): a few microseconds for the
        calls that ask, which are threaded or batched ones; compiled, it would take far longer
        to compile than it ever saves."""
        k_blocks, n_panels, _, _, work, _, b_in_place = plan(a, b, c, chunks)
        users = work if chunks > 1 else c.shape[0] * c.shape[1]
        shared = b.shape[0] * b.shape[1] < users and not b_in_place
        return aligned_empty((b.shape[0] * b.shape[1] if shared else 0, k_blocks, n_panels * KC, nr), c.dtype)

    def pack_shared_chunk(b, packed_all, chunk, chunks):
        """Share `chunk` of the panels of every B matrix and K block, packed into packed_all."""
        k = b.shape[2]
        k_blocks, n_panels = packed_all.shape[1], packed_all.shape[2] // KC
        tasks = packed_all.shape[0] * k_blocks * n_panels
        for task in range(chunk * tasks // chunks, (chunk + 1) * tasks // chunks):
            which, kb, p = task // (k_blocks * n_panels), task // n_panels % k_blocks, task % n_panels
            pack_b(b[which // b.shape[1], which % b.shape[1]], kb * KC, min(KC, k - kb * KC), p, packed_all[which, kb])

    def gemm_chunk(a, b, a_of, b_of, c, packed_all, chunk, chunks):
        """c[t] = a[a_of[t]] @ b[b_of[t]] for every t (the arguments are gemm's), with
        B's panels from packed_all if it holds them; this call does run `chunk` of the
        work items (chunks.py), with packing buffers of its own.  For each matrix, Goto's
        order: for each K block, B's panels of it are packed (unless packed_all holds them)
        and then every row block of A meets them, while they are still in the caches.
        (Packing all of a large B first and reading it back for each row block sends it
        through memory twice: Goto's order keeps the large weight gradients nearer numpy's
        speed, as `demos.bench.kernels --sizes L` shows.)"""
        prefer_wide_vectors()
        k_blocks, n_panels, row_blocks, mc, work, in_place, b_in_place = plan(a, b, c, chunks)
        m, k = c.shape[2], a.shape[3]
        a2, b2, c2 = a.shape[1], b.shape[1], c.shape[1]
        shared = packed_all.shape[0] > 0
        own = aligned_empty((0 if shared else 1, n_panels * KC, nr), c.dtype)
        packed_a = aligned_empty((MC // MR * A_STRIP_ROWS, MR), c.dtype)
        tile = aligned_empty((MR, nr), c.dtype)
        packed_for = (-1, -1)                                     # which B and K block `own` holds
        start, stop = chunk * work // chunks, (chunk + 1) * work // chunks
        for t in range(start // row_blocks, -(-stop // row_blocks)):
            a_t, b_t, c_t = a[a_of[t] // a2, a_of[t] % a2], b[b_of[t] // b2, b_of[t] % b2], matrix_at(c, t // c2, t % c2)
            first_block, last_block = max(start - t * row_blocks, 0), min(stop - t * row_blocks, row_blocks)
            for kb in range(k_blocks):
                kc = min(KC, k - kb * KC)
                if not shared and not b_in_place and packed_for != (b_of[t], kb):
                    packed_for = (b_of[t], kb)
                    for p in range(n_panels):
                        pack_b(b_t, kb * KC, kc, p, own[0])
                panels = packed_all[b_of[t], kb] if shared else own[0]
                for blk in range(first_block, last_block):
                    i0 = blk * mc
                    rows = min(mc, m - i0)
                    pack_a(a_t, i0, rows, kb * KC, kc, in_place, packed_a)
                    block(a_t, packed_a, b_t, panels, b_in_place, c_t, i0, rows, kb * KC, kc, in_place, kb == 0, tile)

    name = np.dtype(dtype).name
    argument_types = driver_argument_types(dtype)
    operand = argument_types[0]                                        # a's and b's type
    packed = numba.types.Array(numba.from_dtype(np.dtype(dtype)), 4, "C")
    with slp_vectorizer():
        body = chunks.chunked(gemm_chunk, name, argument_types + (packed,), **JIT)
        pack = chunks.chunked(pack_shared_chunk, name, (operand, packed), **JIT)
    unshared = np.empty((0, 1, KC, nr), dtype)

    def gemm(a, b, a_of, b_of, c, chunks):
        """c[t] = a[a_of[t]] @ b[b_of[t]] for every t, on one thread when chunks is 1.

        a: (A1, A2, M, K) and b: (B1, B2, K, N) with any strides (two batch dims, so that a
        transposed (B, H, T, d) view needs no copy); a_of / b_of: for each output matrix t
        the flat index of its operands (how broadcast batch dims are handled); c: (C1, C2,
        M, N), matrix t at c[t // C2, t % C2], with any strides that keep its rows
        contiguous (a gradient may be written in its operand's layout: ops/matmul.py).
        Work items are (matrix, block of at most MC rows), split into `chunks` runs, one per
        thread task, each with its own packing buffers."""
        if chunks == 1 and b.shape[0] * b.shape[1] >= c.shape[0] * c.shape[1]:     # no B used twice
            body(a, b, a_of, b_of, c, unshared, 1)
            return
        packed_all = shared_panels(a, b, c, chunks)
        if packed_all.shape[0]:
            pack(b, packed_all, chunks)
        body(a, b, a_of, b_of, c, packed_all, chunks)

    gemm.compiled = body.compiled                   # the compiled chunk function (its cache statistics)
    return gemm


def driver_argument_types(dtype):
    """The numba types of a batched GEMM driver's (a, b, a_of, b_of, c)."""
    t = numba.from_dtype(np.dtype(dtype))
    operand = numba.types.Array(t, 4, "A", readonly=True)
    index = numba.types.Array(numba.int64, 1, "C", readonly=True)
    return operand, operand, index, index, numba.types.Array(t, 4, "A")


_kernels = {}


def made_once(kernels, make, dtype):
    """kernels[dtype], made by make(dtype's scalar type) on its first use.  Looked up by the
    dtype as given (np.float32 or np.dtype("float32"), which hash differently), and only
    then normalized: np.dtype() costs a few percent of a small product's whole call."""
    kernel = kernels.get(dtype)
    if kernel is None:
        key = np.dtype(dtype)
        if key not in kernels:
            kernels[key] = make(key.type)
        kernel = kernels[dtype] = kernels[key]
    return kernel


def gemm_kernel(dtype):
    """The driver for dtype (float32 or float64), compiled once: gemm(a, b, a_of, b_of, c, chunks)."""
    return made_once(_kernels, _make_gemm, dtype)
