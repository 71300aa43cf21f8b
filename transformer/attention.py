"""Scaled dot-product attention and multi-head attention.

Attention is a soft dictionary lookup: each query is compared with every key, the scores
become weights by a softmax, and the output is the weighted average of the values:

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V

Dividing by sqrt(d_k) keeps the scores' variance near 1 whatever the head size, so the
softmax does not saturate into a one-hot choice (see demos/scaling.py).
"""

import functools
import math
import sys
import types

import numpy as np

import nn
from autograd import Tensor, cat, kernels, no_grad, ops
from nn import functional as F
from transformer.config import check_kv_heads, require_positive
from transformer.relative_position import is_position_aware
from transformer.scores import scaled_dot_scores


def _checked_mask(mask, scores_shape):
    mask = np.asarray(mask.data if isinstance(mask, Tensor) else mask)
    if mask.dtype != np.bool_:
        raise TypeError(f"attention mask must be boolean (True = may attend), got dtype {mask.dtype}")
    try:
        np.broadcast_shapes(mask.shape, scores_shape)
    except ValueError:
        raise ValueError(f"attention mask of shape {mask.shape} does not broadcast to the scores' shape "
                         f"{scores_shape} (batch, heads, q_len, k_len)") from None
    return mask


def scaled_dot_product_attention(q, k, v, mask=None, dropout_p=0.0, training=True, generator=None, score=None,
                                 fused=False, enable_gqa=False):
    """Returns (output, weights).

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v);  mask: boolean, True = may
    attend, broadcastable to (..., T_q, T_k).  A query whose keys are all masked gets zero
    weights (and zero gradient) instead of NaN.  Dropout is applied to the weights.
    `score(q, k)` replaces q k^T / sqrt(d_k) when given (see transformer/scores.py; then
    q and k may differ in size).

    fused=True runs the whole computation as one op (autograd/ops/attention.py), which keeps
    no weights (they are returned as None), when no dropout is in effect and no custom
    score is given; otherwise, and by default, the composed ops below run: the nodes a
    learner steps through.  They run under a debugger even where fused is asked for (said
    once), and always in a student copy handing out the attention exercise.

    enable_gqa=True (PyTorch's name): k and v may have fewer heads than q, grouped-query
    attention (see _grouped).
    """
    d_k, (groups, scores_shape) = q.shape[-1], _checked_shapes(q, k, v, score, enable_gqa)
    mask = None if mask is None else _checked_mask(mask, scores_shape)
    fused = fused and not _composed_for_a_debugger()
    # BEGIN TWIN attention (dropped)
    if fused and score is None and not (dropout_p and training) and (q.shape[:-2] == k.shape[:-2] or groups > 1):
        return ops.ScaledDotProductAttention.apply(q, k, v, mask=mask, scale=1.0 / math.sqrt(d_k)), None
    # END TWIN
    if groups > 1:
        q, k, v, mask = _grouped(q, k, v, mask, groups)       # (..., KV, G, T_q, d_k), k, v (..., KV, 1, T_k, d)
    scores = (score or scaled_dot_scores)(q, k)                      # (..., T_q, T_k)
    # BEGIN EXERCISE attention
    if mask is not None:
        scores = scores.masked_fill(~mask, -np.inf)
    weights = scores.softmax(-1)                                    # (..., T_q, T_k)
    # END EXERCISE
    if dropout_p:
        weights = F.dropout(weights, dropout_p, training, generator)
    out = weights @ v                                                # (..., T_q, d_v)
    if groups > 1:                                                   # the groups' heads side by side again
        out, weights = out.reshape(*scores_shape[:-1], v.shape[-1]), weights.reshape(*scores_shape)
    return out, weights


def _checked_shapes(q, k, v, score, enable_gqa):
    """(G, the scores' shape (..., T_q, T_k)) for scaled_dot_product_attention's q, k, v: G
    query heads per key/value head (1 without grouped-query attention); shapes that do not
    fit are a ValueError naming them."""
    groups = query_groups(q.shape, k.shape, v.shape) if enable_gqa else 1
    try:
        batch = q.shape[:-1] if groups > 1 else np.broadcast_shapes(q.shape[:-1], k.shape[:-2] + (1,))   # (..., T_q)
    except ValueError:
        batch = None
    if batch is None or (score is None and k.shape[-1] != q.shape[-1]) or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: q {q.shape}, k {k.shape}, v {v.shape} do not fit: need "
                         "q (..., T_q, d_k), k (..., T_k, d_k), v (..., T_k, d_v) with batch dims that broadcast "
                         "(fewer key/value heads than query heads: enable_gqa=True)")
    return groups, batch + (k.shape[-2],)


