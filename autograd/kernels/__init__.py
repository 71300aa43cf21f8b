"""The hot kernels of the tensor engine (and the Adam update of nn.optim), behind one switch.

Ops call `kernels.matmul`, `kernels.softmax`, ... and this module forwards the call to
the chosen backend: "numba" (JIT-compiled, `autograd/kernels/jit.py`) or "numpy" (the
plain reference twins, `autograd/kernels/reference.py`).  Choose with the environment
variable AUTOGRAD_KERNELS=numpy|numba before import (numba is the default), or
`use_backend(name)` at run time.
"""

import os

from autograd.kernels import reference

_current = None      # the backend every call below goes to: the reference module, jit, or _NumbaOnFirstCall
_numba_ready = False


def _numba_backend(meanwhile=None):
    """The jit module, its kernels first compiled in child processes if Numba's cache lacks
    them, so that this process runs them as loaded from the cache (see compile_once.py);
    meanwhile, if given, runs here while the child compiles."""
    global _numba_ready
    from autograd.kernels import compile_once, jit
    if not _numba_ready:
        compile_once.compile_in_a_child_if_needed(jit, meanwhile=meanwhile)
        _numba_ready = True
    return jit


class _NumbaOnFirstCall:
    """Stands for the numba backend until the first kernel call, which makes it ready and
    puts the jit module in its place: importing autograd (as the scalar engine's demos do)
    compiles nothing."""

    def __getattr__(self, name):
        global _current
        _current = _numba_backend()
        return getattr(_current, name)


def _load_backend(name):
    if name not in ("numpy", "numba"):
        raise ValueError(f"unknown kernel backend {name!r}; expected 'numpy' or 'numba'")
    if name == "numpy":
        return reference
    return _numba_backend() if _numba_ready else _NumbaOnFirstCall()


def use_backend(name):
    """Route every kernel call to backend `name` ("numpy" or "numba")."""
    global _current
    _current = _load_backend(name)


def backend():
    """The name of the backend the ops use now."""
    return "numpy" if _current is reference else "numba"


def prepare():
    """Make the chosen backend ready now, before anything is timed: for numba, the float32
    kernels are compiled in child processes if Numba's cache lacks them (compile_once.py),
    which the first kernel call would otherwise do.  The training loops call it."""
    global _current
    if isinstance(_current, _NumbaOnFirstCall):
        _current = _numba_backend()


def prepare_attention(dtype):
    """For numba, the fused attention kernels for dtype compiled (the first time, for float32
    17 s alone and about 25 s while child processes compile the other kernels, if they have
    to; said on stderr) or loaded from Numba's cache now, not inside the first training step.  A
    training loop that uses the fused op calls it before its clock starts."""
    global _current
    import sys
    import time
    import numba
    import numpy as np
    if _current is reference or numba.config.DISABLE_JIT:
        return
    from autograd.kernels import attention, compile_once, jit
    dtype = np.dtype(dtype)
    marker = compile_once._marker(jit, f"{dtype.name}-attention")

    def compile_attention():
        compiling = dtype.type not in attention._kernels and not os.path.exists(marker)
        if compiling:
            print(f"autograd: compiling the fused attention kernels for {dtype.name}, once (about 20-25 s; "
                  "later runs load them from Numba's cache)", file=sys.stderr, flush=True)
        started = time.perf_counter()
        attention._kernels_for(dtype.type)
        if compiling:
            print(f"autograd: the fused attention kernels for {dtype.name} compiled in "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
        if os.access(os.path.dirname(marker), os.W_OK):
            with open(marker, "w") as done:
                done.write("the fused attention kernels are in Numba's cache\n")

    if isinstance(_current, _NumbaOnFirstCall):
        _current = _numba_backend(meanwhile=compile_attention)
    compile_attention()                  # made already if it ran meanwhile: then only looked up


def warmup():
    """Compile (or load from Numba's cache) every Numba kernel now rather than on first use."""
    _numba_backend().warmup()


# ----- the kernels: each forwards to the chosen backend (step in to reach its code) -----

def matmul(a, b, out=None):
    """a @ b for (..., M, K) and (..., K, N) arrays, batch dims broadcast; written into
    `out` (any layout) if given, else into a new array."""
    return _current.matmul(a, b, out)


def softmax(x):
    """Softmax over the last axis."""
    return _current.softmax(x)


def softmax_backward(y, dy):
    """dx = y * (dy - sum(dy * y)) over the last axis, from the softmax output y."""
    return _current.softmax_backward(y, dy)


def log_softmax(x):
    """x - logsumexp(x) over the last axis."""
    return _current.log_softmax(x)


def log_softmax_backward(y, dy):
    """dx = dy - exp(y) * sum(dy) over the last axis, from the log-softmax output y."""
    return _current.log_softmax_backward(y, dy)


def layer_norm(x, weight, bias, eps):
    """Normalise the last axis, scale and shift; returns (out, xhat, rstd)."""
    return _current.layer_norm(x, weight, bias, eps)


def layer_norm_backward(grad, xhat, rstd, weight):
    """Gradients of layer_norm for (x, weight, bias)."""
    return _current.layer_norm_backward(grad, xhat, rstd, weight)


def gelu(x, approximate):
    """GELU, exact (erf) or approximate="tanh"."""
    return _current.gelu(x, approximate)


def gelu_backward(x, grad, approximate):
    """grad * GELU'(x)."""
    return _current.gelu_backward(x, grad, approximate)


def adam_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    """One Adam (or AdamW, decoupled=True) update of p, m and v in place."""
    return _current.adam_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, step)


def sum_of_squares(x):
    """See reference.sum_of_squares."""
    return _current.sum_of_squares(x)


def index_add_rows(out, ids, rows):
    """out[ids[i]] += rows[i] in place, a repeated id accumulating (a row lookup's gradient)."""
    return _current.index_add_rows(out, ids, rows)


def relu(x):
    """max(x, 0) elementwise; NaN stays NaN."""
    return _current.relu(x)


def relu_backward(out, grad):
    """grad where relu's output is > 0, else 0."""
    return _current.relu_backward(out, grad)


def masked_fill(x, mask, value):
    """value where the boolean mask (broadcast to x's shape) is True, else x."""
    return _current.masked_fill(x, mask, value)


def attention_forward(q, k, v, mask, scale):
    """Fused softmax(q k^T scale, masked) v for (N, T, d) arrays and a mask (..., T_q, T_k)
    whose leading dims hold the N matrices; returns (out, row log-sum-exp)."""
    return _current.attention_forward(q, k, v, mask, scale)


def attention_backward(q, k, v, mask, scale, out, lse, dout):
    """Gradients (dq, dk, dv) of attention_forward, recomputing the weights from lse."""
    return _current.attention_backward(q, k, v, mask, scale, out, lse, dout)


use_backend(os.environ.get("AUTOGRAD_KERNELS", "numba"))
