"""The Transformer's blocks: position-wise feed-forward (the two-layer MLP, or Llama's gated
SwiGLU), the Transformer layer (self-attention then feed-forward; the encoder's and the
GPT's block), the decoder layer, and their stacks.

Each sub-layer (attention or feed-forward) is wrapped in a residual connection and a
LayerNorm.  Post-norm, the paper's and the lectures' default:  x = LayerNorm(x + Dropout(sublayer(x))).
Pre-norm (norm_first=True), which trains more easily when deep:  x = x + Dropout(sublayer(LayerNorm(x))),
with a final LayerNorm after the stack.  norm="rms_norm" puts RMSNorm (Llama's) in
LayerNorm's place.
"""

import math

import numpy as np

import nn
from transformer.attention import MultiHeadAttention


class FeedForward(nn.Module):
    """The same two-layer MLP applied at every position: Linear(d_model, d_ff), activation,
    dropout, Linear(d_ff, d_model).  activation: a name of ACTIVATIONS ("gelu" is the exact,
    erf form; "gelu_tanh" GPT-2's approximation)."""

    ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "gelu_tanh": lambda: nn.GELU(approximate="tanh"), "silu": nn.SiLU}

    def __init__(self, d_model, d_ff, dropout=0.0, activation="relu", bias=True):
        super().__init__()
        if activation not in self.ACTIVATIONS:
            raise ValueError(f"FeedForward: activation must be one of {sorted(self.ACTIVATIONS)}, got {activation!r}")
        self.linear1 = nn.Linear(d_model, d_ff, bias)
        self.activation = self.ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(d_ff, d_model, bias)

    def forward(self, x):                                 # (B, T, d_model)
        return self.linear2(self.dropout(self.activation(self.linear1(x))))   # via (B, T, d_ff)


def swiglu_hidden_size(d_model, multiple_of=64):
    """Llama's hidden size for a SwiGLU of width d_model: 8/3 d_model (so its three matrices
    hold as many weights as the MLP's two of 4 d_model), rounded up to a multiple of
    `multiple_of`."""
    return multiple_of * math.ceil(8 * d_model / 3 / multiple_of)


class SwiGLU(nn.Module):
    """Llama's feed-forward (Shazeer, 2020): a gated MLP at every position,

        SwiGLU(x) = W2 (SiLU(W1 x) * W3 x)

    W1 x decides, through SiLU, how much of each hidden feature W3 x passes; W2 maps back to
    d_model.  d_ff=None: swiglu_hidden_size(d_model).  No biases by default (Llama has none)."""

    def __init__(self, d_model, d_ff=None, dropout=0.0, bias=False):
        super().__init__()
        d_ff = swiglu_hidden_size(d_model) if d_ff is None else d_ff
        self.w1 = nn.Linear(d_model, d_ff, bias)             # the gate
        self.w3 = nn.Linear(d_model, d_ff, bias)             # the value
        self.w2 = nn.Linear(d_ff, d_model, bias)             # back to the residual stream
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):                                 # (B, T, d_model)
        # W1 x and W3 x as two products: stacking W1 and W3 into one would copy both
        # matrices at every call, which costs more than the product itself for a few rows
        # (a generated token's)
        gate, value = self.w1(x), self.w3(x)               # (B, T, d_ff) each
        return self.w2(self.dropout(gate.silu() * value))  # (B, T, d_model)


FEED_FORWARDS = ("mlp", "swiglu")
NORMS = ("layer_norm", "rms_norm")


def make_feed_forward(kind, d_model, d_ff, dropout, activation, bias):
    """The feed-forward sub-layer: "mlp" (FeedForward, with `activation`) or "swiglu"."""
    if kind not in FEED_FORWARDS:
        raise ValueError(f"feed_forward must be one of {FEED_FORWARDS}, got {kind!r}")
    if kind == "swiglu":
        return SwiGLU(d_model, d_ff, dropout, bias)
    return FeedForward(d_model, d_ff, dropout, activation, bias)


def make_norm(kind, d_model, bias=True, eps=1e-5):
    """LayerNorm ("layer_norm"; bias=False leaves its shift out) or RMSNorm ("rms_norm"; it
    has no shift).  eps is added to the variance (or mean square) under the square root:
    1e-5 by default, as PyTorch's LayerNorm and Llama 2's RMSNorm; 1e-6 in most Llamas since."""
    if kind not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {kind!r}")
    return nn.LayerNorm(d_model, eps=eps, bias=bias) if kind == "layer_norm" else nn.RMSNorm(d_model, eps=eps)


class Residual(nn.Module):
    """Residual connection around a sub-layer, with a norm before (pre-norm) or after (post-norm)."""

    def __init__(self, d_model, dropout, norm_first, bias=True, norm="layer_norm", norm_eps=1e-5):
        super().__init__()
        self.norm = make_norm(norm, d_model, bias, norm_eps)
        self.dropout = nn.Dropout(dropout)
        self.norm_first = norm_first

    def forward(self, x, sublayer):
        if self.norm_first:
            return x + self.dropout(sublayer(self.norm(x)))
        return self.norm(x + self.dropout(sublayer(x)))


def add_biases(*linears):
    """Give each bias-free nn.Linear a zero bias (a Parameter of its out_features)."""
    for linear in linears:
        linear.bias = nn.Parameter(np.zeros(linear.out_features, linear.weight.dtype))


