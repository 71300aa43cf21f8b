"""Rotary position embedding (RoPE) as one op: each pair of dimensions turned by an angle."""

from autograd import kernels
from autograd.function import Function


class RotaryEmbeddingFn(Function):
    """out = R x: every pair of dimensions (a, b) of x (..., T, d) rotated by its angle,
    given as cos and sin arrays broadcastable to (..., T, d/2):

        out_a = a cos - b sin,    out_b = a sin + b cos

    A rotation is orthogonal, so its gradient is the rotation back, by minus the angle:
        dL/dx = R^T g:   dL/da = g_a cos + g_b sin,   dL/db = -g_a sin + g_b cos
    pairing: "half" pairs (i, i + d/2), "interleaved" pairs (2i, 2i + 1).  One node in
    place of the ten or so (slices, products, a concatenation) of writing it with ops."""

    def forward(ctx, x, cos=None, sin=None, pairing="half"):
        if x.shape[-1] % 2:
            raise ValueError(f"rotary embedding: the last dim must be even to form pairs, got {x.shape}")
        ctx.cos, ctx.sin, ctx.pairing = cos, sin, pairing
        return kernels.rotate_pairs(x, cos, sin, pairing)              # (reference.py has the math)

    def backward(ctx, grad):
        return kernels.rotate_pairs(grad, ctx.cos, -ctx.sin, ctx.pairing)
