"""The encoder-decoder Transformer of "Attention Is All You Need", on our own engine."""

import dataclasses
import math

import numpy as np

import nn
from autograd import Tensor
from transformer.config import BlockConfig
from transformer.kv_cache import KVCache
from transformer.layers import Decoder, Encoder
from transformer.masks import decoder_mask, padding_mask
from transformer.positional import make_positional


@dataclasses.dataclass
class TransformerConfig(BlockConfig):
    """d_model, num_heads, d_ff, dropout, positional, dtype: see BlockConfig."""
    src_vocab: int
    tgt_vocab: int
    num_encoder_layers: int = 2
    num_decoder_layers: int = 2
    max_len: int = 64
    norm_first: bool = False          # False: post-norm as in the paper and the lectures
    tie_weights: bool = False         # share the target embedding and the output projection
    activation: str = "relu"
    pad_id: int = 0
    positional: str = dataclasses.field(default="sinusoidal", kw_only=True)   # the paper's

    positive_fields = ("src_vocab", "tgt_vocab", "num_encoder_layers", "num_decoder_layers", "max_len")


class Transformer(nn.Module):
    """Encoder-decoder Transformer.  Tokens are integer arrays, batch first:
    src (B, S), tgt_in (B, T) -> logits (B, T, tgt_vocab).

    Embeddings are multiplied by sqrt(d_model) before the positional encoding is added.
    Weight matrices are Xavier-uniform initialised, embeddings N(0, 1/d_model) so that the
    scaled embeddings have unit variance, like the positional encoding.
    """

    def __init__(self, config):
        super().__init__()
        self.config = c = config
        self.src_embed = nn.Embedding(c.src_vocab, c.d_model)
        self.tgt_embed = nn.Embedding(c.tgt_vocab, c.d_model)
        self.positional, make_self_score = make_positional(c.positional, c.d_model, c.num_heads, c.max_len,
                                                           c.dropout, c.score)
        fused = c.attention == "fused"
        self.encoder = Encoder(c.num_encoder_layers, c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first,
                               c.activation, make_self_score=make_self_score, fused_attention=fused)
        self.decoder = Decoder(c.num_decoder_layers, c.d_model, c.num_heads, c.d_ff, c.dropout, c.norm_first,
                               c.activation, make_self_score=make_self_score, fused_attention=fused)
        self.out_proj = nn.Linear(c.d_model, c.tgt_vocab)
        self._init_weights()
        if c.tie_weights:
            self.out_proj.weight = self.tgt_embed.weight
        self.to(c.dtype)

    def _init_weights(self):
        """Embeddings ~ N(0, 1/d_model), every Linear's weight Xavier-uniform; any other
        parameter (a learned position table or bias, LayerNorm) keeps its own init."""
        linear_weights = {f"{name}.weight" for name, m in self.named_modules() if isinstance(m, nn.Linear)}
        for name, p in self.named_parameters():
            if name.endswith("embed.weight"):
                p.data = nn.init.normal(p.shape, self.config.d_model ** -0.5)
            elif name in linear_weights:
                p.data = nn.init.xavier_uniform(p.shape)

    def _embed(self, table, tokens, offset=0):
        return self.positional(table(tokens) * math.sqrt(self.config.d_model), offset)   # (B, T, d_model)

    def make_src_mask(self, src):
        return padding_mask(src, self.config.pad_id)               # (B, 1, 1, S)

    def make_tgt_mask(self, tgt_in):
        return decoder_mask(tgt_in, self.config.pad_id)            # (B, 1, T, T)

    def encode(self, src, src_mask=None):
        """src (B, S) -> memory (B, S, d_model)."""
        src = _tokens(src)
        src_mask = self.make_src_mask(src) if src_mask is None else src_mask
        return self.encoder(self._embed(self.src_embed, src), src_mask)

    def decode(self, tgt_in, memory, src_mask, tgt_mask=None, cache=None):
        """tgt_in (B, T), memory (B, S, d_model) -> logits (B, T, tgt_vocab).

        cache: for token-by-token decoding, a KVCache kept between calls (new_cache()).  Then
        tgt_in holds only the new tokens, at positions len(cache) onwards; each layer keeps
        its self-attention keys and values and the memory's projections, so a step costs
        O(t) instead of rerunning the whole prefix.  The cache also remembers which positions
        were padding, so the masks, and the logits, are those of the full run."""
        tgt_in = _tokens(tgt_in)
        past = 0 if cache is None else len(cache)
        if cache is not None:
            mask_so_far = cache.extend(tgt_in != self.config.pad_id)    # (B, 1, T, past + T), None: every key
            tgt_mask = mask_so_far if tgt_mask is None else tgt_mask
        elif tgt_mask is None:
            tgt_mask = self.make_tgt_mask(tgt_in)
        h = self.decoder(self._embed(self.tgt_embed, tgt_in, past), memory, tgt_mask, src_mask, cache)
        return self.out_proj(h)

    def new_cache(self):
        """An empty KVCache for token-by-token decoding (decode's cache)."""
        return KVCache(len(self.decoder.layers))

    def forward(self, src, tgt_in, src_mask=None, tgt_mask=None):
        """Teacher-forced logits for every target position: (B, T, tgt_vocab)."""
        src = _tokens(src)
        if np.shape(tgt_in)[0] != src.shape[0]:
            raise ValueError(f"Transformer: source batch {src.shape} and target batch {np.shape(tgt_in)} differ in "
                             "batch size; each source row needs its own target row")
        src_mask = self.make_src_mask(src) if src_mask is None else src_mask
        return self.decode(tgt_in, self.encode(src, src_mask), src_mask, tgt_mask)

    def attention_maps(self):
        """{name: (B, H, T_q, T_k)} of the last forward pass, for plotting."""
        return {name: m.attn_weights for name, m in self.named_modules()
                if hasattr(m, "attn_weights") and m.attn_weights is not None}


def _tokens(tokens):
    tokens = tokens.data if isinstance(tokens, Tensor) else np.asarray(tokens)
    if tokens.ndim != 2 or not np.issubdtype(tokens.dtype, np.integer):
        raise ValueError(f"Transformer: token ids must be an integer array (batch, seq), got "
                         f"shape {tokens.shape} dtype {tokens.dtype}")
    return tokens
