"""The numpy definitions of the layers (linear, embedding) and attention the checks compare
with, and what each classic wrong answer gives (teacher-only, as numeric.py)."""

import numpy as np

from exercises.checks.definitions.numeric import softmax, softmax_backward


def linear(x, w, b):
    return x @ w.T + b


def linear_grads(x, w, g):
    """[dL/dx, dL/dW, dL/db] of x W^T + b, flattened and joined, for upstream g."""
    rows, grads = x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1])
    return np.concatenate([np.ravel(g @ w), np.ravel(grads.T @ rows), grads.sum(axis=0)])


def linear_bias_on_rows(x, w, b):
    rows = x.reshape(-1, x.shape[-1]) @ w.T                # (N, out), then b as a column: needs N == out
    return (rows + b[:, None]).reshape(x.shape[:-1] + (w.shape[0],))


def attention_weights(q, k, mask, scale, fill):
    scores = q @ np.swapaxes(k, -1, -2) * scale
    return softmax(np.where(mask, scores, fill))


def attention_weights_fixed_axes(q, k, mask, scale):
    """The weights of scores (q * scale) @ k.transpose(1, 2), right only for 3-D inputs."""
    return softmax(np.where(mask, (q * scale) @ np.swapaxes(k, 1, 2), -np.inf))


def attention_weights_over_queries(q, k, mask, scale):
    scores = np.where(mask, q @ np.swapaxes(k, -1, -2) * scale, -np.inf)
    return np.swapaxes(softmax(np.swapaxes(scores, -1, -2)), -1, -2)


def attention_grads(q, k, v, mask, scale, upstream, through_weights=True):
    """[dL/dq, dL/dk, dL/dv] of out = W v, W = softmax(masked(q k^T * scale)), for upstream
    dO (each flattened, joined). dV = W^T dO; dW = dO V^T; the softmax's backward
    dS = W * (dW - sum(dW * W, -1)); dQ = dS K * scale; dK = dS^T Q * scale. A masked score
    has weight 0, so dS is 0 there and a fully masked query (all weights 0) gets no gradient.
    through_weights False: the weights made outside the graph (from .data), so dQ = dK = 0."""
    weights = attention_weights(q, k, mask, scale, -np.inf)                      # (..., T_q, T_k)
    d_scores = softmax_backward(weights, upstream @ np.swapaxes(v, -1, -2)) * through_weights
    d_q, d_k = d_scores @ k * scale, np.swapaxes(d_scores, -1, -2) @ q * scale   # q's, k's shapes
    return np.concatenate([np.ravel(d_q), np.ravel(d_k), np.ravel(np.swapaxes(weights, -1, -2) @ upstream)])


def split_heads(x, heads):
    b, t, d = x.shape
    return x.reshape(b, t, heads, d // heads).transpose(0, 2, 1, 3)


def merge_heads(x):
    b, h, t, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(b, t, h * d)


def sinusoidal(max_len, d_model, variant):
    pos = np.arange(max_len)[:, None]
    pos = pos + 1 if variant == "from_one" else pos
    i2 = np.arange(0, d_model, 2) / d_model if variant != "i_not_2i" else np.arange((d_model + 1) // 2) / d_model
    i2 = np.arange(0, d_model, 2) // d_model if variant == "integer_division" else 2 * i2 if variant == "doubled" else i2
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


def upper_mask(n, diagonal=1):
    return np.triu(np.ones((n, n), dtype=bool), diagonal)


# ----- embeddings and heads -----

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


def embedding_wrong(weight, ids, variant):
    """The lookup as a classic wrong answer does it: ids flattened ("flat") or taken as 1-based."""
    return weight[ids.reshape(-1)] if variant == "flat" else weight[ids - 1]


def split_heads_wrong(x, heads, variant):
    b, t, d = x.shape
    if variant == "strided":
        return x.reshape(b, t, d // heads, heads).transpose(0, 3, 1, 2)
    return x.reshape(b, heads, t, d // heads) if variant == "straight" else x.reshape(b, t, heads, d // heads)


def merge_heads_unswapped(x):
    b, h, t, d = x.shape
    return x.reshape(b, t, h * d)


def _projected(x, weight, bias, heads):
    return split_heads(linear(x, weight, bias), heads)                  # (B, H, T, d_head)


def attention_layer_cache(x, weights, heads, k_past, v_past):
    """The keys and values a multi-head attention layer's cache holds after x (B, T, D), fed
    after a cache of k_past, v_past (B, H, P, d_head; P may be 0): [keys, values] stacked.
    weights: [w_q, b_q, w_k, b_k, w_v, b_v, w_out, b_out], as nn.Linear keeps them."""
    w_k, b_k, w_v, b_v = weights[2:6]
    return np.stack([np.concatenate([k_past, _projected(x, w_k, b_k, heads)], axis=2),
                     np.concatenate([v_past, _projected(x, w_v, b_v, heads)], axis=2)])     # (2, B, H, P + T, d_head)


def attention_layer(x, weights, heads, k_past, v_past, factors, q_positions):
    """The output (B, T, D) of a causal multi-head attention layer on x whose queries sit
    after P cached positions: softmax(q k^T / sqrt(d_head)) v over the cached and new keys,
    query t seeing keys 0 .. P + t, heads merged and projected out; each query and key first
    multiplied by factors[its position] (the checks' stand-in for RoPE), the keys' positions
    0 .. P + T - 1, the queries' q_positions (P .. P + T - 1, unless the layer miscounts)."""
    keys, values = attention_layer_cache(x, weights, heads, k_past, v_past)
    q = _projected(x, weights[0], weights[1], heads)                    # (B, H, T, d_head)
    past, length = k_past.shape[2], x.shape[1]
    q = q * np.take(factors, q_positions, mode="wrap")[:, None]
    keys = keys * np.take(factors, np.arange(past + length), mode="wrap")[:, None]
    sees = np.tril(np.ones((length, past + length), dtype=bool), k=past)  # (T, P + T)
    attended = attention_weights(q, keys, sees, 1 / np.sqrt(q.shape[-1]), -np.inf) @ values
    return linear(merge_heads(attended), weights[6], weights[7])         # (B, T, D)
