"""The kernels' definitions in numpy: the "numpy" tier.

Every other tier (loops.py, the engine room) offers these names and signatures and is
tested against these functions.  They are also what the ops run when the numpy tier is
chosen (`autograd.kernels.use_tier("numpy")`).  Row-wise kernels work along the last axis
of an array of any shape.

Fully masked rows: a row whose entries are all -inf (an attention query that may attend
to nothing) gets softmax 0, log-softmax 0 and zero gradient, never NaN.  PyTorch returns
NaN there; zeros let padding rows pass through a model harmlessly.

NaN and +inf propagate as in PyTorch: a row holding either (a NaN of either sign) gives a
NaN row, so a diverging model shows its NaN instead of a plausible number.
"""

import math

import numpy as np


def matmul(a, b):
    """C = A @ B for (..., M, K) @ (..., K, N) -> (..., M, N), batch dims broadcast:
    C[..., i, j] = sum_k A[..., i, k] B[..., k, j]."""
    return np.matmul(a, b)


def matmul_grad(a, b, operand):
    """a @ b as the gradient of `operand`, one input of a matmul (MatMul.backward's dA and
    dB): the numbers of matmul(a, b).  A kernel of its own because a tier may write it laid
    out in memory as `operand` is (the engine room does, so that the views that made the
    operand hand its gradient back without a copy); the numpy and loops tiers do not."""
    return np.matmul(a, b)


def _row_max(x):
    """Row maxima, with fully masked rows (max = -inf) shifted by 0 instead."""
    m = np.max(x, axis=-1, keepdims=True)
    m[m == -np.inf] = 0
    return m


def softmax(x):
    """y_i = exp(x_i - max x) / sum_j exp(x_j - max x), row-wise."""
    if x.shape[-1] == 0:
        return x.copy()
    # BEGIN EXERCISE softmax
    e = np.exp(x - _row_max(x))
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s != 0)   # s is NaN for a row with NaN or +inf
    # END EXERCISE


def softmax_backward(y, dy):
    """dx_i = y_i (dy_i - sum_j dy_j y_j)."""
    # BEGIN EXERCISE softmax_backward
    return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))
    # END EXERCISE


def log_softmax(x):
    """y_i = (x_i - max x) - log sum_j exp(x_j - max x), row-wise."""
    if x.shape[-1] == 0:
        return x.copy()
    # BEGIN EXERCISE log_softmax
    shifted = x - _row_max(x)
    s = np.exp(shifted).sum(axis=-1, keepdims=True)
    masked = s == 0
    out = shifted - np.log(np.where(masked, 1, s))
    return np.where(masked, 0, out)
    # END EXERCISE


def log_softmax_backward(y, dy):
    """dx_i = dy_i - exp(y_i) sum_j dy_j.

    A fully masked row has y = 0 everywhere, so sum_j exp(y_j) = n instead of 1; such
    rows (n >= 2) get zero gradient.  (For n = 1 the formula itself gives 0.)
    """
    p = np.exp(y)
    dx = dy - p * np.sum(dy, axis=-1, keepdims=True)
    masked = np.sum(p, axis=-1, keepdims=True) > 1.5
    return np.where(masked, 0, dx)


def adam_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    """One Adam (or AdamW, decoupled=True) update of the flat arrays p, m, v in place, with
    gradient g, at step number `step` (1-based):
        p *= 1 - lr * wd  (AdamW)   or   g = g + wd * p  (Adam's L2)
        m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2
        p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)"""
    if weight_decay:
        if decoupled:
            p *= 1 - lr * weight_decay
        else:
            g = g + weight_decay * p
    # BEGIN EXERCISE adam_step
    m *= beta1
    m += (1 - beta1) * g
    v *= beta2
    v += (1 - beta2) * g * g
    p -= lr * (m / (1 - beta1 ** step)) / (np.sqrt(v / (1 - beta2 ** step)) + eps)
    # END EXERCISE


def sum_of_squares(x):
    """sum of x**2 over all of x, accumulated in float64 (a Python float): the squared L2
    norm that gradient clipping adds up over all parameters."""
    return float(np.sum(np.square(x, dtype=np.float64)))


