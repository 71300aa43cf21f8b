"""Reductions over one, several or all dims."""

import math

import numpy as np

from autograd.function import Function, normalize_dims


def _kept_shape(shape, dims):
    """The shape with every reduced dim set to 1 (what keepdim=True gives)."""
    return tuple(1 if d in dims else n for d, n in enumerate(shape))


def _spread(grad, shape):
    """grad (in the kept shape) copied over `shape`: every summed element gets it."""
    return np.broadcast_to(grad, shape).copy()


class Sum(Function):
    """out = sum of a over `dim`;  dout/da = 1 for every summed element, so the
    gradient is grad copied (broadcast) back over the summed dims."""

    def forward(ctx, a, dim=None, keepdim=False):
        ctx.dims = normalize_dims(dim, a.ndim, "sum")
        ctx.in_shape, ctx.kept_shape = a.shape, _kept_shape(a.shape, ctx.dims)
        return np.sum(a, axis=ctx.dims, keepdims=keepdim)

    def backward(ctx, grad):
        return _spread(grad.reshape(ctx.kept_shape), ctx.in_shape)


class Mean(Function):
    """out = sum(a) / n over `dim`;  dout/da = 1/n."""

    def forward(ctx, a, dim=None, keepdim=False):
        ctx.dims = normalize_dims(dim, a.ndim, "mean")
        ctx.in_shape, ctx.kept_shape = a.shape, _kept_shape(a.shape, ctx.dims)
        ctx.count = math.prod(a.shape[d] for d in ctx.dims)
        return np.mean(a, axis=ctx.dims, keepdims=keepdim)

    def backward(ctx, grad):
        return _spread(grad.reshape(ctx.kept_shape) / ctx.count, ctx.in_shape)


class Max(Function):
    """out = max of a over `dim`;  the gradient goes to the maximal elements, split evenly
    when several are tied (PyTorch's `amax` rule)."""

    def forward(ctx, a, dim=None, keepdim=False):
        ctx.dims = normalize_dims(dim, a.ndim, "max")
        if a.size == 0:
            raise ValueError("max of an empty tensor is undefined")
        out = np.max(a, axis=ctx.dims, keepdims=True)
        ctx.save_for_backward(a == out)
        return out if keepdim else np.squeeze(out, axis=ctx.dims)

    def backward(ctx, grad):
        (is_max,) = ctx.saved_tensors
        grad = grad.reshape(_kept_shape(is_max.shape, ctx.dims))
        return grad * is_max / is_max.sum(axis=ctx.dims, keepdims=True)
