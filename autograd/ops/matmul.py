"""Matrix multiplication with numpy's rules (1-D operands, broadcast batch dims)."""

import numpy as np

from autograd import kernels
from autograd.function import Function


class MatMul(Function):
    """C = A @ B over the last two dims;  dA = dC @ B^T,  dB = A^T @ dC.

    A 1-D A is treated as a row (1, K) and a 1-D B as a column (K, 1); the added dim is
    removed from C.  Batch dims broadcast (the kernel broadcasts them); where they were
    broadcast, the engine sums the gradient back over them (and a 2-D B folds A's batch
    into rows to skip that sum).
    """

    def forward(ctx, a, b):
        if a.ndim == 0 or b.ndim == 0 or a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
            raise ValueError(shape_mismatch(a.shape, b.shape))
        a2, b2 = a[None, :] if a.ndim == 1 else a, b[:, None] if b.ndim == 1 else b     # (..., M, K), (..., K, N)
        out = kernels.matmul(a2, b2)                                                    # (..., M, N)
        ctx.a_vector, ctx.b_vector, ctx.matrix_shape = a.ndim == 1, b.ndim == 1, out.shape
        ctx.save_for_backward(a2, b2)
        if ctx.a_vector:
            out = out[..., 0, :]
        if ctx.b_vector:
            out = out[..., 0]
        return out

    def backward(ctx, grad):
        a2, b2 = ctx.saved_tensors
        grad = grad.reshape(ctx.matrix_shape)      # (..., M, N): a vector operand's dim back
        # BEGIN EXERCISE matmul_backward
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = kernels.matmul_grad(grad, np.swapaxes(b2, -1, -2), a2)   # (..., M, K): a gradient of a2
            if ctx.a_vector:
                grad_a = grad_a[..., 0, :]
        if ctx.needs_input_grad[1]:
            if b2.ndim == 2 and grad.ndim > 2:     # fold A's batch dims into rows
                k, n = b2.shape
                grad_b = kernels.matmul(a2.reshape(-1, k).T, grad.reshape(-1, n))   # (K, N)
            else:
                grad_b = kernels.matmul_grad(np.swapaxes(a2, -1, -2), grad, b2)   # (..., K, N): a gradient of b2
            if ctx.b_vector:
                grad_b = grad_b[..., 0]
        # END EXERCISE
        return grad_a, grad_b


def shape_mismatch(a_shape, b_shape):
    """The error message for operands that cannot be multiplied: which rule they break."""
    if not a_shape or not b_shape:
        return f"both operands need at least 1 dim, got shapes {a_shape} and {b_shape}"
    inner = "second-to-last" if len(b_shape) > 1 else "only"
    return (f"inner dimensions differ: {a_shape} @ {b_shape}: the last dim of A ({a_shape[-1]}) must equal "
            f"the {inner} dim of B ({b_shape[-2 if len(b_shape) > 1 else 0]})")
