"""The Transformer on our own engine, in four rooms.

This package is the model core: attention and its score functions, positions, masks, the
key/value cache, the layers, the encoder-decoder, decoding and the config checks.  Around
it: `transformer.families` (the GPT, encoder-only, ViT and RNN models built from these
blocks), `transformer.data` (toy tasks, SCAN, text, BPE; no model imported) and
`transformer.training` (the one loop, its jobs, checkpoints, nanoGPT interop).
Dependencies point one way: training -> families -> core, and data imports no model."""

from transformer.attention import MultiHeadAttention, scaled_dot_product_attention
from transformer.encoder_decoder import Transformer, TransformerConfig
from transformer.layers import Decoder, DecoderLayer, Encoder, FeedForward, SelfAttentionStack, TransformerLayer
from transformer.masks import causal_mask, combine_masks, decoder_mask, padding_mask
from transformer.positional import LearnedPositionalEncoding, PositionalEncoding, binary_table, sinusoidal_table

__all__ = ["MultiHeadAttention", "scaled_dot_product_attention", "causal_mask", "combine_masks", "decoder_mask",
           "padding_mask", "LearnedPositionalEncoding", "PositionalEncoding", "binary_table", "sinusoidal_table",
           "Decoder", "DecoderLayer", "Encoder", "TransformerLayer", "FeedForward", "SelfAttentionStack", "Transformer",
           "TransformerConfig"]
