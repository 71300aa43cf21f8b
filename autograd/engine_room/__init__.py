"""The engine room: the fast tier of the kernels (see README.md beside this file).

The classroom never imports this package by name: `autograd.kernels` binds each kernel
name to this package's function when the fast tier is chosen (the default), and calls
`ready()` before the first kernel runs and `prepare()` when a training loop asks for it.  Each kernel has the name, signature
and meaning of its numpy definition in autograd/kernels/reference.py.
"""

import numba
import numpy as np

from autograd.engine_room import attention, compile_once
from autograd.engine_room.allocator import keep_freed_memory
from autograd.engine_room.attention import attention_backward, attention_forward
from autograd.engine_room.elementwise import gelu, gelu_backward, masked_fill, relu, relu_backward
from autograd.engine_room.normalization import layer_norm, layer_norm_backward
from autograd.engine_room.products import matmul
from autograd.engine_room.optimizer import adam_step, sum_of_squares
from autograd.engine_room.rotary import rotate_pairs
from autograd.engine_room.rowwise import log_softmax, log_softmax_backward, softmax, softmax_backward
from autograd.engine_room.scatter import index_add_rows

__all__ = ["start", "ready", "prepare", "adam_step", "attention_backward", "attention_forward", "gelu", "gelu_backward",
           "index_add_rows", "layer_norm", "layer_norm_backward", "log_softmax", "log_softmax_backward",
           "masked_fill", "matmul", "matmul_grad", "relu", "relu_backward", "rotate_pairs", "softmax", "softmax_backward",
           "sum_of_squares"]


def matmul_grad(a, b, operand):
    """a @ b as the gradient of `operand` (reference.matmul_grad), laid out in memory as
    operand is (products.matmul's like=)."""
    return matmul(a, b, like=operand)


def start(dtype="float32", fused_attention=False):
    """Start compiling, in child processes, what prepare(dtype, fused_attention) will need,
    if Numba's cache lacks it, without waiting for it: a demo calls this before it reads its
    data, so that the two overlap."""
    compile_once.start(np.dtype(dtype).name, fused_attention)


def ready():
    """Before this process runs its first kernel: the float32 kernels compiled in child
    processes if Numba's cache lacks them, so that this process runs them as loaded from the
    cache, as every later run will (compile_once.py says why)."""
    compile_once.wait("float32")


def prepare(dtype, fused_attention):
    """What a training loop asks for before its clock starts: freed memory kept for the next
    step (allocator.py), the kernels ready (ready()), and, for a model with fused
    attention, its kernels for dtype loaded now rather than inside the first step."""
    keep_freed_memory()
    start(dtype, fused_attention)
    ready()
    compile_once.wait(np.dtype(dtype).name, fused_attention)
    if fused_attention and not numba.config.DISABLE_JIT:
        attention._kernels_for(np.dtype(dtype).type)
