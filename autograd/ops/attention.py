"""Fused scaled dot-product attention: one op for softmax(q k^T * scale, masked) v."""

import numpy as np

from autograd import kernels
from autograd.function import Function


class ScaledDotProductAttention(Function):
    """out = softmax(q k^T * scale, where mask) v, with q (..., T_q, d), k (..., T_k, d),
    v (..., T_k, d_v) and a boolean mask (True = may attend) broadcastable to (..., T_q, T_k).

    The composed form (matmul, masked_fill, softmax, matmul: transformer/attention.py) makes
    four nodes and keeps the (..., T_q, T_k) weights for backward; this one node streams over
    the keys with an online softmax and keeps only the output and each row's log-sum-exp,
    from which backward recomputes the weights (reference.attention_forward and
    attention_backward in autograd/kernels/reference.py have the math).
    A query with every key masked gets zeros, as in the composed form.
    Grouped-query attention: k and v may have fewer heads (dim -3) than q, KV dividing H;
    query head h then uses kv head h // (H / KV), and the kernels sum each group's
    gradients into its shared kv head."""

    def forward(ctx, q, k, v, mask=None, scale=1.0):
        batch = q.shape[:-2]
        if not (k.shape[:-2] == v.shape[:-2] and (k.shape[:-2] == batch or _grouped_heads(q.shape, k.shape))
                and k.shape[-1] == q.shape[-1] and v.shape[-2] == k.shape[-2]):
            raise ValueError(f"fused attention needs q (..., T_q, d), k (..., T_k, d), v (..., T_k, d_v) with one "
                             f"batch shape, or q (..., H, T_q, d) with k, v (..., KV, T_k, d) and H a multiple of "
                             f"KV; got q {q.shape}, k {k.shape}, v {v.shape}")
        t_q, t_k = q.shape[-2], k.shape[-2]
        if mask is not None:
            mask = np.broadcast_to(mask, batch + (t_q, t_k))     # (..., T_q, T_k): a view, not N copies
        out, lse = kernels.attention_forward(q, k, v, mask, scale)                     # (..., T_q, d_v), (..., T_q)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.mask, ctx.scale = mask, scale
        return out

    def backward(ctx, grad):
        q, k, v, out, lse = ctx.saved_tensors
        return kernels.attention_backward(q, k, v, ctx.mask, ctx.scale, out, lse, grad)


def _grouped_heads(q_shape, k_shape):
    """Whether q (..., H, T_q, d) and k (..., KV, T_k, d) are grouped-query attention's: the
    same batch dims before the heads, and H a multiple of KV."""
    return (len(q_shape) >= 3 and len(k_shape) == len(q_shape) and k_shape[:-3] == q_shape[:-3]
            and k_shape[-3] > 0 and q_shape[-3] % k_shape[-3] == 0)
