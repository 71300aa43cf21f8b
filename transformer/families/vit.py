"""The Vision Transformer: an image is cut into patches, each patch becomes a token.

Each p x p patch is flattened and linearly projected to d_model; a learned <class> token is
prepended and learned position embeddings are added; an encoder stack (pre-norm) runs over
the tokens and the <class> token's final state is classified.
"""

import dataclasses

import numpy as np

import nn
from autograd import as_tensor, cat
from transformer.config import BlockConfig
from transformer.layers import Encoder
from transformer.positional import make_positional


def patchify(images, patch):
    """(B, H, W) -> (B, (H/p)(W/p), p*p): patches in row-major order, each flattened."""
    images = np.asarray(images)
    batch, height, width = images.shape
    if height % patch or width % patch:
        raise ValueError(f"patchify: image size {height}x{width} is not a multiple of the patch size {patch}")
    grid = images.reshape(batch, height // patch, patch, width // patch, patch)   # (B, gh, p, gw, p)
    return grid.transpose(0, 1, 3, 2, 4).reshape(batch, -1, patch * patch)


def unpatchify(patches, patch, height, width):
    """The inverse of patchify: (B, N, p*p) -> (B, H, W)."""
    patches = np.asarray(patches)
    batch = patches.shape[0]
    grid = patches.reshape(batch, height // patch, width // patch, patch, patch)  # (B, gh, gw, p, p)
    return grid.transpose(0, 1, 3, 2, 4).reshape(batch, height, width)


@dataclasses.dataclass
class ViTConfig(BlockConfig):
    """d_model, num_heads, d_ff, dropout, positional (over the patch sequence), dtype: see BlockConfig."""
    image_size: int = 16
    patch_size: int = 4
    num_classes: int = 4
    num_layers: int = 2

    positive_fields = ("image_size", "patch_size", "num_classes", "num_layers")


class VisionTransformer(nn.Module):
    """images (B, H, W) -> class logits (B, num_classes)."""

    def __init__(self, config):
        super().__init__()
        self.config = c = config
        num_patches = (c.image_size // c.patch_size) ** 2
        self.patch_embed = nn.Linear(c.patch_size ** 2, c.d_model)
        self.cls_token = nn.Parameter(nn.init.normal((1, 1, c.d_model), 0.02))
        self.positional, make_self_score = make_positional(c.positional, c.d_model, c.num_heads, num_patches + 1,
                                                           c.dropout, c.score)
        self.encoder = Encoder(c.num_layers, c.d_model, c.num_heads, c.d_ff, c.dropout, norm_first=True,
                               make_self_score=make_self_score, fused_attention=c.attention == "fused")
        self.head = nn.Linear(c.d_model, c.num_classes)
        self.to(c.dtype)

    def forward(self, images):
        patches = as_tensor(patchify(images, self.config.patch_size).astype(self.patch_embed.weight.dtype))
        tokens = self.patch_embed(patches)                                # (B, N, d_model)
        cls = self.cls_token.expand(tokens.shape[0], 1, self.config.d_model)
        h = self.positional(cat([cls, tokens], dim=1))                     # (B, N + 1, d_model)
        return self.head(self.encoder(h)[:, 0])                           # (B, num_classes)

    def cls_attention(self):
        """(B, H, N) attention of the <class> query over the patches in the last layer."""
        return self.encoder.layers[-1].self_attn.attn_weights[:, :, 0, 1:]