def query_groups(q_shape, k_shape, v_shape):
    """How many query heads share each key/value head (G = H / KV) for q (..., H, T_q, d),
    k (..., KV, T_k, d), v (..., KV, T_k, d_v); a ValueError names the shapes when H is not
    a multiple of KV or the batch dims or kv heads of k and v differ."""
    if len(q_shape) < 3 or k_shape[:-3] != q_shape[:-3] or k_shape[:-2] != v_shape[:-2]:
        raise ValueError(f"grouped-query attention needs q (..., H, T_q, d), k and v (..., KV, T_k, d) with the "
                         f"same batch dims; got q {q_shape}, k {k_shape}, v {v_shape}")
    heads, kv_heads = q_shape[-3], k_shape[-3]
    if kv_heads < 1 or heads % kv_heads:
        raise ValueError(f"grouped-query attention: the {heads} query heads (q {q_shape}) are not a multiple of the "
                         f"{kv_heads} key/value heads (k {k_shape})")
    return heads // kv_heads


def _grouped(q, k, v, mask, groups):
    """Grouped-query attention: q (..., H, T_q, d_k) and k, v (..., KV, T_k, d) with fewer
    heads, H a multiple of KV: the G = H / KV query heads of a group share one key/value
    head, query head h using kv head h // G (multi-query attention when KV = 1).  The
    queries are regrouped and the keys and values broadcast over each group, not repeated;
    the gradients of a group's queries sum into its shared keys and values.

    q (..., H, T_q, d) as (..., KV, G, T_q, d): query head h = kv G + g is row g of group
    kv; k and v (..., KV, T_k, d) as (..., KV, 1, T_k, d), broadcast over each group's G
    rows by the matmuls; the mask (..., H or 1, T_q, T_k) likewise split, or given a group axis."""
    q = q.reshape(*q.shape[:-3], q.shape[-3] // groups, groups, *q.shape[-2:])       # (..., KV, G, T_q, d)
    k, v = k.unsqueeze(-3), v.unsqueeze(-3)                                           # (..., KV, 1, T_k, d)
    if mask is not None:
        mask = mask.reshape((1,) * (q.ndim - 1 - mask.ndim) + mask.shape)              # (..., H or 1, T_q, T_k)
        mask = (mask[..., None, :, :] if mask.shape[-3] == 1 else
                mask.reshape(*mask.shape[:-3], mask.shape[-3] // groups, groups, *mask.shape[-2:]))
    return q, k, v, mask


def _composed_for_a_debugger():
    """Whether a debugger is stepping (kernels.stepping()), so that fused attention runs as the
    composed ops; said in one line, once a run."""
    if kernels.stepping():
        _say_composed_for_the_debugger()
    return kernels.stepping()


@functools.cache
def _say_composed_for_the_debugger():
    print("transformer: a debugger is tracing, so fused attention runs as the composed ops (matmul, "
          "masked_fill, softmax, matmul: `s` enters each); AUTOGRAD_KERNELS=fast keeps it fused",
          file=sys.stderr, flush=True)


def attention_weights(q, k, mask=None):
    """softmax(q k^T / sqrt(d_k), masked) as a plain array, computed afresh (for plots) by the
    composed attention above, so that it is the attention exercise's own code that runs.
    k may have fewer heads than q (grouped-query attention: see scaled_dot_product_attention)."""
    q, k = Tensor(q), Tensor(k)
    with no_grad():                                                      # k as the values: only the weights matter
        _, weights = scaled_dot_product_attention(q, k, k, mask, enable_gqa=q.ndim > 2 and q.shape[-3] != k.shape[-3])
    return weights.data                                                  # (..., T_q, T_k)


def check_cache_consistency(score, num_heads, d_head, length=5):
    """Under the key/value cache a score meets only the newest queries (told their first
    position, q_offset, if it declares position_aware = True). A score that uses the
    queries' positions without declaring it would make cached decoding differ from uncached,
    silently; so it is tried once, on random queries, when the attention is built, and
    refused with its name if the last query's scores change when it comes alone."""
    rng = np.random.default_rng(0)
    dtype = next((p.dtype for p in score.parameters()), np.float32) if isinstance(score, nn.Module) else np.float32
    q, k = (Tensor(rng.standard_normal((1, num_heads, length, d_head)).astype(dtype)) for _ in range(2))
    aware = is_position_aware(score)
    with no_grad():
        full = (score(q, k, q_offset=0) if aware else score(q, k)).data                           # (1, H, T, T)
        alone = (score(q[:, :, -1:], k, q_offset=length - 1) if aware else score(q[:, :, -1:], k)).data
    if not np.allclose(full[:, :, -1:], alone, atol=1e-4, rtol=1e-4):
        raise ValueError(f"{type(score).__name__}: the last query's scores change when it is scored alone, as under "
                         "the key/value cache; a score that uses the queries' positions must declare "
                         "position_aware = True and take q_offset, their first position")


class MultiHeadAttention(nn.Module):
    """num_heads attention heads side by side, each on its own d_model/num_heads slice of
    learned projections of the queries, keys and values; their outputs are concatenated and
    projected back to d_model.

    num_kv_heads (None: num_heads) < num_heads makes it grouped-query attention (Ainslie et
    al., 2023; multi-query with 1): k_proj and v_proj project to num_kv_heads heads only, and
    each group of num_heads / num_kv_heads query heads shares one of them (query head h uses
    kv head h // (num_heads / num_kv_heads), as PyTorch's and Hugging Face's do), so the
    key/value cache holds num_heads / num_kv_heads times fewer numbers.
    `score` (a module from transformer/scores.py, sized for d_head) replaces the scaled dot
    product.  fused=True computes attention as one op (see scaled_dot_product_attention).  forward returns the output only (PyTorch's returns (output, weights)); the last
    attention weights are available, detached, as `self.attn_weights` (B, H, T_q, T_k) for plotting.
    """

    def __init__(self, d_model, num_heads, dropout=0.0, bias=True, score=None, fused=False, num_kv_heads=None):
        super().__init__()
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        require_positive("MultiHeadAttention", d_model=d_model, num_heads=num_heads, num_kv_heads=num_kv_heads)
        if d_model % num_heads:
            raise ValueError(f"MultiHeadAttention: d_model={d_model} is not divisible by num_heads={num_heads}")
        check_kv_heads("MultiHeadAttention", num_heads, num_kv_heads)
        if num_kv_heads != num_heads and score is not None and not hasattr(score, "rotate_queries_and_keys"):
            raise ValueError(f"MultiHeadAttention: grouped-query attention (num_kv_heads={num_kv_heads} < num_heads="
                             f"{num_heads}) takes the scaled dot product or RoPE, not the score {type(score).__name__}")
        self.d_model, self.num_heads, self.d_head = d_model, num_heads, d_model // num_heads
        self.num_kv_heads = num_kv_heads
        self.dropout = dropout
        self.score = score            # None: scaled dot product; else a module from transformer/scores.py
        self.fused = fused
        self.q_proj = nn.Linear(d_model, d_model, bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.d_head, bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.d_head, bias)
        self.out_proj = nn.Linear(d_model, d_model, bias)
        self._weights = self._weights_from = None     # see attn_weights
        if score is not None:
            check_cache_consistency(score, num_heads, self.d_head)

    @property
    def attn_weights(self):
        """The last forward's attention weights (B, H, T_q, T_k), detached, for plotting.  The
        fused op keeps no weights, so after it they are recomputed, on first access, from
        that forward's queries, keys and mask."""
        if self._weights is None and self._weights_from is not None:
            self._weights = attention_weights(*self._weights_from)
        return self._weights

    def _split_heads(self, x):
        # BEGIN EXERCISE heads
        batch, length, _ = x.shape                                   # (B, T, d_model)
        x = x.reshape(batch, length, self.num_heads, self.d_head)    # (B, T, H, d_head)
        return x.transpose(1, 2)                                     # (B, H, T, d_head)
        # END EXERCISE

    def _split_kv_heads(self, x):
        """Keys or values (B, T, num_kv_heads d_head) -> (B, num_kv_heads, T, d_head) with fewer
        kv heads than heads, split by _split_heads itself (the heads exercise's region, so that
        no second split answers it), as the split of an attention of num_kv_heads heads of
        d_head: what it reads of self (num_heads, d_head, d_model) given those numbers."""
        kv_heads = types.SimpleNamespace(num_heads=self.num_kv_heads, d_head=self.d_head,
                                         d_model=self.num_kv_heads * self.d_head)
        return type(self)._split_heads(kv_heads, x)                                        # (B, KV, T, d_head)

    def _merge_heads(self, x):
        # BEGIN EXERCISE heads
        batch, _, length, _ = x.shape                                # (B, H, T, d_head)
        x = x.transpose(1, 2)                                        # (B, T, H, d_head)
        return x.reshape(batch, length, self.d_model)                # (B, T, d_model): heads side by side
        # END EXERCISE

    def forward(self, query, key, value, mask=None, kv_cache=None, static_kv=False):
        """Each query position's attention over the key/value positions, in num_heads heads:
        project q, k and v and split them into heads, attend (scaled_dot_product_attention),
        merge the heads and project back: (B, T_q, d_model).  For step-by-step generation,
        kv_cache (a dict, empty at the first step) keeps the keys and values of the positions
        so far, and static_kv projects a fixed memory's once (_keys_and_values); RoPE and a
        position-aware score get the positions they need in _with_positions."""
        if query.shape[-1] != self.d_model or key.shape[-1] != self.d_model or value.shape[-1] != self.d_model:
            raise ValueError(f"MultiHeadAttention(d_model={self.d_model}): got query {query.shape}, "
                             f"key {key.shape}, value {value.shape}; each needs last dim {self.d_model}")
        q = self._split_heads(self.q_proj(query))                    # (B, H, T_q, d_head)
        k, v, past = self._keys_and_values(key, value, kv_cache, static_kv)   # (B, KV, T_k, d_head) each
        q, k, score = self._with_positions(q, k, past)
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout, self.training, score=score,
                                                    fused=self.fused, enable_gqa=self.num_kv_heads != self.num_heads)
        self._keep_weights(weights, q, k, mask)
        return self.out_proj(self._merge_heads(out))                   # (B, T_q, d_model)

    def _keys_and_values(self, key, value, kv_cache, static_kv):
        """(k, v, past): the keys and values projected and split into KV = num_kv_heads heads,
        (B, KV, T_k, d_head) each, and past, the number of positions cached before this call.
        In step-by-step generation (kv_cache given) the new positions' keys and values are
        appended to the cached ones, and the cache keeps the result for the next call; with
        static_kv, a cache filled once is the whole answer (cross-attention's fixed memory)."""
        past = 0
        if static_kv and kv_cache:
            k, v = kv_cache["k"], kv_cache["v"]                      # projected at the first call
        else:
            split = self._split_heads if self.num_kv_heads == self.num_heads else self._split_kv_heads
            k, v = split(self.k_proj(key)), split(self.v_proj(value))   # (B, KV, T_k, d_head)
            # BEGIN EXERCISE kv_cache
            if kv_cache is not None:
                if "k" in kv_cache:
                    past = kv_cache["k"].shape[2]
                    k = cat([kv_cache["k"], k], dim=2)               # (B, H, T_past + T_k, d_head)
                    v = cat([kv_cache["v"], v], dim=2)
                kv_cache["k"], kv_cache["v"] = k, v
            # END EXERCISE
        return k, v, past

    def _with_positions(self, q, k, past):
        """(q, k, score) with the positions put in, for a score that needs them: RoPE rotates
        the queries and keys (then the scaled dot product scores them); a position-aware score
        (transformer/relative_position.py) is told the queries' first position, past.  Any
        other score, the GPT's scaled dot product included, is left as it is."""
        score = self.score
        if hasattr(score, "rotate_queries_and_keys"):    # RoPE: rotate q and k, then attend as usual
            (q, k), score = score.rotate_queries_and_keys(q, k, past), None
        elif is_position_aware(score):
            score = functools.partial(self.score, q_offset=past)
        return q, k, score

    def _keep_weights(self, weights, q, k, mask):
        """Keep what attn_weights shows: the weights, detached, or, after the fused op (which
        makes none), what recomputes them when they are asked for."""
        self._weights = None if weights is None else weights.data                    # (B, H, T_q, T_k), no graph
        self._weights_from = None if weights is not None else (q.data, k.data, None if mask is None else np.asarray(mask))

    def extra_repr(self):
        kv = f", num_kv_heads={self.num_kv_heads}" if self.num_kv_heads != self.num_heads else ""
        return f"d_model={self.d_model}, num_heads={self.num_heads}{kv}, dropout={self.dropout}" + (
            ", fused" if self.fused else "")
