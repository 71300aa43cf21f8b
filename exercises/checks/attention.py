"""The checks of attention."""

import math

import numpy as np

from exercises.checks.feedback import Wrong, compare, rng
from exercises.checks.kernels import _stable_softmax


def _attention(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    return _stable_softmax(np.where(mask, scores, -np.inf))


def check_attention():
    from autograd import Tensor
    from transformer.attention import scaled_dot_product_attention
    r = rng()
    q, k, v = r.standard_normal((2, 3, 16)), r.standard_normal((2, 5, 16)), r.standard_normal((2, 5, 4))
    mask = np.ones((2, 3, 5), dtype=bool)
    mask[:, :, 3:] = False
    mask[1, 2] = False                                                   # a query that may see nothing
    out, weights = scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), mask)
    expected = _attention(q, k, v, mask)
    unscaled = _stable_softmax(np.where(mask, q @ np.swapaxes(k, -1, -2), -np.inf))
    compare("attention weights (2 batches, 3 queries, 5 keys, d_k 16)", weights.data, expected,
            [(unscaled, "the scores are not divided by sqrt(d_k): with d_k = 16 they are 4x too large"),
             (_stable_softmax(q @ np.swapaxes(k, -1, -2) / 4.0), "the mask is ignored: masked keys must get "
                                                                    "score -inf, weight 0")])
    compare("attention output", out.data, expected @ v)
    return "weights and output, with a padding mask and a fully masked query"


def check_heads():
    from autograd import Tensor
    from transformer.attention import MultiHeadAttention
    attention = MultiHeadAttention(8, 2)
    x = rng().standard_normal((3, 4, 8))
    split = attention._split_heads(Tensor(x))
    compare("_split_heads of (B=3, T=4, d_model=8) into 2 heads", split.data,
            x.reshape(3, 4, 2, 4).transpose(0, 2, 1, 3),
            [(x.reshape(3, 2, 4, 4), "reshape to (B, T, H, d_head) first, then swap T and H: each head takes "
                                     "its slice of every token's vector")])
    heads = rng().standard_normal((3, 2, 4, 4))                         # (B, H, T, d_head)
    compare("_merge_heads of (B=3, H=2, T=4, d_head=4)", attention._merge_heads(Tensor(heads)).data,
            heads.transpose(0, 2, 1, 3).reshape(3, 4, 8),
            [(heads.reshape(3, 4, 8), "heads merged in the wrong order: transpose (B, H, T, d) to (B, T, H, d) "
                                      "before the reshape, so each token gets its heads side by side")])
    return "split and merge, shapes and order"


def check_sinusoidal():
    from transformer.positional import sinusoidal_table
    for max_len, d in ((6, 8), (5, 7)):
        pos = np.arange(max_len)[:, None]
        angle = pos / 10000 ** (np.arange(0, d, 2) / d)
        expected, swapped = np.zeros((max_len, d)), np.zeros((max_len, d))
        expected[:, 0::2], expected[:, 1::2] = np.sin(angle), np.cos(angle[:, : d // 2])
        swapped[:, 0::2], swapped[:, 1::2] = np.cos(angle), np.sin(angle[:, : d // 2])
        compare(f"sinusoidal_table({max_len}, {d})", sinusoidal_table(max_len, d), expected,
                [(swapped, "sin and cos are swapped: even dims take sin, odd dims cos")])
    return "an even and an odd width"


def check_causal_mask():
    from transformer.masks import causal_mask
    for n in (1, 4):
        mask = np.asarray(causal_mask(n))
        expected = np.tril(np.ones((n, n), dtype=bool))
        compare(f"causal_mask({n})", mask, expected,
                [(np.tril(np.ones((n, n)), -1), "off by one: a query may see itself (the diagonal is allowed)"),
                 (np.tril(np.ones((n, n)), 1), "off by one: query t sees key t + 1, one token of the future")])
        if mask.dtype != bool:
            raise Wrong(f"causal_mask({n}): dtype {mask.dtype}, expected bool (True = may attend)")
    return "lengths 1 and 4"
