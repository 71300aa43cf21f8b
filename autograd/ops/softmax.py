"""Softmax, log-softmax and logsumexp along a dim, in numerically stable forms.

The row-wise work happens in `autograd.kernels` (Numba or numpy), along the last axis;
these ops move `dim` to the end and back (np.moveaxis: a view, no copy), the one place
where that happens.  `dim` arrives checked and non-negative (Tensor.softmax and friends
check it).  Fully masked rows (all -inf) give zeros and zero gradient, never NaN (see
`autograd/kernels/reference.py`).
"""

import numpy as np

from autograd import kernels
from autograd.kernels import reference
from autograd.function import Function


class Softmax(Function):
    """y_i = exp(x_i - max x) / sum_j exp(x_j - max x);  dx_i = y_i (dy_i - sum_j dy_j y_j)."""

    def forward(ctx, x, dim):
        y = kernels.softmax(np.moveaxis(x, dim, -1))          # (..., n): the rows along dim
        ctx.dim = dim
        ctx.save_for_backward(y)
        return np.moveaxis(y, -1, dim)

    def backward(ctx, grad):
        dx = kernels.softmax_backward(ctx.saved_tensors[0], np.moveaxis(grad, ctx.dim, -1))
        return np.moveaxis(dx, -1, ctx.dim)


class LogSoftmax(Function):
    """y_i = x_i - max x - log sum_j exp(x_j - max x);  dx_i = dy_i - exp(y_i) sum_j dy_j."""

    def forward(ctx, x, dim):
        y = kernels.log_softmax(np.moveaxis(x, dim, -1))      # (..., n): the rows along dim
        ctx.dim = dim
        ctx.save_for_backward(y)
        return np.moveaxis(y, -1, dim)

    def backward(ctx, grad):
        dx = kernels.log_softmax_backward(ctx.saved_tensors[0], np.moveaxis(grad, ctx.dim, -1))
        return np.moveaxis(dx, -1, ctx.dim)


class LogSumExp(Function):
    """out = max x + log sum_j exp(x_j - max x) = max x - max log_softmax(x);  dout/dx_i = softmax(x)_i.
    A fully masked row gives -inf (log 0) and zero gradient."""

    def forward(ctx, x, dim, keepdim=False):
        x_last = np.moveaxis(x, dim, -1)                                          # (..., n)
        out = reference.log_sum_exp(x_last, kernels.log_softmax)                  # (...): from log-softmax
        ctx.dim, ctx.keepdim = dim, keepdim
        ctx.save_for_backward(kernels.softmax(x_last))
        return np.expand_dims(out, dim) if keepdim else out

    def backward(ctx, grad):
        grad = np.squeeze(grad, ctx.dim) if ctx.keepdim else grad
        return np.moveaxis(ctx.saved_tensors[0] * grad[..., None], -1, ctx.dim)
