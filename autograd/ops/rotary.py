"""Rotary position embedding (RoPE) as one op: each pair of dimensions turned by an angle."""

import numpy as np

from autograd.function import Function


def _pair_views(x, pairing):
    """The two halves of every pair of x's last dim: (x[..., i], x[..., i + d/2]) for
    pairing "half", (x[..., 2i], x[..., 2i + 1]) for "interleaved"; views, not copies."""
    if pairing == "half":
        half = x.shape[-1] // 2
        return x[..., :half], x[..., half:]
    return x[..., 0::2], x[..., 1::2]


def in_pairs(first, second, pairing):
    """A (..., d) array holding `first` (..., d/2) at each pair's first place and `second`
    at its second: (first, second) side by side for "half", interleaved for "interleaved"."""
    both = np.empty(first.shape[:-1] + (2 * first.shape[-1],), first.dtype)
    both_a, both_b = _pair_views(both, pairing)
    both_a[...], both_b[...] = first, second
    return both


def rotate_pairs(x, cos, sin, pairing):
    """Each pair (a, b) of x's last dim turned: (a cos - b sin, a sin + b cos), computed as

        x * (cos, cos)  +  (b, a) * (-sin, sin)

    with the angles' arrays laid out as x's pairs (in_pairs): whole rows of x at a time
    rather than half rows, which takes half the time of the formula's four half-row products
    and gives the same numbers (a cos + b (-sin) is a cos - b sin, bit for bit)."""
    out = x * in_pairs(cos, cos, pairing)                                  # (a cos, b cos)
    swapped = np.empty_like(x)
    a, b = _pair_views(x, pairing)
    swapped_a, swapped_b = _pair_views(swapped, pairing)
    swapped_a[...], swapped_b[...] = b, a                                  # (b, a)
    swapped *= in_pairs(-sin, sin, pairing)                                # (-b sin, a sin)
    out += swapped
    return out


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
        return rotate_pairs(x, cos, sin, pairing)

    def backward(ctx, grad):
        return rotate_pairs(grad, ctx.cos, -ctx.sin, ctx.pairing)
