"""Run a compiled kernel on Numba's threads without compiling it a second time.

Every threaded kernel here is written once, as a *chunk function*: `f(*args, chunk, chunks)`
does share `chunk` of `chunks` of the work (a run of rows, of matrices).  One thread calls
it with (0, 1) and does everything; with threads, `launch` runs

    for chunk in prange(chunks):
        f(*args, chunk, chunks)

Why not simply compile each kernel twice, with `parallel=True` and without?  Numba compiles
the body of a prange loop as a function of its own, and a function that calls another
compiled function carries a copy of the callee, which LLVM optimizes and turns into machine
code again for every library it is linked into (the parallel loop's body, its wrapper, the
kernel).  For the matmul drivers, whose bodies are the micro-kernels unrolled, the threaded
build cost as long again to compile as the serial one: half of a first run's minute of
compiling.  Here the launcher calls the chunk function through its address, as C calls a
function pointer, so the chunk function is compiled once, and its launcher (a few lines,
shared by the kernels whose arguments have the same types) once more; and the threaded run executes the very same machine code as the serial one, so the
two give the same bits.

With NUMBA_DISABLE_JIT=1 the chunks run one after another, as Python a debugger steps through.
"""

import hashlib
from types import FunctionType

import numba
import numpy as np
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable

from autograd.kernels.fast_math import JIT as FAST_MATH_JIT

JIT = dict(FAST_MATH_JIT, nogil=True)


def address(kernel, signature):
    """The address of `kernel`'s compiled code for `signature` (Numba's own calling
    convention, as `_call_at` calls it)."""
    result = kernel.get_compile_result(signature)
    return result.library.get_pointer_to_function(result.fndesc.llvm_func_name)


@intrinsic
def _call_at(typingctx, function_address, arguments):
    """Call the compiled function at function_address with the tuple `arguments` unpacked;
    an exception it raises propagates to the caller."""
    argument_types = tuple(arguments.types)

    def codegen(context, builder, signature, llvm_arguments):
        pointer_value, packed = llvm_arguments
        function_type = context.call_conv.get_function_type(types.void, argument_types)
        pointer = builder.inttoptr(pointer_value, function_type.as_pointer())
        values = cgutils.unpack_tuple(builder, packed, len(argument_types))
        status, _ = context.call_conv.call_function(builder, pointer, types.void, argument_types, values)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.void(function_address, arguments), codegen


def _launch(function_address, arguments, chunks):
    """Run the compiled chunk function at function_address on `arguments`, one call per
    chunk, the chunks shared out among Numba's threads."""
    for chunk in prange(chunks):
        _call_at(function_address, arguments + (np.int64(chunk), chunks))


@register_jitable
def share_of(x, chunk, chunks):
    """x's rows (or elements) of share `chunk` of `chunks`, as a view indexed from 0: a loop
    over indices from a run-time start keeps Numba's negative-index check inside it, which
    stopped LLVM vectorizing GELU (1.7x as long)."""
    n = x.shape[0]
    return x[chunk * n // chunks:(chunk + 1) * n // chunks]


def chunked(function, name, argument_types, **jit_options):
    """ChunkedKernel of `function(*args, chunk, chunks)` compiled for argument_types under the
    name function[name]: Numba's cache is keyed by a function's qualified name, bytecode and
    closure values, which the builds of one kernel for different dtypes or tiles may share,
    and one build would then be loaded from the cache in place of another."""
    function.__qualname__ = f"{function.__qualname__}[{name}]"
    options = jit_options or JIT
    compiled = numba.njit(types.void(*argument_types, types.int64, types.int64), **options)(function)
    return ChunkedKernel(compiled, argument_types)


_launchers = {}


def _launcher(argument_types):
    """The launcher for chunk functions taking argument_types (about 0.6 s to compile, so
    kernels whose arguments have the same types share one): a copy of _launch named after
    a digest of the types, because Numba caches each function in files named after it, and
    the child processes that compile kernels side by side (compile_once.py) would otherwise
    all write the same file, each with its own types."""
    if argument_types not in _launchers:
        digest = hashlib.sha1(str(argument_types).encode()).hexdigest()[:12]
        launch = FunctionType(_launch.__code__, _launch.__globals__, _launch.__name__)
        launch.__qualname__ = f"launch[{digest}]"
        _launchers[argument_types] = numba.njit(types.void(types.int64, types.Tuple(argument_types), types.int64),
                                                parallel=True, **JIT)(launch)
    return _launchers[argument_types]


class ChunkedKernel:
    """A compiled chunk function `f(*args, chunk, chunks)` and its launcher:
    kernel(*args, chunks) calls f(*args, 0, 1) when chunks is 1, else runs the chunks on
    Numba's threads.  argument_types: the numba types of args."""

    def __init__(self, chunk_function, argument_types):
        self.compiled = chunk_function
        if numba.config.DISABLE_JIT:
            return
        argument_types = tuple(argument_types)
        self.address = address(chunk_function, types.void(*argument_types, types.int64, types.int64))
        self.launch = _launcher(argument_types)

    def __call__(self, *arguments_then_chunks):
        *arguments, chunks = arguments_then_chunks
        if chunks == 1:
            self.compiled(*arguments, 0, 1)
        elif numba.config.DISABLE_JIT:
            for chunk in range(chunks):
                self.compiled(*arguments, chunk, chunks)
        else:
            self.launch(self.address, tuple(arguments), chunks)
