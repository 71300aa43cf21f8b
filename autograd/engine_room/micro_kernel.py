"""The GEMM micro-kernel: one MR x NR tile of C, computed in registers.

    tile[r, j] = sum over kk < k of a_panel[kk, r] * b_panel[kk, j]      (or tile[r, j] += ...)

a_panel (k, MR) and b_panel (k, NR) are packed k-major (gemm.py explains the packing): at
each kk the kernel loads NR numbers of B, broadcasts MR numbers of A and does MR x NR
multiply-adds into MR x NR accumulators that stay in registers for the whole loop.  This is
where a matmul spends its time, and it runs at the CPU's peak only if LLVM keeps every
accumulator in a vector register.

Numba has no vector types, so the loop is straight-line scalar code, one local variable per
accumulator, which LLVM's SLP vectorizer packs into vector registers.  `micro_kernel_source`
writes that code out as Python for a given (MR, NR): it is what runs with NUMBA_DISABLE_JIT=1
(a debugger steps through it), and it shows what the compiled kernel does.

The compiled kernel emits the very same loop as LLVM IR itself (`_define_micro_kernel`): the
same scalar multiply-adds in the same order (so the same bits), the same loads.  Written as
Python, it would pass through Numba's front end (SSA, type inference, lowering of a few
hundred statements) for every tile shape, a large part of the kernels' compile time; the IR
is built directly, and LLVM optimizes it as it did Numba's.
"""

import linecache
import sys

import llvmlite.ir
import numba
import numpy as np
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable

from autograd.engine_room import target

_ELEMENTS = {"float32": llvmlite.ir.FloatType(), "float64": llvmlite.ir.DoubleType()}


def micro_kernel_source(mr, nr, accumulate=False):
    """Python source of the mr x nr micro-kernel:  tile = a_panel^T @ b_panel  over k rows,
    with a_panel (k, mr) and b_panel (k, nr) packed k-major, one scalar per accumulator;
    accumulate=True adds the product to the tile (tile += ...) instead of overwriting it."""
    acc = [[f"c{r}_{j}" for j in range(nr)] for r in range(mr)]
    function, assign = (f"micro_kernel_{mr}x{nr}_adding", "+=") if accumulate else (f"micro_kernel_{mr}x{nr}", "=")
    lines = [f"def {function}(a_panel, b_panel, k, tile):",
             f'    """tile[r, j] {assign} sum over kk < k of a_panel[kk, r] * b_panel[kk, j]  ({mr} x {nr} accumulators)."""']
    lines += [f"    {name} = ZERO" for row in acc for name in row]
    lines.append("    for kk in range(k):")
    lines += [f"        b{j} = b_panel[kk, {j}]" for j in range(nr)]
    for r in range(mr):
        lines.append(f"        a = a_panel[kk, {r}]")
        lines += [f"        {acc[r][j]} += a * b{j}" for j in range(nr)]
    lines += [f"    tile[{r}, {j}] {assign} {acc[r][j]}" for r in range(mr) for j in range(nr)]
    return "\n".join(lines) + "\n"


