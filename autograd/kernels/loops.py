"""The "loops" tier: matmul, softmax, log-softmax and their backwards as plain Numba loops.

This is the compiled code a learner reads and steps through: each kernel is the textbook
loop nest, compiled by Numba to machine code (`@njit`), with `prange` spreading the rows
over the cores.  Run with NUMBA_DISABLE_JIT=1 and Numba compiles nothing: these functions
run as the Python they are, `prange` becomes `range`, and a debugger steps into every loop.
Under a debugger (run_as_python, which the registry calls then) each loop runs as its Python
(Numba's py_func) only where the debugger traces the wrapper that calls it: when `s` could
enter it, or a breakpoint lies in this file; elsewhere its machine code runs, at full speed.

A Python wrapper (`matmul`, `softmax`, ...) lays the arrays out as the compiled loop
wants them, rows of the last axis in one C-contiguous block, and calls it; the op that
called it has already moved its `dim` to the last axis.  Kernels the
tier does not write (layer norm, GELU, Adam, ...) come from the numpy definitions in
reference.py, which are also the results these loops are tested against.  The engine
room (autograd/engine_room/) computes the same things much faster, and much less plainly.
"""

import math
import sys

import numpy as np
from numba import njit, prange

from autograd.kernels import reference


# ============================================================================ matmul

@njit(parallel=True, cache=True)
def matmul_loops(a, b, c):
    """c[t] = a[t] @ b[t] for each matrix t:  c[t, i, j] = sum_k a[t, i, k] b[t, k, j].
    a: (T, M, K), b: (T, K, N), c: (T, M, N) of zeros; each row (t, i) is one thread's work."""
    # BEGIN EXERCISE matmul_loops
    rows, m = c.shape[0] * c.shape[1], c.shape[1]
    for row in prange(rows):
        t, i = row // m, row % m
        for j in range(c.shape[2]):
            for k in range(a.shape[2]):
                c[t, i, j] += a[t, i, k] * b[t, k, j]
    # END EXERCISE


def matmul(a, b):
    """C = A @ B for (..., M, K) @ (..., K, N) -> (..., M, N): the batch dims broadcast and
    flattened into T matrices, each operand one C-contiguous block, then matmul_loops."""
    c = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), np.result_type(a, b))
    # (T, M, K) and (T, K, N), T the number of matrices in the broadcast batch
    a3 = np.ascontiguousarray(np.broadcast_to(a, c.shape[:-2] + a.shape[-2:])).reshape(math.prod(c.shape[:-2]), *a.shape[-2:])
    b3 = np.ascontiguousarray(np.broadcast_to(b, c.shape[:-2] + b.shape[-2:])).reshape(len(a3), *b.shape[-2:])
    # into c, seen as (T, M, N); the loop as Python where a debugger may step into it (run_as_python)
    (matmul_loops.py_func if _as_python and (_as_python == "always" or sys._getframe().f_trace) else matmul_loops)(a3, b3, c.reshape(len(a3), *c.shape[-2:]))
    return c


def matmul_grad(a, b, operand):
    """a @ b as the gradient of `operand` (reference.matmul_grad): matmul's loops."""
    return matmul(a, b)


# ============================================================================ softmax

@njit(parallel=True, cache=True)
def softmax_loops(x, y):
    """y[i, j] = exp(x[i, j] - m) / sum_j' exp(x[i, j'] - m), m = max_j x[i, j], for each row i.
    Subtracting the row's max keeps every exp <= 1: no overflow however large the logits.
    A row of -inf (a query that may attend to nothing) gets zeros, not 0/0 = NaN."""
    # BEGIN TWIN softmax
    for i in prange(x.shape[0]):
        m = x[i].max()
        if m == -np.inf:
            y[i] = 0
            continue
        total = 0.0
        for j in range(x.shape[1]):
            y[i, j] = np.exp(x[i, j] - m)
            total += y[i, j]
        for j in range(x.shape[1]):
            y[i, j] /= total
    # END TWIN


@njit(parallel=True, cache=True)
def softmax_backward_loops(y, dy, dx):
    """dx[i, j] = y[i, j] (dy[i, j] - sum_j' dy[i, j'] y[i, j']) for each row i: the
    Jacobian of softmax, diag(y) - y y^T, applied to dy without ever forming it."""
    # BEGIN TWIN softmax_backward
    for i in prange(y.shape[0]):
        dot = 0.0
        for j in range(y.shape[1]):
            dot += dy[i, j] * y[i, j]
        for j in range(y.shape[1]):
            dx[i, j] = y[i, j] * (dy[i, j] - dot)
    # END TWIN


