"""The key/value cache: what a decoder keeps between the steps of token-by-token generation.

Generating token t with no cache reruns the whole prefix: t positions through every layer,
O(t^2) work for the sequence.  With the cache, each step runs only the new token; every
self-attention layer keeps the keys and values of the positions before it, and the new
token's query attends over those plus its own.  Both decoders use this one type: the
encoder-decoder's (which also keeps the memory's keys and values, projected once at the
first step, for cross-attention) and the decoder-only GPT's.
"""

import numpy as np

from transformer.masks import causal_mask, combine_masks


class KVCache:
    """Per layer, the self-attention's keys and values so far and the cross-attention's
    projected memory (dicts filled by MultiHeadAttention), and `key_mask`: which positions
    so far may be attended to (False at padding), (B, positions)."""

    def __init__(self, num_layers):
        self.self_attention = [{} for _ in range(num_layers)]
        self.cross_attention = [{} for _ in range(num_layers)]
        self.key_mask = None

    def __len__(self):
        """How many positions the cache holds."""
        return 0 if self.key_mask is None else self.key_mask.shape[1]

    def nbytes(self):
        """Bytes held by the cached keys and values, every layer's: 2 x layers x B x KV x T x
        d_head numbers, KV the attention's key/value heads (num_heads / num_kv_heads times
        fewer than a cache of every head under grouped-query attention)."""
        layers = self.self_attention + self.cross_attention
        return sum(entry[name].data.nbytes for entry in layers for name in ("k", "v") if name in entry)

    def extend(self, not_pad):
        """Take in the new positions' (B, T) may-attend flags; returns the mask of the new
        queries over every key so far, (B, 1, T, past + T): query i (position past + i)
        sees keys 0 .. past + i that are not padding.  None when it allows every key (a
        step of generation without padding: one new query, after every key): attention
        then skips the mask's work in every layer."""
        past, new = len(self), not_pad.shape[1]
        self.key_mask = not_pad if self.key_mask is None else np.concatenate([self.key_mask, not_pad], axis=1)
        causal = causal_mask(past + new)[past:]        # (T, past + T): the rows of the new positions
        mask = combine_masks(causal, self.key_mask[:, None, None, :])                  # (B, 1, T, past + T)
        return None if mask.all() else mask
