"""The Transformer on our own engine: attention, masks, positional encodings, encoder and
decoder blocks, the encoder-decoder model, decoding, toy tasks and training."""

from transformer.attention import MultiHeadAttention, scaled_dot_product_attention
from transformer.masks import causal_mask, combine_masks, decoder_mask, padding_mask
from transformer.positional import LearnedPositionalEncoding, PositionalEncoding, binary_table, sinusoidal_table
from transformer.layers import Decoder, DecoderLayer, Encoder, EncoderLayer, FeedForward, SelfAttentionStack
from transformer.model import Transformer, TransformerConfig

__all__ = ["MultiHeadAttention", "scaled_dot_product_attention", "causal_mask", "combine_masks", "decoder_mask",
           "padding_mask", "LearnedPositionalEncoding", "PositionalEncoding", "binary_table", "sinusoidal_table",
           "Decoder", "DecoderLayer", "Encoder", "EncoderLayer", "FeedForward", "SelfAttentionStack", "Transformer", "TransformerConfig"]
