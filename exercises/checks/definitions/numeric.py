"""The numpy definitions the checks compare with, and what each classic wrong answer gives.

Teacher-only: a student copy does not hold this file (it would give the solutions away);
it holds their results, recorded (exercises/checks/expected.py). Every function takes and
returns plain arrays (the checks call them through `expect(name, *arrays)`).
"""

import numpy as np


def _row_max(x):
    m = np.max(x, axis=-1, keepdims=True)
    return np.where(np.isfinite(m), m, 0.0)


def _normalise(e):
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s != 0)


# ----- softmax and log-softmax, right and wrong -----

def softmax(x):
    return _normalise(np.exp(x - _row_max(x)))


def softmax_unshifted(x):
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_mean_shift(x):
    e = np.exp(x - x.mean(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_global_max(x):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_masked_nan(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_columns(x):
    e = np.exp(x - np.max(x, axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def log_softmax(x):
    shifted = x - _row_max(x)
    s = np.exp(shifted).sum(axis=-1, keepdims=True)
    return np.where(s == 0, 0.0, shifted - np.log(np.where(s == 0, 1.0, s)))


def log_of_softmax(x):
    return np.log(softmax(x))


def log_softmax_unshifted(x):
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def log_softmax_max_dropped(x):
    return x - np.log(np.exp(x - _row_max(x)).sum(axis=-1, keepdims=True))


def log_softmax_masked_nan(x):
    m = np.max(x, axis=-1, keepdims=True)
    return (x - m) - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def softmax_backward(y, dy):
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


def softmax_backward_no_subtraction(y, dy):
    return y * dy


def softmax_backward_unweighted_sum(y, dy):
    return y * (dy - dy.sum(axis=-1, keepdims=True))


def softmax_backward_no_leading_y(y, dy):
    return dy - (dy * y).sum(axis=-1, keepdims=True)


def softmax_backward_diagonal(y, dy):
    return y * (1 - y) * dy


# ----- LayerNorm's backward -----

def layer_norm_dx(grad, xhat, rstd, weight):
    gw = grad * weight
    return rstd * (gw - gw.mean(axis=1, keepdims=True) - xhat * (gw * xhat).mean(axis=1, keepdims=True))


def layer_norm_dx_no_means(grad, xhat, rstd, weight):
    return rstd * grad * weight


def layer_norm_dx_no_xhat_term(grad, xhat, rstd, weight):
    gw = grad * weight
    return rstd * (gw - gw.mean(axis=1, keepdims=True))


def layer_norm_dx_no_weight(grad, xhat, rstd, weight):
    return layer_norm_dx(grad, xhat, rstd, np.ones_like(weight))


def rms_norm_parts(x, eps):
    rstd = 1 / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)
    return x * rstd, rstd


def rms_norm_dx(x, weight, grad, eps):
    xhat, rstd = rms_norm_parts(x, eps)
    gw = grad * weight
    return rstd * (gw - xhat * (gw * xhat).mean(axis=1, keepdims=True))


def rms_norm_dx_with_mean(x, weight, grad, eps):
    return layer_norm_dx(grad, *rms_norm_parts(x, eps), weight)


def rms_norm_dx_no_rstd(x, weight, grad, eps):
    return rms_norm_dx(x, weight, grad, eps) / rms_norm_parts(x, eps)[1]


def layer_norm_dweight(grad, xhat):
    return (grad * xhat).sum(axis=0)


def layer_norm_dbias(grad):
    return grad.sum(axis=0)


# ----- Adam -----

def adam(p, grads, lr, beta1, beta2, eps, variant):
    """(parameters, m, v) after one Adam step per gradient in grads (variant: "right" or a mistake)."""
    p, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
    for step, g in enumerate(grads, 1):
        if variant == "not_in_place":                     # the caller's m and v stay 0; p moves
            m, v = np.zeros_like(p), np.zeros_like(p)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * (np.abs(g) if variant == "v_of_g" else g * g)
        m_hat, v_hat = m / (1 - beta1 ** step), v / (1 - beta2 ** step)
        if variant == "no_correction":
            m_hat, v_hat = m, v
        if variant == "step_from_zero":
            m_hat, v_hat = m / (1 - beta1 ** (step + 1)), v / (1 - beta2 ** (step + 1))
        p = p - lr * m_hat / (np.sqrt(v_hat + eps) if variant == "eps_inside" else np.sqrt(v_hat) + eps)
    if variant == "not_in_place":
        m, v = np.zeros_like(p), np.zeros_like(p)
    return np.stack([p, m, v])


# ----- layers and attention -----

def linear(x, w, b):
    return x @ w.T + b


def linear_bias_on_rows(x, w, b):
    rows = x.reshape(-1, x.shape[-1]) @ w.T                # (N, out), then b as a column: needs N == out
    return (rows + b[:, None]).reshape(x.shape[:-1] + (w.shape[0],))


def attention_weights(q, k, mask, scale, fill):
    scores = q @ np.swapaxes(k, -1, -2) * scale
    return softmax(np.where(mask, scores, fill))


def attention_weights_over_queries(q, k, mask, scale):
    scores = np.where(mask, q @ np.swapaxes(k, -1, -2) * scale, -np.inf)
    return np.swapaxes(softmax(np.swapaxes(scores, -1, -2)), -1, -2)


def split_heads(x, heads):
    b, t, d = x.shape
    return x.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)


def sinusoidal(max_len, d_model, variant):
    pos = np.arange(max_len)[:, None]
    i2 = np.arange(0, d_model, 2) / d_model if variant != "i_not_2i" else np.arange((d_model + 1) // 2) / d_model
    angle = pos / 10000 ** i2 if variant != "multiplied" else pos * 10000 ** i2
    table = np.zeros((max_len, d_model))
    first, second = (np.cos, np.sin) if variant == "swapped" else (np.sin, np.cos)
    if variant == "halves":
        half = (d_model + 1) // 2
        table[:, :half], table[:, half:] = np.sin(angle), np.cos(angle[:, : d_model - half])
        return table
    table[:, 0::2], table[:, 1::2] = first(angle), second(angle[:, : d_model // 2])
    return table


def causal_mask(n, diagonal):
    return np.tril(np.ones((n, n), dtype=bool), diagonal)


def upper_mask(n):
    return np.triu(np.ones((n, n), dtype=bool), 1)


# ----- the scalar engine -----

def scalar_grads(leaves, program, variant):
    """d(last value)/d(each leaf) of a program of ("mul" | "add", i, j) and ("tanh", i) steps
    over the values leaves + results so far, with Value.__mul__'s backward as `variant` does it."""
    values, grads = list(leaves), [0.0] * (len(leaves) + len(program))
    for op, *args in program:
        values.append(values[args[0]] * values[args[1]] if op == "mul" else values[args[0]] + values[args[1]]
                      if op == "add" else np.tanh(values[args[0]]))
    grads[-1] = 1.0
    for index in range(len(values) - 1, len(leaves) - 1, -1):
        op, *args = program[index - len(leaves)]
        g = grads[index]
        if op == "add":
            grads[args[0]] += g
            grads[args[1]] += g
        elif op == "tanh":
            grads[args[0]] += (1 - values[index] ** 2) * g
        else:
            _mul_backward(values, grads, args[0], args[1], g, variant)
    return np.array(grads[: len(leaves)])


def _mul_backward(values, grads, a, b, g, variant):
    own = {"no_upstream": (values[b], values[a]), "own_factor": (values[a] * g, values[b] * g),
           "one_factor": (values[b] * g, 0.0), "other_factor_only": (0.0, values[a] * g)}.get(variant,
                                                                                            (values[b] * g, values[a] * g))
    grads[a] = own[0] if variant in ("assign", "assign_first") else grads[a] + own[0]
    grads[b] = own[1] if variant in ("assign", "assign_second") else grads[b] + own[1]


# ----- tensors -----

def unbroadcast(grad, shape, variant):
    """grad summed back to shape (variant "right"), or as a classic wrong answer does it."""
    lead = tuple(range(grad.ndim - len(shape)))
    if variant == "leading_only":
        return grad.sum(axis=lead)
    reduced = grad.sum(axis=lead)
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and reduced.shape[i] != 1)
    if variant == "mean":
        return grad.mean(axis=lead).mean(axis=stretched, keepdims=True) if lead else reduced.mean(axis=stretched,
                                                                                                keepdims=True)
    return reduced.sum(axis=stretched, keepdims=variant != "no_keepdims")


def matmul_grads(a, b, g, variant):
    """[dL/dA, dL/dB] flattened and joined, for 2-D a, b and upstream g."""
    da = g @ b if variant == "b_not_transposed" else g @ b.T
    db = a @ g if variant == "a_not_transposed" else a.T @ g
    if variant == "db_transposed":
        db = db.T
    return np.concatenate([np.ravel(da), np.ravel(db)])


def matmul_loops(a, b, variant):
    """a @ b for (T, M, K) and (T, K, N) as the loop kernel computes it, right or wrong."""
    if variant == "assign":
        return a[:, :, -1:] * b[:, -1:, :]
    if variant == "b_transposed":
        return a @ np.swapaxes(b, 1, 2)
    if variant == "batch_index_lost":                     # t stays 0: batch 0 summed once per batch
        out = np.zeros((a.shape[0], a.shape[1], b.shape[2]))
        out[0] = a.shape[0] * (a[0] @ b[0]) if a.shape[0] else 0
        return out
    if variant == "one_batch":
        return np.broadcast_to(a[:1] @ b[:1], (a.shape[0], a.shape[1], b.shape[2])) * \
            (np.arange(a.shape[0]) == 0)[:, None, None]
    return a @ b


def embedding_grad(ids, vocab, upstream):
    """The table's gradient: each id's row gets the upstream rows of its positions, summed."""
    out = np.zeros((vocab, upstream.shape[-1]))
    np.add.at(out, ids.reshape(-1), upstream.reshape(-1, upstream.shape[-1]))
    return out


def embedding_grad_assigned(ids, vocab, upstream):
    out = np.zeros((vocab, upstream.shape[-1]))
    out[ids.reshape(-1)] = upstream.reshape(-1, upstream.shape[-1])
    return out


def embedding(weight, ids):
    return weight[ids]


def split_heads_wrong(x, heads, variant):
    b, t, d = x.shape
    return x.reshape(b, heads, t, d // heads) if variant == "straight" else x.reshape(b, t, heads, d // heads)


def merge_heads_unswapped(x):
    b, h, t, d = x.shape
    return x.reshape(b, t, h * d)