class TransformerLayer(nn.Module):
    """Self-attention, then feed-forward: the slides' "Transformer layer", the block of the
    encoder (every source position looks at every other) and, under a causal mask, of the
    GPT (each position looks at itself and those before it).
    self_score: the self-attention's score module (None: scaled dot product), e.g. one of
    transformer/relative_position.py's, which put positions into attention.  num_kv_heads:
    grouped-query self-attention (see MultiHeadAttention; None: as many as num_heads).
    norm_eps: the norms' eps (make_norm).  qkv_bias: biases on the query, key and value
    projections even when bias is False (Qwen2's attention: no other Linear has one)."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False, activation="relu", bias=True,
                 self_score=None, fused_attention=False, norm="layer_norm", feed_forward="mlp", num_kv_heads=None, *,
                 norm_eps=1e-5, qkv_bias=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, bias, score=self_score, fused=fused_attention,
                                            num_kv_heads=num_kv_heads)
        if qkv_bias and not bias:
            add_biases(self.self_attn.q_proj, self.self_attn.k_proj, self.self_attn.v_proj)
        self.feed_forward = make_feed_forward(feed_forward, d_model, d_ff, dropout, activation, bias)
        self.sublayer1 = Residual(d_model, dropout, norm_first, bias, norm, norm_eps)
        self.sublayer2 = Residual(d_model, dropout, norm_first, bias, norm, norm_eps)

    def forward(self, x, mask=None, kv_cache=None):       # (B, S, d_model)
        """kv_cache: see MultiHeadAttention (used when a causal stack generates token by token)."""
        x = self.sublayer1(x, lambda h: self.self_attn(h, h, h, mask, kv_cache))
        return self.sublayer2(x, self.feed_forward)


class DecoderLayer(nn.Module):
    """Masked self-attention (each target position sees only earlier ones), then
    encoder-decoder (cross) attention with queries from the decoder and keys and values
    from the encoder's output (`memory`), then feed-forward.  self_score as in TransformerLayer
    (cross-attention keeps the scaled dot product: its queries and keys index different
    sequences)."""

    def __init__(self, d_model, num_heads, d_ff, dropout=0.0, norm_first=False, activation="relu", bias=True,
                 self_score=None, fused_attention=False):
        super().__init__()
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout, bias, score=self_score, fused=fused_attention)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout, bias, fused=fused_attention)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation, bias)
        self.sublayer1 = Residual(d_model, dropout, norm_first, bias)
        self.sublayer2 = Residual(d_model, dropout, norm_first, bias)
        self.sublayer3 = Residual(d_model, dropout, norm_first, bias)

    def forward(self, x, memory, tgt_mask=None, memory_mask=None, self_cache=None, cross_cache=None):
        """x (B, T, d), memory (B, S, d).  self_cache, cross_cache: for token-by-token decoding,
        this layer's dicts of a KVCache: the self-attention's keys and values so far, and the
        memory's, projected once."""
        x = self.sublayer1(x, lambda h: self.self_attn(h, h, h, tgt_mask, self_cache))
        x = self.sublayer2(x, lambda h: self.cross_attn(h, memory, memory, memory_mask, cross_cache, static_kv=True))
        return self.sublayer3(x, self.feed_forward)


class SelfAttentionStack(nn.Module):
    """num_layers self-attention blocks (TransformerLayer: self-attention, then feed-forward),
    plus a final LayerNorm when pre-norm.  The encoder of the encoder-decoder is one
    (Encoder); so is the body of the encoder-only, decoder-only (with a causal mask) and
    Vision Transformer models.  make_self_score: None, or a zero-argument function giving
    each layer its own self-attention score module.  fused_attention: every attention as one
    op (MultiHeadAttention's fused).  norm, feed_forward: see make_norm, make_feed_forward.
    num_kv_heads, norm_eps, qkv_bias: see TransformerLayer."""

    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0, norm_first=False, activation="relu",
                 bias=True, make_self_score=None, fused_attention=False, norm="layer_norm", feed_forward="mlp",
                 num_kv_heads=None, *, norm_eps=1e-5, qkv_bias=False):
        super().__init__()
        self.layers = nn.ModuleList(TransformerLayer(d_model, num_heads, d_ff, dropout, norm_first, activation, bias,
                                                     make_self_score and make_self_score(), fused_attention, norm,
                                                     feed_forward, num_kv_heads, norm_eps=norm_eps, qkv_bias=qkv_bias)
                                    for _ in range(num_layers))
        self.norm = make_norm(norm, d_model, bias, norm_eps) if norm_first else None

    def forward(self, x, mask=None, cache=None):
        """cache: a KVCache, for cached generation (see MultiHeadAttention)."""
        for i, layer in enumerate(self.layers):
            x = layer(x, mask, None if cache is None else cache.self_attention[i])
        return self.norm(x) if self.norm is not None else x


class Encoder(SelfAttentionStack):
    """The encoder of the encoder-decoder: a SelfAttentionStack over the source."""


class Decoder(nn.Module):
    """num_layers decoder layers (plus a final LayerNorm when pre-norm); make_self_score as in Encoder."""

    def __init__(self, num_layers, d_model, num_heads, d_ff, dropout=0.0, norm_first=False, activation="relu",
                 bias=True, make_self_score=None, fused_attention=False):
        super().__init__()
        self.layers = nn.ModuleList(DecoderLayer(d_model, num_heads, d_ff, dropout, norm_first, activation, bias,
                                                 make_self_score and make_self_score(), fused_attention)
                                    for _ in range(num_layers))
        self.norm = nn.LayerNorm(d_model, bias=bias) if norm_first else None

    def forward(self, x, memory, tgt_mask=None, memory_mask=None, cache=None):
        """cache: a KVCache, for token-by-token decoding."""
        for i, layer in enumerate(self.layers):
            x = layer(x, memory, tgt_mask, memory_mask, *((None, None) if cache is None else
                                                          (cache.self_attention[i], cache.cross_attention[i])))
        return self.norm(x) if self.norm is not None else x
