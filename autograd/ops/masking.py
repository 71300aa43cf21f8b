"""Ops that choose between values by a boolean condition."""

import numpy as np

from autograd import kernels
from autograd.function import Function


def _check_bool(mask, op):
    if mask.dtype != np.bool_:
        raise TypeError(f"{op}: the mask/condition must be boolean, got dtype {mask.dtype}")


class MaskedFill(Function):
    """out = value where mask else a;  dout/da = 0 where filled, 1 elsewhere.
    The mask must broadcast to a's shape (it cannot make the result larger)."""

    def forward(ctx, a, mask, value):
        mask = np.asarray(mask)
        _check_bool(mask, "masked_fill")
        if np.broadcast_shapes(a.shape, mask.shape) != a.shape:
            raise ValueError(f"mask of shape {mask.shape} does not broadcast to the tensor's shape {a.shape}")
        ctx.save_for_backward(mask)
        return kernels.masked_fill(a, mask, value)

    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return kernels.masked_fill(grad, mask, 0)


class Where(Function):
    """out = a where condition else b;  the gradient goes to a where condition holds and
    to b elsewhere."""

    def forward(ctx, a, b, condition):
        condition = np.asarray(condition)
        _check_bool(condition, "where")
        ctx.save_for_backward(condition)
        return np.where(condition, a, b)

    def backward(ctx, grad):
        (condition,) = ctx.saved_tensors
        return (np.where(condition, grad, 0) if ctx.needs_input_grad[0] else None,
                np.where(condition, 0, grad) if ctx.needs_input_grad[1] else None)
