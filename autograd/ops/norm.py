"""Layer normalization as one fused op (one node instead of about ten)."""

import numpy as np

from autograd.function import Function


class LayerNorm(Function):
    """Normalize over the last `n` dims, then scale and shift:

        mu = mean(x),  var = mean((x - mu)^2)   (biased, as in PyTorch)
        xhat = (x - mu) / sqrt(var + eps),      out = xhat * weight + bias

    Backward, with g = dL/dout and D the number of normalized elements:
        dL/dxhat = g * weight
        dL/dx    = (dL/dxhat - mean(dL/dxhat) - xhat * mean(dL/dxhat * xhat)) / sqrt(var + eps)
        dL/dweight = sum over rows of g * xhat,   dL/dbias = sum over rows of g
    """

    def forward(ctx, x, weight, bias, eps=1e-5):
        if x.shape[x.ndim - weight.ndim:] != weight.shape:
            raise ValueError(f"normalized shape {weight.shape} does not match the last dims of input {x.shape}")
        ctx.in_shape = x.shape
        rows = x.reshape(-1, weight.size)                             # (N, D)
        mu = rows.mean(axis=1, keepdims=True)
        centered = rows - mu
        rstd = 1.0 / np.sqrt((centered * centered).mean(axis=1, keepdims=True) + eps)
        xhat = centered * rstd                                        # (N, D)
        ctx.save_for_backward(xhat, rstd, weight.reshape(-1))
        return (xhat * weight.reshape(-1) + bias.reshape(-1)).reshape(x.shape)

    def backward(ctx, grad):
        xhat, rstd, weight = ctx.saved_tensors
        g = grad.reshape(xhat.shape)                                  # (N, D)
        dxhat = g * weight
        dx = rstd * (dxhat - dxhat.mean(axis=1, keepdims=True)
                     - xhat * (dxhat * xhat).mean(axis=1, keepdims=True))
        w_shape = ctx.in_shape[len(ctx.in_shape) - ctx.inputs[1].ndim:]
        grad_w = (g * xhat).sum(axis=0).reshape(w_shape) if ctx.needs_input_grad[1] else None
        grad_b = g.sum(axis=0).reshape(w_shape) if ctx.needs_input_grad[2] else None
        return dx.reshape(ctx.in_shape), grad_w, grad_b
