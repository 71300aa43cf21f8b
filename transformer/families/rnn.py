"""Attention before the Transformer: a GRU encoder-decoder, with and without attention.

Without attention the decoder sees the source only through the encoder's last hidden
state: one vector must carry the whole sequence (the bottleneck).  With attention, at
every step the decoder's state is the query, the encoder's states are keys and values,
and the resulting context vector joins the decoder's input (Bahdanau et al., 2015).

The models share the Transformer's interface (make_src_mask, encode, decode, forward), so
the same training loop and greedy decoding run them.
"""

import dataclasses

import numpy as np

import nn
from autograd import Tensor, cat, stack, where
from transformer.attention import scaled_dot_product_attention
from transformer.scores import make_score


class GRUCell(nn.Module):
    """One step of a gated recurrent unit (PyTorch's equations):
        r = sigmoid(W_ir x + W_hr h + b_r)          reset gate
        z = sigmoid(W_iz x + W_hz h + b_z)          update gate
        n = tanh(W_in x + b_in + r * (W_hn h + b_hn))
        h' = (1 - z) * n + z * h
    Every operation is one of the engine's ops, so backpropagation through time is just
    backpropagation through the unrolled graph."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        self.input_proj = nn.Linear(input_size, 3 * hidden_size)    # [W_ir; W_iz; W_in] x + biases
        self.hidden_proj = nn.Linear(hidden_size, 3 * hidden_size)  # [W_hr; W_hz; W_hn] h + biases

    def forward(self, x, h, projected_x=None):
        """x (B, input_size), h (B, hidden) -> h' (B, hidden).  projected_x may hand in
        input_proj(x) computed for all time steps at once."""
        H = self.hidden_size
        xp = self.input_proj(x) if projected_x is None else projected_x    # (B, 3H)
        hp = self.hidden_proj(h)                                           # (B, 3H)
        r = (xp[:, :H] + hp[:, :H]).sigmoid()
        z = (xp[:, H:2 * H] + hp[:, H:2 * H]).sigmoid()
        n = (xp[:, 2 * H:] + r * hp[:, 2 * H:]).tanh()
        return (1 - z) * n + z * h

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}"


class GRU(nn.Module):
    """A GRUCell unrolled over a batch-first sequence.  Where `valid` is False (padding)
    the state is carried over unchanged, so the final state is the one after each
    sequence's last real token."""

    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = GRUCell(input_size, hidden_size)

    def forward(self, x, h0=None, valid=None):
        """x (B, T, input_size) -> outputs (B, T, hidden), last state (B, hidden)."""
        batch, steps, _ = x.shape
        h = h0 if h0 is not None else Tensor(np.zeros((batch, self.cell.hidden_size), x.dtype))
        projected = self.cell.input_proj(x)                                # (B, T, 3H), all steps at once
        outputs = []
        for t in range(steps):
            h_new = self.cell(None, h, projected_x=projected[:, t])
            h = h_new if valid is None else where(valid[:, t:t + 1], h_new, h)
            outputs.append(h)
        return stack(outputs, dim=1), h


@dataclasses.dataclass
class RNNConfig:
    src_vocab: int
    tgt_vocab: int
    embed_dim: int = 32
    hidden_size: int = 64
    attention: str = None        # None (no attention) or a score name: "dot", "scaled_dot", "cosine", "additive", "bilinear"
    pad_id: int = 0


class RNNEncoderDecoder(nn.Module):
    """GRU encoder and GRU decoder; with config.attention set, the decoder attends over the
    encoder's states at every step (query: the decoder's state before the step)."""

    def __init__(self, config):
        super().__init__()
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab, c.embed_dim)
        self.tgt_embed = nn.Embedding(c.tgt_vocab, c.embed_dim)
        self.encoder = GRU(c.embed_dim, c.hidden_size)
        context = c.hidden_size if c.attention else 0
        self.decoder_cell = GRUCell(c.embed_dim + context, c.hidden_size)
        self.score = make_score(c.attention, c.hidden_size, c.hidden_size) if c.attention else None
        self.out_proj = nn.Linear(c.hidden_size + context, c.tgt_vocab)
        self.attn_weights = None     # (B, T, S) of the last decode, for plotting

    def make_src_mask(self, src):
        return np.asarray(src) != self.config.pad_id                      # (B, S)

    def encode(self, src, src_mask=None):
        """-> (encoder states (B, S, H), final state (B, H))."""
        src_mask = self.make_src_mask(src) if src_mask is None else src_mask
        return self.encoder(self.src_embed(src), valid=src_mask)

    def new_cache(self):
        """What token-by-token decoding keeps between calls: the decoder's hidden state (a
        dict, empty before the first token).  An RNN needs no keys and values: its state
        already sums up the prefix."""
        return {}

    def decode(self, tgt_in, memory, src_mask, cache=None):
        """Teacher-forced decoding of tgt_in (B, T) -> logits (B, T, tgt_vocab).  cache: from
        new_cache(), kept between calls for token-by-token decoding; it holds the decoder's
        state after the tokens fed so far, and tgt_in continues from there."""
        states, h = memory                                                # (B, S, H), (B, H)
        if cache is not None and "h" in cache:
            h = cache["h"]
        embedded = self.tgt_embed(tgt_in)                                 # (B, T, E)
        key_mask = np.asarray(src_mask)[:, None, :]                       # (B, 1, S)
        outputs, weights = [], []
        for t in range(embedded.shape[1]):
            x = embedded[:, t]                                            # (B, E)
            if self.score is not None:
                context, w = scaled_dot_product_attention(h.unsqueeze(1), states, states, key_mask,
                                                          score=self.score)    # (B, 1, H), (B, 1, S)
                context = context.squeeze(1)
                weights.append(w.data[:, 0])
                h = self.decoder_cell(cat([x, context], dim=-1), h)
                outputs.append(cat([h, context], dim=-1))
            else:
                h = self.decoder_cell(x, h)
                outputs.append(h)
        self.attn_weights = np.stack(weights, axis=1) if weights else None
        if cache is not None:
            cache["h"] = h
        return self.out_proj(stack(outputs, dim=1))                       # (B, T, V)

    def forward(self, src, tgt_in, src_mask=None, tgt_mask=None):
        src_mask = self.make_src_mask(src) if src_mask is None else src_mask
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask)
