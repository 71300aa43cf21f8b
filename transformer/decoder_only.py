"""A decoder-only (GPT-style) causal language model, generating with a key/value cache.

The same blocks as the encoder (self-attention and feed-forward, pre-norm), with a causal
mask so that position t sees only positions <= t: there is no encoder and no
cross-attention.  Trained to predict the next token, it generates by feeding its own
output back in.  With the key/value cache each new token attends to the stored keys and
values of the prefix instead of recomputing them, so a step costs O(t), not O(t^2).
"""

import dataclasses

import numpy as np

import nn
from autograd import no_grad
from transformer.layers import Encoder
from transformer.masks import combine_masks, padding_mask
from transformer.positional import LearnedPositionalEncoding


@dataclasses.dataclass
class DecoderOnlyConfig:
    vocab: int
    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 128
    num_layers: int = 2
    max_len: int = 32
    dropout: float = 0.0
    pad_id: int = 0


class DecoderOnly(nn.Module):
    """tokens (B, T) -> next-token logits (B, T, vocab)."""

    def __init__(self, config):
        super().__init__()
        self.config = c = config
        self.embed = nn.Embedding(c.vocab, c.d_model)
        self.positional = LearnedPositionalEncoding(c.d_model, c.max_len, c.dropout)
        self.blocks = Encoder(c.num_layers, c.d_model, c.num_heads, c.d_ff, c.dropout, norm_first=True)
        self.out_proj = nn.Linear(c.d_model, c.vocab)
        self.embed.weight.data *= c.d_model ** -0.5

    def forward(self, tokens, kv_caches=None, offset=0):
        """tokens (B, T) at positions offset..offset+T-1.  With kv_caches (one dict per layer,
        holding the keys and values of positions 0..offset-1) only the new tokens are run."""
        tokens = np.asarray(tokens)
        length = tokens.shape[1]
        # query i (absolute position offset + i) may attend to keys 0 .. offset + i
        mask = np.tril(np.ones((length, offset + length), dtype=bool), k=offset)
        if kv_caches is None:
            mask = combine_masks(mask, padding_mask(tokens, self.config.pad_id))
        h = self.positional(self.embed(tokens), offset)                    # (B, T, d_model)
        return self.out_proj(self.blocks(h, mask, kv_caches))              # (B, T, vocab)

    def generate(self, prompt, steps, use_cache=True, return_logits=False):
        """Greedily append `steps` tokens to each prompt (B, P) (no padding in prompts).
        Returns the (B, P + steps) tokens, and the logits of every generated step if asked."""
        tokens = np.asarray(prompt)
        step_logits = []
        with no_grad():
            caches = [{} for _ in self.blocks.layers] if use_cache else None
            new = tokens
            for _ in range(steps):
                if use_cache:
                    logits = self(new, caches, offset=tokens.shape[1] - new.shape[1])
                else:
                    logits = self(tokens)
                last = logits.data[:, -1]                                  # (B, vocab)
                step_logits.append(last)
                new = last.argmax(-1)[:, None]
                tokens = np.concatenate([tokens, new], axis=1)
        return (tokens, np.stack(step_logits, axis=1)) if return_logits else tokens


# ----- the sort task: read 6 digits from {0, 1, 2}, write them sorted -----

PAD, BOS, SEP = 0, 1, 2
DIGIT0 = 3


def sort_dataset(length=6, digits=3, heldout_fraction=0.2, seed=0):
    """Every sequence of `length` digits, split by a seeded shuffle into train and held-out.
    Each row is BOS x1..xn SEP sorted(x)1..n."""
    grid = np.stack(np.meshgrid(*[np.arange(digits)] * length, indexing="ij"), -1).reshape(-1, length)
    rows = np.concatenate([np.full((len(grid), 1), BOS), grid + DIGIT0, np.full((len(grid), 1), SEP),
                           np.sort(grid, axis=1) + DIGIT0], axis=1)
    order = np.random.default_rng(seed).permutation(len(rows))
    cut = int(len(rows) * heldout_fraction)
    return rows[order[cut:]], rows[order[:cut]]


def lm_batch(rows, length):
    """Inputs and next-token targets; only the answer positions (after SEP) count."""
    inputs, targets = rows[:, :-1], rows[:, 1:].copy()
    targets[:, :length + 1] = -100                     # the input digits and SEP are not predicted
    return inputs, targets


def sort_accuracy(model, rows, length):
    """Exact-match accuracy of greedy, cached generation of the sorted answer."""
    prompt = rows[:, :length + 2]                      # BOS x1..xn SEP
    out = model.generate(prompt, length)
    return float(np.mean((out[:, length + 2:] == rows[:, length + 2:]).all(axis=1)))

