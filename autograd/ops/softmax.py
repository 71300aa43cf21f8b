"""Softmax, log-softmax and logsumexp along a dim, in numerically stable forms.

The row-wise work happens in `autograd.kernels` (Numba or numpy), along the last axis;
these ops move `dim` to the end and back.  Fully masked rows (all -inf) give zeros and
zero gradient, never NaN (see `autograd/kernels/reference.py`).
"""

import numpy as np

from autograd import kernels
from autograd.function import Function, normalize_dim


def _to_last(x, dim):
    return x if dim == x.ndim - 1 else np.moveaxis(x, dim, -1)


def _from_last(x, dim):
    return x if dim == x.ndim - 1 else np.moveaxis(x, -1, dim)


class Softmax(Function):
    """y_i = exp(x_i - max x) / sum_j exp(x_j - max x);  dx_i = y_i (dy_i - sum_j dy_j y_j)."""

    def forward(ctx, x, dim):
        ctx.dim = normalize_dim(dim, x.ndim, "softmax")
        y = kernels.softmax(_to_last(x, ctx.dim))
        ctx.save_for_backward(y)
        return _from_last(y, ctx.dim)

    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return _from_last(kernels.softmax_backward(y, _to_last(grad, ctx.dim)), ctx.dim)


class LogSoftmax(Function):
    """y_i = x_i - max x - log sum_j exp(x_j - max x);  dx_i = dy_i - exp(y_i) sum_j dy_j."""

    def forward(ctx, x, dim):
        ctx.dim = normalize_dim(dim, x.ndim, "log_softmax")
        y = kernels.log_softmax(_to_last(x, ctx.dim))
        ctx.save_for_backward(y)
        return _from_last(y, ctx.dim)

    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return _from_last(kernels.log_softmax_backward(y, _to_last(grad, ctx.dim)), ctx.dim)


class LogSumExp(Function):
    """out = max x + log sum_j exp(x_j - max x);  dout/dx_i = softmax(x)_i.
    A fully masked row gives -inf (log 0) and zero gradient."""

    def forward(ctx, x, dim, keepdim=False):
        ctx.dim = normalize_dim(dim, x.ndim, "logsumexp")
        ctx.keepdim = keepdim
        x_last = _to_last(x, ctx.dim)
        m = np.max(x_last, axis=-1, keepdims=True)
        m[m == -np.inf] = 0
        with np.errstate(divide="ignore"):
            out = m + np.log(np.exp(x_last - m).sum(axis=-1, keepdims=True))   # (..., 1)
        ctx.save_for_backward(kernels.softmax(x_last))
        out = out[..., 0]
        return np.expand_dims(out, ctx.dim) if keepdim else out

    def backward(ctx, grad):
        (p,) = ctx.saved_tensors
        grad = grad if not ctx.keepdim else np.squeeze(grad, ctx.dim)
        return _from_last(p * grad[..., None], ctx.dim)
