"""Matrix multiplication with numpy's rules (1-D operands, broadcast batch dims)."""

import numpy as np

from autograd import kernels
from autograd.function import Function


class MatMul(Function):
    """C = A @ B over the last two dims;  dA = dC @ B^T,  dB = A^T @ dC.

    A 1-D A is treated as a row (1, K) and a 1-D B as a column (K, 1); the added dim is
    removed from C.  Batch dims broadcast; where they were broadcast, the engine sums the
    gradient back over them (and a 2-D B folds A's batch into rows to skip that sum).
    """

    def forward(ctx, a, b):
        if a.ndim == 0 or b.ndim == 0:
            raise ValueError(f"both operands need at least 1 dim, got shapes {a.shape} and {b.shape}")
        if a.shape[-1] != b.shape[-2 if b.ndim > 1 else 0]:
            raise ValueError(
                f"inner dimensions differ: {a.shape} @ {b.shape}: the last dim of A "
                f"({a.shape[-1]}) must equal the {'second-to-last' if b.ndim > 1 else 'only'} "
                f"dim of B ({b.shape[-2 if b.ndim > 1 else 0]})")
        ctx.a_vector, ctx.b_vector = a.ndim == 1, b.ndim == 1
        a2 = a[None, :] if ctx.a_vector else a     # (..., M, K)
        b2 = b[:, None] if ctx.b_vector else b     # (..., K, N)
        ctx.save_for_backward(a2, b2)
        out = kernels.matmul(a2, b2)               # (..., M, N)
        if ctx.a_vector:
            out = out[..., 0, :]
        if ctx.b_vector:
            out = out[..., 0]
        return out

    def backward(ctx, grad):
        a2, b2 = ctx.saved_tensors
        if ctx.b_vector:
            grad = grad[..., None]
        if ctx.a_vector:
            grad = grad[..., None, :]              # grad: (..., M, N)
        # BEGIN EXERCISE matmul_backward
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = kernels.matmul(grad, np.swapaxes(b2, -1, -2), like=a2)      # (..., M, K)
            if ctx.a_vector:
                grad_a = grad_a[..., 0, :]
        if ctx.needs_input_grad[1]:
            if b2.ndim == 2 and grad.ndim > 2:     # fold A's batch dims into rows
                k, n = b2.shape
                grad_b = kernels.matmul(a2.reshape(-1, k).T, grad.reshape(-1, n))   # (K, N)
            else:
                grad_b = kernels.matmul(np.swapaxes(a2, -1, -2), grad, like=b2)  # (..., K, N)
            if ctx.b_vector:
                grad_b = grad_b[..., 0]
        # END EXERCISE
        return grad_a, grad_b

