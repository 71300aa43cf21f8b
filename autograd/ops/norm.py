"""Normalization layers as one fused op each (one node instead of about ten): layer
normalization, computed by autograd.kernels.layer_norm / layer_norm_backward (Numba, with
numpy twins), and RMS normalization (numpy; its dx is the second region of the
layer_norm_backward exercise, LayerNorm's backward without the mean term)."""

import math

import numpy as np

from autograd import kernels
from autograd.function import Function


class LayerNormFn(Function):
    """Normalize over the last `n` dims, then scale and shift:

        mu = mean(x),  var = mean((x - mu)^2)   (biased, as in PyTorch)
        xhat = (x - mu) / sqrt(var + eps),      out = xhat * weight + bias   (bias optional)

    # BEGIN TWIN layer_norm_backward (dropped)
    Backward, with g = dL/dout and D the number of normalized elements:
        dL/dxhat = g * weight
        dL/dx    = (dL/dxhat - mean(dL/dxhat) - xhat * mean(dL/dxhat * xhat)) / sqrt(var + eps)
        dL/dweight = sum over rows of g * xhat,   dL/dbias = sum over rows of g
    # END TWIN
    """

    def forward(ctx, x, weight, bias=None, eps=1e-5):
        if x.shape[x.ndim - weight.ndim:] != weight.shape:
            raise ValueError(f"normalized shape {weight.shape} does not match the last dims of input {x.shape}")
        ctx.in_shape, ctx.w_shape = x.shape, weight.shape
        rows = x.reshape(-1, weight.size)                             # (N, D)
        shift = bias.reshape(-1) if bias is not None else np.zeros(weight.size, x.dtype)   # no bias: shift by 0
        out, xhat, rstd = kernels.layer_norm(rows, weight.reshape(-1), shift, eps)   # (N, D), (N, D), (N, 1)
        ctx.save_for_backward(xhat, rstd, weight.reshape(-1))
        return out.reshape(x.shape)

    def backward(ctx, grad):
        xhat, rstd, weight = ctx.saved_tensors
        dx, grad_w, grad_b = kernels.layer_norm_backward(grad.reshape(xhat.shape), xhat, rstd, weight)
        return dx.reshape(ctx.in_shape), grad_w.reshape(ctx.w_shape), grad_b.reshape(ctx.w_shape)   # a missing bias's gradient is dropped


class RMSNormFn(Function):
    """Root-mean-square normalization (Zhang & Sennrich, 2019; Llama's norm) over the last
    `n` dims, then a scale; no mean is subtracted and there is no shift:

        r = 1 / sqrt(mean(x^2) + eps),   xhat = x * r,   out = xhat * weight   (weight optional)

    # BEGIN TWIN layer_norm_backward (dropped)
    Backward, with g = dL/dout and D the number of normalized elements:
        dL/dxhat   = g * weight
        dL/dx      = r * (dL/dxhat - xhat * mean(dL/dxhat * xhat))
        dL/dweight = sum over rows of g * xhat
    (LayerNorm's backward without its "- mean(dL/dxhat)" term, since no mean was taken.)
    # END TWIN
    """

    def forward(ctx, x, weight=None, normalized_ndim=1, eps=1e-6):
        shape = x.shape[x.ndim - normalized_ndim:]
        if weight is not None and weight.shape != shape:
            raise ValueError(f"RMSNorm: weight shape {weight.shape} does not match the last dims of input {x.shape}")
        rows = x.reshape(-1, math.prod(shape))                                     # (N, D)
        mean_square = np.einsum("nd,nd->n", rows, rows)[:, None] / rows.shape[1]   # (N, 1)
        rstd = 1 / np.sqrt(mean_square + eps)                                      # (N, 1)
        xhat = rows * rstd                                                         # (N, D)
        ctx.in_shape = x.shape
        ctx.save_for_backward(xhat, rstd, weight)
        out = xhat if weight is None else xhat * weight.reshape(-1)
        return out.reshape(x.shape)

    def backward(ctx, grad):
        xhat, rstd, weight = ctx.saved_tensors
        grad = grad.reshape(xhat.shape)                                            # (N, D)
        grad_xhat = grad if weight is None else grad * weight.reshape(-1)
        # BEGIN EXERCISE layer_norm_backward
        projection = np.einsum("nd,nd->n", grad_xhat, xhat)[:, None] / xhat.shape[1]   # mean(dL/dxhat * xhat), (N, 1)
        dx = grad_xhat - xhat * projection
        dx *= rstd
        # END EXERCISE
        grad_w = None if weight is None else np.einsum("nd,nd->d", grad, xhat).reshape(weight.shape)
        return dx.reshape(ctx.in_shape), grad_w
