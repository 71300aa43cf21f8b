"""The hot kernels of the tensor engine (and the Adam update of nn.optim), behind one switch.

Ops call `kernels.matmul`, `kernels.softmax`, ... and this module forwards the call to
the chosen backend: "numba" (JIT-compiled, `autograd/kernels/jit.py`) or "numpy" (the
plain reference twins, `autograd/kernels/reference.py`).  Choose with the environment
variable AUTOGRAD_KERNELS=numpy|numba before import (numba is the default), or
`use_backend(name)` at run time.
"""

import os

from autograd.kernels import reference

KERNEL_NAMES = ("matmul", "softmax", "softmax_backward", "log_softmax", "log_softmax_backward",
                "layer_norm", "layer_norm_backward", "gelu", "gelu_backward", "adam_step")
_backends = {"numpy": reference}
_current = None


def _load_backend(name):
    if name not in ("numpy", "numba"):
        raise ValueError(f"unknown kernel backend {name!r}; expected 'numpy' or 'numba'")
    if name not in _backends:
        from autograd.kernels import jit
        _backends["numba"] = jit
    return _backends[name]


def use_backend(name):
    """Route every kernel call to backend `name` ("numpy" or "numba")."""
    global _current
    module = _load_backend(name)
    _current = name
    for kernel in KERNEL_NAMES:
        globals()[kernel] = getattr(module, kernel)


def backend():
    """The name of the backend the ops use now."""
    return _current


def warmup():
    """Compile (or load from Numba's cache) every Numba kernel now rather than on first use."""
    _load_backend("numba").warmup()


use_backend(os.environ.get("AUTOGRAD_KERNELS", "numba"))