@njit(parallel=True, cache=True)
def log_softmax_loops(x, y):
    """y[i, j] = (x[i, j] - m) - log sum_j' exp(x[i, j'] - m), m = max_j x[i, j]: the log of
    softmax without ever taking log(0) of an underflowed probability.  A row of -inf gets zeros
    (its total, a sum of exp(-inf - -inf) = NaN, is never used)."""
    # BEGIN TWIN log_softmax
    for i in prange(x.shape[0]):
        m = x[i].max()
        total = 0.0
        for j in range(x.shape[1]):
            total += np.exp(x[i, j] - m)
        for j in range(x.shape[1]):
            y[i, j] = 0.0 if m == -np.inf else (x[i, j] - m) - np.log(total)
    # END TWIN


@njit(parallel=True, cache=True)
def log_softmax_backward_loops(y, dy, dx):
    """dx[i, j] = dy[i, j] - exp(y[i, j]) sum_j' dy[i, j'] for each row i (exp(y) is softmax).
    A fully masked row's y is all 0, so its exps sum to its length, not 1: it gets zeros."""
    for i in prange(y.shape[0]):
        total_dy, total_p = 0.0, 0.0
        for j in range(y.shape[1]):
            total_dy += dy[i, j]
            total_p += np.exp(y[i, j])
        if total_p > 1.5:
            dx[i] = 0
            continue
        for j in range(y.shape[1]):
            dx[i, j] = dy[i, j] - np.exp(y[i, j]) * total_dy


def rowwise(loops, *arrays):
    """Run `loops` over the rows of the last axis of `arrays` (all of one shape), writing a
    new array of that shape: loops(*rows, out), each argument a C-contiguous (rows, n) array.
    Integers become floats, as numpy's exp makes them; an empty last axis makes no rows."""
    shape, dtype = arrays[0].shape, np.result_type(*arrays, np.float32)
    rows = np.ascontiguousarray(np.stack(arrays), dtype).reshape(len(arrays), -1, max(shape[-1], 1))   # (arrays, R, n)
    out = np.empty_like(rows[0])                                                                        # (R, n)
    (loops.py_func if _as_python and (_as_python == "always" or sys._getframe().f_trace) else loops)(*rows, out)   # run_as_python
    return out.reshape(shape)


def softmax(x):
    """Softmax along the last axis (softmax_loops)."""
    # BEGIN TWIN softmax
    return rowwise(softmax_loops, x)
    # END TWIN


def softmax_backward(y, dy):
    """Softmax's backward along the last axis, from its output y (softmax_backward_loops)."""
    # BEGIN TWIN softmax_backward
    return rowwise(softmax_backward_loops, y, dy)
    # END TWIN


def log_softmax(x):
    """Log-softmax along the last axis (log_softmax_loops)."""
    # BEGIN TWIN log_softmax
    return rowwise(log_softmax_loops, x)
    # END TWIN


def log_softmax_backward(y, dy):
    """Log-softmax's backward along the last axis, from its output y (log_softmax_backward_loops)."""
    return rowwise(log_softmax_backward_loops, y, dy)


_as_python = None        # where the loops run as Python for a debugger: see run_as_python


def run_as_python(where):
    """Where each loop runs as the Python it is written in (Numba's py_func, `prange` then a
    plain range), for a debugger to step into: "traced", wherever a sys.settrace debugger
    traces the wrapper that calls it (pdb sets a frame's tracer when it steps into it, or
    when its file holds a breakpoint); "always" (for a debugger that does not trace, as on
    sys.monitoring); None, nowhere: the compiled loops.  With the JIT off they are Python
    already."""
    global _as_python
    if where not in (None, "traced", "always"):
        raise ValueError(f"run_as_python: where must be None, 'traced' or 'always', got {where!r}")
    _as_python = where if hasattr(matmul_loops, "py_func") else None


def warmup(dtype, skip=()):
    """Compile (or load from Numba's cache) every loop kernel for dtype now, so that no
    debugger step waits on it later (a kernel compiled is announced on stderr: see
    autograd/kernels/__init__.py), but those named in skip (a student copy's, whose twins
    here are cut: autograd/kernels/twins.py).  With the loops run as Python (the JIT off,
    or run_as_python) there is nothing to compile, so nothing runs (a breakpoint in a loop
    then first stops on the model's own arrays)."""
    global _as_python
    if not hasattr(matmul_loops, "py_func"):
        return
    x = np.zeros((1, 1), dtype)
    calls = {"matmul": (matmul, x, x), "softmax": (softmax, x), "softmax_backward": (softmax_backward, x, x),
             "log_softmax": (log_softmax, x), "log_softmax_backward": (log_softmax_backward, x, x)}
    where, _as_python = _as_python, None          # compiled here, so a breakpoint in a loop never stops on x
    try:
        for name, (kernel, *arrays) in calls.items():
            if name not in skip:
                kernel(*arrays)
    finally:
        _as_python = where
