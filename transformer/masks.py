"""Attention masks.  Boolean, True = "may attend" (as in PyTorch's
scaled_dot_product_attention), broadcastable to (batch, heads, q_len, k_len)."""

import numpy as np

from autograd import Tensor


def causal_mask(length):
    """(T, T): query t may attend to keys 0..t only, so a decoder cannot look ahead."""
    # BEGIN EXERCISE causal_mask
    return np.tril(np.ones((length, length), dtype=bool))
    # END EXERCISE


def padding_mask(tokens, pad_id):
    """(B, 1, 1, T): every query may attend to every key that is not padding."""
    tokens = tokens.data if isinstance(tokens, Tensor) else np.asarray(tokens)
    return (tokens != pad_id)[:, None, None, :]


def combine_masks(*masks):
    """A key may be attended to only if every mask allows it (None masks are skipped)."""
    present = [np.asarray(m, dtype=bool) for m in masks if m is not None]
    if not present:
        return None
    out = present[0]
    for m in present[1:]:
        out = out & m
    return out


def decoder_mask(tgt_tokens, pad_id):
    """(B, 1, T, T): causal and not padding, for the decoder's self-attention."""
    length = np.shape(tgt_tokens)[1]
    return combine_masks(causal_mask(length), padding_mask(tgt_tokens, pad_id))
