"""The engine room: the fast tier of the kernels (see README.md beside this file).

The classroom never imports this package by name: `autograd.kernels` routes every kernel
call here when the fast tier is chosen (the default), and calls `ready()` before the first
one and `prepare()` when a training loop asks for it.  Each kernel has the name, signature
and meaning of its numpy definition in autograd/kernels/reference.py.
"""

import os
import sys
import time

from autograd.engine_room import compile_once
from autograd.engine_room.allocator import keep_freed_memory
from autograd.engine_room.attention import attention_backward, attention_forward
from autograd.engine_room.elementwise import gelu, gelu_backward, masked_fill, relu, relu_backward
from autograd.engine_room.normalization import layer_norm, layer_norm_backward
from autograd.engine_room.products import matmul
from autograd.engine_room.optimizer import adam_step, sum_of_squares
from autograd.engine_room.rowwise import log_softmax, log_softmax_backward, softmax, softmax_backward
from autograd.engine_room.scatter import index_add_rows

__all__ = ["ready", "prepare", "adam_step", "attention_backward", "attention_forward", "gelu", "gelu_backward",
           "index_add_rows", "layer_norm", "layer_norm_backward", "log_softmax", "log_softmax_backward",
           "masked_fill", "matmul", "relu", "relu_backward", "softmax", "softmax_backward", "sum_of_squares"]


_ready = False


def ready(meanwhile=None):
    """Before this process runs its first kernel: the float32 kernels compiled in child
    processes if Numba's cache lacks them, so that this process runs them as loaded from the
    cache, as every later run will (compile_once.py says why).  meanwhile: a function run
    here while the children compile (only the first time)."""
    global _ready
    if not _ready:
        compile_once.compile_in_a_child_if_needed("float32", meanwhile=meanwhile)
        _ready = True


def prepare(dtype, fused_attention):
    """What a training loop asks for before its clock starts: freed memory kept for the next
    step (allocator.py), the kernels ready (ready()), and, for a model with fused
    attention, its kernels for dtype compiled or loaded now rather than inside the first step."""
    keep_freed_memory()
    if fused_attention:
        ready(meanwhile=lambda: _compile_attention(dtype))
        _compile_attention(dtype)          # compiled meanwhile already: then only looked up
    else:
        ready()


def _compile_attention(dtype):
    """The fused attention kernels for dtype, compiled (saying so on stderr) or loaded."""
    import numba
    import numpy as np
    from autograd.engine_room import attention
    if numba.config.DISABLE_JIT:
        return
    dtype = np.dtype(dtype)
    done = compile_once.marker(f"{dtype.name}-attention")
    compiling = dtype.type not in attention._kernels and not os.path.exists(done)
    if compiling:
        print(f"autograd: compiling the fused attention kernels for {dtype.name}, once (later runs load them "
              "from Numba's cache)", file=sys.stderr, flush=True)
    started = time.perf_counter()
    attention._kernels_for(dtype.type)
    if compiling:
        print(f"autograd: the fused attention kernels for {dtype.name} compiled in "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    if os.access(os.path.dirname(done), os.W_OK):
        with open(done, "w") as marker_file:
            marker_file.write("the fused attention kernels are in Numba's cache\n")
