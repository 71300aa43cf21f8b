"""Transposing copies in vector registers: target = factor * x^T, a square at a time.

A transposing copy written as two loops moves one number per instruction: its loads run
along x's rows, its stores down target's columns (or the other way round), and no vector
instruction reads or writes a column.  The fused attention copies q^T and dout^T once per
matrix, and the small GEMM a transposed B (the keys k^T of q @ k^T): at attention's sizes
such copies are a large share of the work, so they are done in vector registers instead.

`transpose_square` instead loads L rows of L numbers (one vector register each: with
AVX-512, L = 16 float32 or 8 float64; with AVX2, 8 or 4), transposes the L x L square inside the registers and stores L
rows.  The transposition is log2(L) rounds of shuffles: in the round of half-width h, the
rows i and i + h (in groups of 2h rows) exchange blocks of h numbers, which turns the
square's 2h x 2h blocks into their block-transposes; after the rounds h = L/2, ..., 1 every
block is transposed down to single numbers.  For L = 4:

    a b c d      a b i j      a e i m
    e f g h  ->  e f m n  ->  b f j n
    i j k l      c d k l      c g k o
    m n o p      g h o p      d h l p

Each round is 2 x L/2 two-register shuffles (LLVM's `shufflevector`, which on AVX-512
becomes one vpermt2ps/pd each).  The product with `factor` is one multiply per number,
as in the scalar loop, so the result is the same bit for bit.
"""

import llvmlite.ir
import numba
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable

from autograd.engine_room import gemm

SQUARE_BYTES = gemm.VECTOR_BYTES       # one row of the square: one vector register


def shuffle_masks(lanes, h):
    """The two shufflevector masks of the round of half-width h: lanes of the first row are
    0..lanes-1, of the second lanes..2*lanes-1.  In each block of 2h lanes, the first
    result takes the first h lanes of both rows, the second the last h of both."""
    first, second = [], []
    for block in range(0, lanes, 2 * h):
        first += [block + u for u in range(h)] + [lanes + block + u for u in range(h)]
        second += [block + h + u for u in range(h)] + [lanes + block + h + u for u in range(h)]
    return first, second


@intrinsic
def _transpose_square_jit(typingctx, x, target, row, col, factor):
    """target[col:col+L, row:row+L] = factor * x[row:row+L, col:col+L]^T, L the numbers in
    one vector register.  x's and target's rows must be contiguous (strides[1] == itemsize)."""
    if not (isinstance(x, types.Array) and isinstance(target, types.Array) and x.ndim == target.ndim == 2
            and x.dtype == target.dtype and x.dtype in (types.float32, types.float64)):
        return None
    itemsize = x.dtype.bitwidth // 8
    lanes = SQUARE_BYTES // itemsize

    def codegen(context, builder, signature, args):
        source = context.make_array(signature.args[0])(context, builder, args[0])
        dest = context.make_array(signature.args[1])(context, builder, args[1])
        row, col, factor = args[2], args[3], args[4]
        vector = llvmlite.ir.VectorType(context.get_value_type(signature.args[0].dtype), lanes)
        index_vector = llvmlite.ir.VectorType(llvmlite.ir.IntType(32), lanes)
        byte_pointer = llvmlite.ir.IntType(8).as_pointer()
        intp = context.get_value_type(types.intp)

        def row_pointer(array, first_row, r, first_col):
            """A pointer to L numbers at array[first_row + r, first_col:]."""
            stride = cgutils.unpack_tuple(builder, array.strides)[0]
            offset = builder.add(builder.mul(builder.add(first_row, intp(r)), stride),
                                 builder.mul(first_col, intp(itemsize)))
            return builder.bitcast(builder.gep(builder.bitcast(array.data, byte_pointer), [offset]),
                                   vector.as_pointer())

        splat = builder.insert_element(llvmlite.ir.Constant(vector, llvmlite.ir.Undefined), factor, intp(0))
        splat = builder.shuffle_vector(splat, splat, llvmlite.ir.Constant(index_vector, [0] * lanes))
        rows = [builder.fmul(builder.load(row_pointer(source, row, r, col), align=itemsize), splat)
                for r in range(lanes)]
        h = lanes // 2
        while h >= 1:                                   # the rounds, as in the docstring
            first, second = (llvmlite.ir.Constant(index_vector, mask) for mask in shuffle_masks(lanes, h))
            mixed = list(rows)
            for top in range(0, lanes, 2 * h):
                for i in range(top, top + h):
                    mixed[i] = builder.shuffle_vector(rows[i], rows[i + h], first)
                    mixed[i + h] = builder.shuffle_vector(rows[i], rows[i + h], second)
            rows = mixed
            h //= 2
        for r in range(lanes):
            builder.store(rows[r], row_pointer(dest, col, r, row), align=itemsize)
        return context.get_dummy_value()
    return types.none(x, target, types.intp, types.intp, x.dtype), codegen


def _transpose_square_python(x, target, row, col, factor):
    lanes = SQUARE_BYTES // x.itemsize
    target[col:col + lanes, row:row + lanes] = factor * x[row:row + lanes, col:col + lanes].T


transpose_square = _transpose_square_python if numba.config.DISABLE_JIT else _transpose_square_jit


@register_jitable
def copy_transposed(x, target, factor):
    """target[c, j] = factor * x[j, c] for all of x (rows, cols); x's and target's rows
    contiguous.  Whole L x L squares in registers, the edges one number at a time."""
    rows, cols = x.shape
    lanes = SQUARE_BYTES // gemm.item_size(x)                   # a constant: the loops below divide by it
    whole_rows, whole_cols = rows - rows % lanes, cols - cols % lanes
    for j in range(0, whole_rows, lanes):
        for c in range(0, whole_cols, lanes):
            transpose_square(x, target, j, c, factor)
    for j in range(rows):
        source = x[j]
        for c in range(whole_cols if j < whole_rows else 0, cols):
            target[c, j] = factor * source[c]
