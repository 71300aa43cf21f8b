"""Run a compiled kernel on Numba's threads without compiling it a second time.

Every threaded kernel here is written once, as a *chunk function*: `f(*args, chunk, chunks)`
does share `chunk` of `chunks` of the work (a run of rows, of matrices).  One thread calls
it with (0, 1) and does everything; with threads, the launcher runs

    for chunk in prange(chunks):
        f(*args, chunk, chunks)

Why not simply compile each kernel twice, with `parallel=True` and without?  Numba compiles
the body of a prange loop as a function of its own, and a function that calls another
compiled function carries a copy of the callee, which LLVM optimizes and turns into machine
code again for every library it is linked into (the parallel loop's body, its wrapper, the
kernel).  For the matmul drivers, whose bodies are the micro-kernels unrolled, a threaded
build takes as long again to compile as the serial one.  Here the launcher calls the chunk function through its address, as C calls a
function pointer, so the chunk function is compiled once, and the threaded run executes
the very same machine code as the serial one, so the two give the same bits.

There is one launcher for all the kernels (a prange loop is slow to compile, and the
kernels take a dozen different sets of argument types).  It takes integers only: the address
of a *relay* and of a *frame*, a record on the stack holding the chunk function's address
and arguments.  Each set of argument types has an *entry*, a plain compiled function (quick
to compile) that Python calls with the arguments: it fills the frame, and defines the
relay that loads them back from it and calls the chunk function (`_run_chunks`).

    Python -> entry(launcher, f, args, chunks) -> launcher(relay, frame, chunks)
           -> on each thread: relay(frame, chunk, chunks) -> f(*args, chunk, chunks)

With NUMBA_DISABLE_JIT=1 the chunks run one after another, as Python a debugger steps through.
"""

import hashlib
from types import FunctionType

import llvmlite.ir
import numba
import numpy as np
from numba import prange, types
from numba.core import cgutils
from numba.extending import intrinsic, register_jitable

from autograd.engine_room.fast_math import JIT as FAST_MATH_JIT

JIT = dict(FAST_MATH_JIT, nogil=True)
THREE_INTEGERS = (types.int64,) * 3
I64 = llvmlite.ir.IntType(64)


def address(kernel, signature):
    """The address of `kernel`'s compiled code for `signature` (Numba's own calling
    convention, as a relay calls it)."""
    result = kernel.get_compile_result(signature)
    return result.library.get_pointer_to_function(result.fndesc.llvm_func_name)


def _call_compiled(context, builder, address_value, argument_types, values):
    """Call the Numba-compiled function (returning nothing) at the integer address_value;
    its status (did it raise?)."""
    function_type = context.call_conv.get_function_type(types.void, argument_types)
    pointer = builder.inttoptr(address_value, function_type.as_pointer())
    status, _ = context.call_conv.call_function(builder, pointer, types.void, argument_types, values)
    return status


@intrinsic
def _call_relay(typingctx, relay_address, frame_address, chunk, chunks):
    """relay(frame_address, chunk, chunks) for the relay at relay_address (_define_relay:
    it never fails; a chunk's failure is kept in the frame)."""
    def codegen(context, builder, signature, llvm_arguments):
        _call_compiled(context, builder, llvm_arguments[0], THREE_INTEGERS, llvm_arguments[1:])
        return context.get_dummy_value()

    return types.void(relay_address, frame_address, chunk, chunks), codegen


def _launch(relay_address, frame_address, chunks):
    """Run chunks 0 .. chunks-1 on Numba's threads: each calls the relay at relay_address,
    which calls a chunk function on the arguments stored at frame_address (see _run_chunks).
    One launcher serves every kernel."""
    for chunk in prange(chunks):
        _call_relay(relay_address, frame_address, np.int64(chunk), chunks)


# The frame's fields: the chunk function's address, the status of a chunk that failed
# (Numba's return code and exception record, RETCODE_OK while none has), the arguments.
FUNCTION, FAILED_CODE, FAILED_EXCEPTION, ARGUMENTS = range(4)


def _field(builder, frame, index):
    return cgutils.gep_inbounds(builder, frame, 0, index)


def _define_relay(context, module, name, frame_type, chunk_types):
    """relay(frame address, chunk, chunks): call the frame's function on the frame's
    arguments and (chunk, chunks).  If it raises, its status goes into the frame (the
    launcher's threads cannot pass an exception on: a prange loop ignores its body's status)."""
    relay = llvmlite.ir.Function(module, context.call_conv.get_function_type(types.void, THREE_INTEGERS), name)
    relay.linkage = "internal"
    builder = llvmlite.ir.IRBuilder(relay.append_basic_block())
    frame_value, chunk, chunks = context.call_conv.decode_arguments(builder, THREE_INTEGERS, relay)
    frame = builder.inttoptr(frame_value, frame_type.as_pointer())
    arguments = cgutils.unpack_tuple(builder, builder.load(_field(builder, frame, ARGUMENTS)))
    status = _call_compiled(context, builder, builder.load(_field(builder, frame, FUNCTION)), chunk_types,
                            arguments + [chunk, chunks])
    with cgutils.if_unlikely(builder, status.is_error):
        builder.store(status.code, _field(builder, frame, FAILED_CODE))
        builder.store(status.excinfoptr, _field(builder, frame, FAILED_EXCEPTION))
    context.call_conv.return_value(builder, cgutils.get_null_value(relay.args[0].type.pointee))   # no value
    return relay


