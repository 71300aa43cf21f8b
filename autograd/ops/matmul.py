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
        grad_a = grad_b = None
        if ctx.needs_input_grad[0]:
            grad_a = _product_laid_out_as(a2, grad, np.swapaxes(b2, -1, -2))   # (..., M, K)
            if ctx.a_vector:
                grad_a = grad_a[..., 0, :]
        if ctx.needs_input_grad[1]:
            if b2.ndim == 2 and grad.ndim > 2:     # fold A's batch dims into rows
                k, n = b2.shape
                grad_b = kernels.matmul(a2.reshape(-1, k).T, grad.reshape(-1, n))   # (K, N)
            else:
                grad_b = _product_laid_out_as(b2, np.swapaxes(a2, -1, -2), grad)   # (..., K, N)
            if ctx.b_vector:
                grad_b = grad_b[..., 0]
        return grad_a, grad_b


def _product_laid_out_as(operand, left, right):
    """left @ right, the gradient of `operand`, laid out in memory as the operand is, so
    that the nodes that made the operand (transposes, reshapes) hand it back without a copy.

    - A transposed view (columns contiguous: attention's k^T) gets (right^T @ left^T)^T, a
      transposed view of a product laid out as the operand's transpose.  Computed directly
      it would also be a product as narrow as the keys are few (attention's q^T @ dS is
      d_head x T_k): 10 columns at the smallest size, under one register tile, ran at half
      numpy's speed.
    - A batch of matrices whose rows are contiguous but which is not one contiguous array
      (a head of (B, T, H, d) seen as (B, H, T, d): attention's q and v) gets its gradient
      written in the operand's order of dims, (B, T, H, d) seen as (B, H, T, d): then the
      head split's Transpose and Reshape give back a contiguous (B, T, d_model) without
      copying it.
    Each entry is the same sum in the same order whatever the layout."""
    if operand.ndim > 2 and operand.strides[-2] == operand.itemsize != operand.strides[-1]:
        return np.swapaxes(_product_laid_out_as(np.swapaxes(operand, -1, -2), np.swapaxes(right, -1, -2),
                                                np.swapaxes(left, -1, -2)), -1, -2)
    if operand.ndim > 2 and operand.strides[-1] == operand.itemsize and not operand.flags.c_contiguous \
            and 0 not in operand.strides and left.shape[:-2] == right.shape[:-2] == operand.shape[:-2]:
        return kernels.matmul(left, right, out=np.empty_like(operand, order="K"))
    return kernels.matmul(left, right)
