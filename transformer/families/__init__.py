"""The model families built from the core's blocks: a GPT (decoder-only), a BERT-style
encoder-only model, the Vision Transformer, and the RNN encoder-decoder with attention that
came before the Transformer.  Each is one module: its config dataclass and its nn.Module."""

from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig, gpt_config
from transformer.families.encoder_only import EncoderOnly, EncoderOnlyConfig
from transformer.families.rnn import RNNConfig, RNNEncoderDecoder
from transformer.families.vit import ViTConfig, VisionTransformer

__all__ = ["DecoderOnly", "DecoderOnlyConfig", "gpt_config", "EncoderOnly", "EncoderOnlyConfig", "RNNConfig",
           "RNNEncoderDecoder", "ViTConfig", "VisionTransformer"]
