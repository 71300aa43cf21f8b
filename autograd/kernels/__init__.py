"""The kernels: the few array functions the ops spend their time in, in three tiers behind one switch.

    tier     where                          what it is
    numpy    kernels/reference.py           each kernel's definition, in numpy
    loops    kernels/loops.py               matmul, softmax, log-softmax and their backwards as
                                            plain Numba loops, the code a learner steps into
    fast     autograd/engine_room/          the speed engine (its README); the default

Ops call `kernels.matmul`, `kernels.softmax`, ... below, and each call goes to the chosen
tier.  Every tier offers the same kernel names and signatures; a tier that does not write a
kernel runs its numpy definition.  Choose with the environment variable
AUTOGRAD_KERNELS=numpy|loops|fast before import, or `use_tier(name)` at run time.
NUMBA_DISABLE_JIT=1 on its own chooses "loops": turning the JIT off means stepping into
loops one can read.
"""

import importlib.util
import os
import sys
import types

from autograd.kernels import reference

TIERS = ("numpy", "loops", "fast")
KERNELS = ("matmul", "softmax", "softmax_backward", "log_softmax", "log_softmax_backward", "layer_norm",
           "layer_norm_backward", "gelu", "gelu_backward", "relu", "relu_backward", "masked_fill", "index_add_rows",
           "adam_step", "sum_of_squares", "attention_forward", "attention_backward")

_tier = None         # the chosen tier's name
_current = None      # where every kernel call below goes: a namespace of the tier's kernels


def _namespace(module):
    """The tier's kernels: the module's own, the numpy definition for any it does not write."""
    return types.SimpleNamespace(**{name: getattr(module, name, getattr(reference, name)) for name in KERNELS})


def _load(name):
    """The kernels of tier `name`, ready to call."""
    if name == "numpy":
        return reference
    if name == "loops":
        from autograd.kernels import loops
        return _namespace(loops)
    from autograd import engine_room
    engine_room.ready()
    return _namespace(engine_room)


class _LoadedOnFirstCall:
    """Stands for the chosen tier until the first kernel call, which loads it: importing
    autograd (as the scalar engine's demos do) compiles nothing."""

    def __getattr__(self, kernel):
        global _current
        _current = _load(_tier)
        return getattr(_current, kernel)


def use_tier(name):
    """Send every kernel call to tier `name`: "numpy", "loops" or "fast"."""
    global _tier, _current
    if name not in TIERS:
        raise ValueError(f"unknown kernel tier {name!r}; expected one of {', '.join(TIERS)}")
    _tier, _current = name, _LoadedOnFirstCall()


def tier():
    """The name of the tier the ops use now."""
    return _tier


def prepare(dtype="float32", fused_attention=False):
    """Make the chosen tier ready before a training loop starts its clock, so that no step
    pays for compiling: the one hook a training loop calls.  The fast tier compiles its
    kernels here the first time (saying so), and for a model with fused attention those
    kernels too; it also keeps freed memory for the next step (engine_room/allocator.py)."""
    global _current
    if _tier == "fast":
        from autograd import engine_room
        engine_room.prepare(dtype, fused_attention)
    if isinstance(_current, _LoadedOnFirstCall):
        _current = _load(_tier)


def prepare_in_background(dtype="float32", fused_attention=False):
    """Start what prepare() does first, without waiting for it: the fast tier starts
    compiling the kernels (in child processes) if this is their first run, and prepare()
    later waits for them.  A demo calls this before it reads its data, so the two overlap."""
    if _tier == "fast":
        from autograd import engine_room
        engine_room.start(dtype, fused_attention)


def _default_tier():
    if "AUTOGRAD_KERNELS" in os.environ:
        return os.environ["AUTOGRAD_KERNELS"]
    if os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return "loops"
    if importlib.util.find_spec("autograd.engine_room") is None:     # the engine room deleted: the loops, slower
        print("autograd/engine_room/ is absent: the kernels run on the loops tier", file=sys.stderr)
        return "loops"
    return "fast"


# ----- the kernels: each forwards to the chosen tier (step in to reach its code) -----

def matmul(a, b, like=None):
    """a @ b for (..., M, K) and (..., K, N) arrays, batch dims broadcast.  like: the operand
    whose gradient this product is, if it is one (a tier may lay the result out as it is)."""
    return _current.matmul(a, b, like)


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


def relu(x):
    """max(x, 0) elementwise; NaN stays NaN."""
    return _current.relu(x)


def relu_backward(out, grad):
    """grad where relu's output is > 0, else 0."""
    return _current.relu_backward(out, grad)


def masked_fill(x, mask, value):
    """value where the boolean mask (broadcast to x's shape) is True, else x."""
    return _current.masked_fill(x, mask, value)


def index_add_rows(out, ids, rows):
    """out[ids[i]] += rows[i] in place, a repeated id accumulating (a row lookup's gradient)."""
    return _current.index_add_rows(out, ids, rows)


def adam_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    """One Adam (or AdamW, decoupled=True) update of p, m and v in place."""
    return _current.adam_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, step)


def sum_of_squares(x):
    """The sum of x's squares in float64 (a gradient norm's square)."""
    return _current.sum_of_squares(x)


def attention_forward(q, k, v, mask, scale):
    """Fused softmax(q k^T scale, masked) v for (N, T, d) arrays and a mask (..., T_q, T_k)
    whose leading dims hold the N matrices; returns (out, row log-sum-exp)."""
    return _current.attention_forward(q, k, v, mask, scale)


def attention_backward(q, k, v, mask, scale, out, lse, dout):
    """Gradients (dq, dk, dv) of attention_forward, recomputing the weights from lse."""
    return _current.attention_backward(q, k, v, mask, scale, out, lse, dout)


use_tier(_default_tier())