@intrinsic
def _run_chunks(typingctx, launcher_address, function_address, arguments, chunks):
    """Run the compiled chunk function at function_address on `arguments` in `chunks` chunks,
    through the launcher at launcher_address, and raise what a chunk raised.

    The launcher is compiled once, for three integers, so it cannot take the arguments
    themselves (their types differ from kernel to kernel).  This stores them, with the
    function's address, in a *frame* on the stack, and defines a *relay*, a function of
    (frame address, chunk, chunks) that loads them back and makes the call; the launcher
    calls the relay once per chunk.  The frame lives until the launcher returns, when every
    chunk is done."""
    chunk_types = tuple(arguments.types) + (types.int64, types.int64)

    def codegen(context, builder, signature, llvm_arguments):
        launcher_value, function_value, packed, chunks_value = llvm_arguments
        call_conv = context.call_conv
        status_code = context.get_value_type(types.int32)
        exception_pointer = call_conv.get_function_type(types.void, ()).args[1].pointee
        frame_type = llvmlite.ir.LiteralStructType([I64, status_code, exception_pointer, packed.type])
        relay = _define_relay(context, builder.module, f"{builder.function.name}.relay", frame_type, chunk_types)

        frame = cgutils.alloca_once(builder, frame_type)
        builder.store(function_value, _field(builder, frame, FUNCTION))
        builder.store(status_code(0), _field(builder, frame, FAILED_CODE))              # RETCODE_OK
        builder.store(cgutils.get_null_value(exception_pointer), _field(builder, frame, FAILED_EXCEPTION))
        builder.store(packed, _field(builder, frame, ARGUMENTS))
        _call_compiled(context, builder, launcher_value, THREE_INTEGERS,
                       [builder.ptrtoint(relay, I64), builder.ptrtoint(frame, I64), chunks_value])
        status = call_conv._get_return_status(builder, builder.load(_field(builder, frame, FAILED_CODE)),
                                              builder.load(_field(builder, frame, FAILED_EXCEPTION)))
        with cgutils.if_unlikely(builder, status.is_error):
            call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return types.void(launcher_address, function_address, arguments, chunks), codegen


def _enter(launcher_address, function_address, arguments, chunks):
    """Run a chunk function on Numba's threads (what ChunkedKernel calls from Python)."""
    _run_chunks(launcher_address, function_address, arguments, chunks)


@register_jitable
def share_of(x, chunk, chunks):
    """x's rows (or elements) of share `chunk` of `chunks`, as a view indexed from 0: a loop
    over indices from a run-time start keeps Numba's negative-index check inside it, which
    stopped LLVM vectorizing GELU."""
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


_launcher = []


def launcher_address():
    """The address of the launcher, compiled on first use (one per process: its types are
    the same for every kernel, so the compile children may write its cache files alike)."""
    if not _launcher:
        signature = types.void(types.int64, types.int64, types.int64)
        _launcher.append(address(numba.njit(signature, parallel=True, **JIT)(_launch), signature))
    return _launcher[0]


_entries = {}


def _entry(argument_types):
    """The entry for chunk functions taking argument_types, a copy of _enter named after a
    digest of the types, because Numba caches each function in files named after it, and
    the child processes that compile kernels side by side (compile_once.py) would otherwise
    all write the same file, each with its own types.  An entry is a plain function, quick
    to compile; a launcher (with prange) for each set of argument types would be slow."""
    if argument_types not in _entries:
        digest = hashlib.sha1(str(argument_types).encode()).hexdigest()[:12]
        enter = FunctionType(_enter.__code__, _enter.__globals__, _enter.__name__)
        enter.__qualname__ = f"enter[{digest}]"
        signature = types.void(types.int64, types.int64, types.Tuple(argument_types), types.int64)
        _entries[argument_types] = numba.njit(signature, **JIT)(enter)
    return _entries[argument_types]


class ChunkedKernel:
    """A compiled chunk function `f(*args, chunk, chunks)` and its entry:
    kernel(*args, chunks) calls f(*args, 0, 1) when chunks is 1, else runs the chunks on
    Numba's threads.  argument_types: the numba types of args."""

    def __init__(self, chunk_function, argument_types):
        self.compiled = chunk_function
        if numba.config.DISABLE_JIT:
            return
        argument_types = tuple(argument_types)
        self.address = address(chunk_function, types.void(*argument_types, types.int64, types.int64))
        self.launcher = launcher_address()
        self.enter = _entry(argument_types)

    def __call__(self, *arguments_then_chunks):
        *arguments, chunks = arguments_then_chunks
        if chunks == 1:
            self.compiled(*arguments, 0, 1)
        elif numba.config.DISABLE_JIT:
            for chunk in range(chunks):
                self.compiled(*arguments, chunk, chunks)
        else:
            self.enter(self.launcher, self.address, tuple(arguments), chunks)