def index_add_rows(out, ids, rows):
    """out[ids[i]] += rows[i] for every i, in order, in place: a repeated id accumulates
    (the gradient of a row lookup such as an embedding).  out (V, D), ids (N,), rows (N, D)."""
    np.add.at(out, ids.reshape(-1), rows.reshape(-1, out.shape[1]))


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
    """Each pair (a, b) of x's last dim (..., d) turned by its angle, whose cos and sin are
    given broadcastable to (..., d/2): (a cos - b sin, a sin + b cos), computed as

        x * (cos, cos)  +  (b, a) * (-sin, sin)

    with the angles' arrays laid out as x's pairs (in_pairs): whole rows of x at a time
    rather than half rows, which takes half the time of the formula's four half-row products
    and gives the same numbers (a cos + b (-sin) is a cos - b sin, bit for bit).
    pairing: "half" pairs (i, i + d/2), "interleaved" pairs (2i, 2i + 1) (RoPE's two families)."""
    out = x * in_pairs(cos, cos, pairing)                                  # (a cos, b cos)
    swapped = np.empty_like(x)
    a, b = _pair_views(x, pairing)
    swapped_a, swapped_b = _pair_views(swapped, pairing)
    swapped_a[...], swapped_b[...] = b, a                                  # (b, a)
    swapped *= in_pairs(-sin, sin, pairing)                                # (-b sin, a sin)
    out += swapped
    return out


def relu(x):
    """max(x, 0) elementwise; NaN stays NaN."""
    return np.where(x <= 0, np.zeros((), x.dtype), x)


def relu_backward(out, grad):
    """grad where relu's output is > 0, else 0."""
    return np.where(out > 0, grad, np.zeros((), grad.dtype))


def masked_fill(x, mask, value):
    """value where the boolean mask (broadcast to x's shape) is True, else x."""
    return np.where(mask, np.asarray(value, dtype=x.dtype), x)


def layer_norm(x, weight, bias, eps):
    """Rows of x (N, D) normalised then scaled and shifted: returns (out, xhat, rstd) with
    xhat = (x - mean) * rstd, rstd = 1 / sqrt(var + eps) (biased variance), out = xhat w + b."""
    mean = x.mean(axis=1, keepdims=True)
    centered = x - mean
    rstd = 1.0 / np.sqrt((centered * centered).mean(axis=1, keepdims=True) + eps)
    xhat = centered * rstd
    return xhat * weight + bias, xhat, rstd


def layer_norm_backward(grad, xhat, rstd, weight):
    """(dx, dweight, dbias) for layer_norm, from grad (N, D):
    dx = rstd (g w - mean(g w) - xhat mean(g w xhat)),  dw = sum_rows g xhat,  db = sum_rows g."""
    # BEGIN EXERCISE layer_norm_backward
    dxhat = grad * weight
    dx = rstd * (dxhat - dxhat.mean(axis=1, keepdims=True) - xhat * (dxhat * xhat).mean(axis=1, keepdims=True))
    return dx, (grad * xhat).sum(axis=0), grad.sum(axis=0)
    # END EXERCISE


_erf = np.frompyfunc(math.erf, 1, 1)    # numpy has no erf; math.erf element by element (slow, exact)
SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
TANH_CUBIC = 0.044715


def gelu(x, approximate):
    """GELU(x) = x Phi(x), Phi the standard normal CDF = (1 + erf(x / sqrt 2)) / 2;
    approximate="tanh": Phi(x) ~ (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) / 2."""
    return x * _gelu_cdf(x, approximate)


def gelu_backward(x, grad, approximate):
    """dGELU/dx = Phi(x) + x Phi'(x), Phi'(x) = exp(-x^2/2) / sqrt(2 pi) (exact form);
    for the tanh form, with u = sqrt(2/pi) (x + 0.044715 x^3):
    Phi'(x) = (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2) / 2."""
    if approximate == "tanh":
        t = np.tanh(SQRT_2_OVER_PI * (x + TANH_CUBIC * x ** 3))
        pdf = 0.5 * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * TANH_CUBIC * x * x)
        return (grad * (0.5 * (1 + t) + x * pdf)).astype(x.dtype, copy=False)
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    return (grad * (_gelu_cdf(x, approximate) + x * pdf)).astype(x.dtype, copy=False)


def _gelu_cdf(x, approximate):
    if approximate == "tanh":
        return 0.5 * (1 + np.tanh(SQRT_2_OVER_PI * (x + TANH_CUBIC * x ** 3)))
    if approximate == "none":
        return 0.5 * (1 + _erf(x / math.sqrt(2)).astype(x.dtype))
    raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")


def _batch_mask(mask, q):
    """A mask of shape (..., T_q, T_k) whose leading dims hold q's matrices (in any shape of
    the same size, in order), shaped as q's batch: (*q.shape[:-2], T_q, T_k)."""
    return None if mask is None else np.reshape(mask, q.shape[:-2] + mask.shape[-2:])


