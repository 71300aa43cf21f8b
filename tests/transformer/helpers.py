"""Tiny float64 models for gradient checks."""

import numpy as np

from autograd import manual_seed
from transformer import Transformer, TransformerConfig


def to_float64(module):
    for p in module.parameters():
        p.data = p.data.astype(np.float64)
    return module


def tiny_transformer(seed=0, **overrides):
    manual_seed(seed)
    config = dict(src_vocab=7, tgt_vocab=6, d_model=8, num_heads=2, d_ff=12, num_encoder_layers=1,
                  num_decoder_layers=1, max_len=16)
    config.update(overrides)
    return to_float64(Transformer(TransformerConfig(**config)))
