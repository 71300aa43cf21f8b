"""An encoder-only (BERT-style) model: representations from self-attention over the whole
sequence, pre-trained by masked-language modelling and fine-tuned to classify.

A <class> token is prepended to every sequence (transformer/data/toy_data.py's with_cls);
its final state summarises the sequence for the classification head.  The
masked-language-model head predicts the tokens hidden by toy_data's `mask_for_mlm` from
both sides of their context.
"""

import dataclasses

import numpy as np

import nn
from transformer.config import BlockConfig
from transformer.layers import Encoder
from transformer.masks import padding_mask
from transformer.positional import make_positional

@dataclasses.dataclass
class EncoderOnlyConfig(BlockConfig):
    """d_model, num_heads, d_ff, dropout, positional, dtype: see BlockConfig."""
    vocab: int
    num_classes: int = 2
    num_layers: int = 2
    max_len: int = 32
    pad_id: int = 0                   # the padding token (transformer/data/toy_data.py's PAD)

    positive_fields = ("vocab", "num_classes", "num_layers", "max_len")


class EncoderOnly(nn.Module):
    """tokens (B, T), each row starting with CLS -> states (B, T, d_model), MLM logits
    (B, T, vocab) or class logits (B, num_classes)."""

    def __init__(self, config):
        super().__init__()
        self.config = c = config
        self.embed = nn.Embedding(c.vocab, c.d_model)
        self.positional, make_self_score = make_positional(c.positional, c.d_model, c.num_heads, c.max_len,
                                                           c.dropout, c.score)
        self.encoder = Encoder(c.num_layers, c.d_model, c.num_heads, c.d_ff, c.dropout, norm_first=True,
                               make_self_score=make_self_score, fused_attention=c.attention == "fused")
        self.mlm_head = nn.Linear(c.d_model, c.vocab)
        self.cls_head = nn.Linear(c.d_model, c.num_classes)
        self.embed.weight.data *= c.d_model ** -0.5
        self.to(c.dtype)

    def encode(self, tokens):
        tokens = np.asarray(tokens)
        h = self.positional(self.embed(tokens))                         # (B, T, d_model)
        return self.encoder(h, padding_mask(tokens, self.config.pad_id))

    def mlm_logits(self, tokens):
        return self.mlm_head(self.encode(tokens))                       # (B, T, vocab)

    def classify(self, tokens):
        return self.cls_head(self.encode(tokens)[:, 0])                 # the <class> state -> (B, classes)

    def forward(self, tokens):
        return self.classify(tokens)

    def cls_attention(self):
        """(B, H, T) attention of the <class> query in the last layer, from the last pass."""
        return self.encoder.layers[-1].self_attn.attn_weights[:, :, 0, :]