def _python_micro_kernel(mr, nr, dtype, accumulate):
    """micro_kernel_source's function, registered with linecache for debuggers."""
    source = micro_kernel_source(mr, nr, accumulate)
    filename = f"<generated micro-kernel {mr}x{nr} {np.dtype(dtype).name}{', adding' if accumulate else ''}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"ZERO": np.dtype(dtype).type(0)}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[source[4:source.index("(")]]


def _define_micro_kernel(module, name, mr, nr, dtype, accumulate, separate):
    """The micro-kernel as an LLVM function of (a, a's row and column steps in bytes, b, b's
    row step, k, tile, tile's row step), defined in `module` (once: later calls find it).
    Its body is micro_kernel_source's, statement for statement: accumulators zeroed, then per
    kk the NR loads of B and, per row r, one load of A and NR multiply-adds (fmul, fadd,
    flagged 'contract' as Numba flags them, which LLVM fuses), then the tile stored (or
    added to).  Accumulators live in stack slots, as Numba's local variables do; LLVM's
    first passes turn them into registers."""
    if name in module.globals:
        return module.globals[name]
    i64, bytes_pointer = llvmlite.ir.IntType(64), llvmlite.ir.IntType(8).as_pointer()
    function_type = llvmlite.ir.FunctionType(llvmlite.ir.VoidType(), [bytes_pointer, i64, i64, bytes_pointer, i64,
                                                                       i64, bytes_pointer, i64])
    function = llvmlite.ir.Function(module, function_type, name)
    function.linkage = "internal"
    set.add(function.attributes, target.WIDE_VECTORS)                    # see gemm.prefer_wide_vectors
    if separate:
        function.attributes.add("noinline")                              # see gemm.never_inline
    a, a_row_step, a_column_step, b, b_row_step, k, tile, tile_row_step = function.args
    builder = llvmlite.ir.IRBuilder(function.append_basic_block("entry"))
    element = _ELEMENTS[np.dtype(dtype).name]
    size = np.dtype(dtype).itemsize

    def element_at(base, offset_bytes):
        return builder.bitcast(builder.gep(base, [offset_bytes]), element.as_pointer())

    accumulators = [[builder.alloca(element, name=f"c{r}_{j}") for j in range(nr)] for r in range(mr)]
    for slot in (slot for row in accumulators for slot in row):
        builder.store(llvmlite.ir.Constant(element, 0), slot)
    counter = builder.alloca(i64, name="kk")
    builder.store(i64(0), counter)
    test, body, done = (function.append_basic_block(label) for label in ("for.kk", "body", "store.tile"))
    builder.branch(test)

    builder.position_at_end(test)
    kk = builder.load(counter)
    builder.cbranch(builder.icmp_signed("<", kk, k), body, done)

    builder.position_at_end(body)
    b_row = builder.gep(b, [builder.mul(kk, b_row_step)])
    bs = [builder.load(element_at(b_row, i64(size * j))) for j in range(nr)]
    a_row = builder.gep(a, [builder.mul(kk, a_row_step)])
    for r in range(mr):
        value = builder.load(element_at(a_row, builder.mul(a_column_step, i64(r))))
        for j in range(nr):
            product = builder.fmul(value, bs[j], flags=("contract",))
            builder.store(builder.fadd(builder.load(accumulators[r][j]), product, flags=("contract",)),
                          accumulators[r][j])
    builder.store(builder.add(kk, i64(1)), counter)
    builder.branch(test)

    builder.position_at_end(done)
    for r in range(mr):
        tile_row = builder.gep(tile, [builder.mul(tile_row_step, i64(r))])
        for j in range(nr):
            cell = element_at(tile_row, i64(size * j))
            total = builder.load(accumulators[r][j])
            if accumulate:
                total = builder.fadd(builder.load(cell), total, flags=("contract",))
            builder.store(total, cell)
    builder.ret_void()
    return function


def _emitter(name, mr, nr, dtype, accumulate, separate):
    """An intrinsic micro_kernel(a_panel, b_panel, k, tile) that calls the LLVM micro-kernel
    (defining it in the caller's module).  b_panel's and tile's rows must be contiguous
    (typed C-contiguous: gemm.rows_from); a_panel may have any strides.
    Unless separate, the caller is marked to prefer 512-bit vectors too: LLVM inlines the
    micro-kernel into its caller (the one-line Python function `micro_kernel` makes, which
    Numba compiles and optimizes as a library of its own) before the SLP vectorizer runs,
    and then vectorizes it at the caller's preferred width: with LLVM's Intel tuning 256
    bits, half of what an AVX-512 core multiplies and adds per instruction."""
    numba_dtype = numba.from_dtype(np.dtype(dtype))

    @intrinsic
    def emit(typingctx, a_panel, b_panel, k, tile):
        arrays = (a_panel, b_panel, tile)
        if not (all(isinstance(x, types.Array) and x.ndim == 2 and x.dtype == numba_dtype for x in arrays)
                and b_panel.layout == "C" and tile.layout == "C" and isinstance(k, types.Integer)):
            return None

        def codegen(context, builder, signature, args):
            a, b, c = (context.make_array(signature.args[i])(context, builder, args[i]) for i in (0, 1, 3))
            a_steps = cgutils.unpack_tuple(builder, a.strides)
            function = _define_micro_kernel(builder.module, name, mr, nr, dtype, accumulate, separate)
            if not separate:                    # inlined here: vectorized as part of this function
                set.add(builder.function.attributes, target.WIDE_VECTORS)
            raw = llvmlite.ir.IntType(8).as_pointer()
            builder.call(function, [builder.bitcast(a.data, raw), a_steps[0], a_steps[1],
                                    builder.bitcast(b.data, raw), cgutils.unpack_tuple(builder, b.strides)[0],
                                    context.cast(builder, args[2], signature.args[2], types.intp),
                                    builder.bitcast(c.data, raw), cgutils.unpack_tuple(builder, c.strides)[0]])
            return context.get_dummy_value()

        return types.none(a_panel, b_panel, k, tile), codegen

    return emit


def micro_kernel(mr, nr, dtype, accumulate=False, separate=False):
    """The mr x nr micro-kernel for dtype, micro_kernel(a_panel, b_panel, k, tile), callable
    from compiled code: with NUMBA_DISABLE_JIT micro_kernel_source's function, else a
    function calling the LLVM one (kept a function of its own, never inlined, if separate).
    The intrinsic is reached through this module, by name: Numba's cache key pickles the
    functions a kernel's closure holds, and a pickled intrinsic differs from process to
    process (every run would miss the cache)."""
    python = _python_micro_kernel(mr, nr, dtype, accumulate)
    if numba.config.DISABLE_JIT:
        return python
    name = f"{python.__name__}_{np.dtype(dtype).name}{'_separate' if separate else ''}"
    setattr(sys.modules[__name__], name, _emitter(name, mr, nr, dtype, accumulate, separate))
    source = f"def {name}(a_panel, b_panel, k, tile):\n    micro_kernel.{name}(a_panel, b_panel, k, tile)\n"
    namespace = {"micro_kernel": sys.modules[__name__]}
    exec(compile(source, f"<micro-kernel {name}>", "exec"), namespace)
    return register_jitable(namespace[name])