def attention_forward(q, k, v, mask, scale):
    """Fused attention's twin: q (..., T_q, d), k (..., T_k, d), v (..., T_k, d_v) with one
    batch shape, mask boolean (True = may attend) of shape (..., T_q, T_k) with the matrices
    in its leading dims (any strides: a mask broadcast over heads is not copied per head) or
    None -> (out (..., T_q, d_v), lse (..., T_q)), with out = softmax(q k^T scale) v and lse
    the rows' log-sum-exp (-inf, and out 0, for a fully masked row).  The softmax and the
    log-sum-exp are this file's softmax and log_softmax (exercises both).

    Grouped-query attention: q (..., H, T_q, d) with k, v (..., KV, T_k, d), H a multiple of
    KV: query head h attends with kv head h // (H / KV) (see _grouped)."""
    q5, k5, v5 = _grouped(q, k, v)                          # (..., KV, G, T_q, d), (..., KV, 1, T_k, d) ...
    scores = _masked_scores(q5, k5, _batch_mask(mask, q5), scale)               # (..., KV, G, T_q, T_k)
    out = np.matmul(softmax(scores), v5)                                         # (..., KV, G, T_q, d_v)
    return out.reshape(q.shape[:-1] + v.shape[-1:]), log_sum_exp(scores).astype(q.dtype).reshape(q.shape[:-1])


def _grouped(q, k, v):
    """(q, k, v) with a group axis: q (..., H, T_q, d) as (..., KV, G, T_q, d), G = H / KV
    query heads per key/value head (query head h = kv G + g), and k, v (..., KV, T, d) as
    (..., KV, 1, T, d), broadcast over each group by the matmuls rather than repeated.  With
    as many kv heads as heads, G = 1; without a heads dim (2-D q), q, k and v as they are."""
    if q.ndim < 3:
        return q, k, v
    heads, kv_heads = q.shape[-3], k.shape[-3]
    if heads % kv_heads or k.shape[:-3] != q.shape[:-3]:
        raise ValueError(f"attention: q {q.shape} and k {k.shape} need the same batch dims and a number of query "
                         f"heads (dim -3) that is a multiple of the key/value heads")
    q5 = q.reshape(q.shape[:-3] + (kv_heads, heads // kv_heads) + q.shape[-2:])
    return q5, np.expand_dims(k, -3), np.expand_dims(v, -3)


def _masked_scores(q, k, mask, scale):
    """q k^T scale, -inf where the mask (shaped as q's batch, or None) forbids: (..., T_q, T_k).
    A student copy handing out the attention exercise is without it: the composed attention
    (the exercise's regions) runs in place of the fused one there."""
    # BEGIN TWIN attention
    scores = np.matmul(q, np.swapaxes(k, -1, -2)) * scale
    return scores if mask is None else np.where(mask, scores, -np.inf)
    # END TWIN


def log_sum_exp(x, log_softmax=log_softmax):
    """log sum_j exp(x_j) row-wise, from a log_softmax (this file's, or a tier's): log_softmax(x)_j
    = x_j - lse, so its row maximum is max x - lse, and lse = max x - max log_softmax(x) (with this
    file's log_softmax, bit for bit m + log sum exp(x - m), m the row max).  A fully masked or
    empty row gives -inf."""
    if x.shape[-1] == 0:
        return np.full(x.shape[:-1], -np.inf, x.dtype)
    return np.max(x, axis=-1) - np.max(log_softmax(x), axis=-1)


def attention_backward(q, k, v, mask, scale, out, lse, dout):
    """Gradients (dq, dk, dv) of attention_forward, recomputing the weights p (this file's
    softmax; lse is not needed here) and the scores' gradient by softmax_backward.  Under
    grouped-query attention a key/value head's gradient is the sum over the G query heads
    of its group (the sum over the group axis that broadcasting k and v made)."""
    q5, k5, v5 = _grouped(q, k, v)
    dout5 = dout.reshape(q5.shape[:-1] + dout.shape[-1:])                       # (..., KV, G, T_q, d_v)
    p = softmax(_masked_scores(q5, k5, _batch_mask(mask, q5), scale))            # (..., KV, G, T_q, T_k)
    dv = np.matmul(np.swapaxes(p, -1, -2), dout5)
    ds = softmax_backward(p, np.matmul(dout5, np.swapaxes(v5, -1, -2))) * scale  # dp = dout v^T
    dq, dk = np.matmul(ds, k5), np.matmul(np.swapaxes(ds, -1, -2), q5)
    if q5 is not q:                                          # the group axis summed back: (..., KV, T_k, d)
        dk, dv = dk.sum(axis=-3), dv.sum(axis=-3)
    return dq.reshape(q.shape).astype(q.dtype), dk.astype(q.dtype), dv.astype(q.dtype)
