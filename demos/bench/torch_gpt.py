"""The same GPT written in PyTorch, for the benchmarks' side-by-side runs (needs the optional
`bench` extra).  Its equations and parameter names are nanoGPT's, so `transformer.training.nanogpt`
moves weights between it and our DecoderOnly; attention is PyTorch's fused
`scaled_dot_product_attention` with is_causal=True, as nanoGPT uses.
"""

import math

import torch
from torch import nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        self.n_head, self.dropout = n_head, dropout
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x):
        batch, length, width = x.shape
        # BEGIN TWIN heads
        q, k, v = self.c_attn(x).split(width, dim=2)
        q, k, v = (t.view(batch, length, self.n_head, width // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).reshape(batch, length, width)))
        # END TWIN


class Block(nn.Module):
    def __init__(self, n_embd, n_head, dropout, bias):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, bias=bias)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout, bias)
        self.ln_2 = nn.LayerNorm(n_embd, bias=bias)
        self.mlp = nn.ModuleDict(dict(c_fc=nn.Linear(n_embd, 4 * n_embd, bias=bias),
                                      c_proj=nn.Linear(4 * n_embd, n_embd, bias=bias)))
        self.mlp_dropout = nn.Dropout(dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_dropout(self.mlp.c_proj(F.gelu(self.mlp.c_fc(self.ln_2(x)))))


class TorchGPT(nn.Module):
    """tokens (B, T) -> logits (B, T, vocab), nanoGPT's GPT with GPT-2 initialisation."""

    def __init__(self, vocab, block_size, n_layer, n_head, n_embd, dropout=0.0, bias=False):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab, n_embd), wpe=nn.Embedding(block_size, n_embd), drop=nn.Dropout(dropout),
            h=nn.ModuleList(Block(n_embd, n_head, dropout, bias) for _ in range(n_layer)),
            ln_f=nn.LayerNorm(n_embd, bias=bias)))
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1])
        x = self.transformer.drop(self.transformer.wte(tokens) + self.transformer.wpe(positions))
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))


def from_config(config):
    """A TorchGPT of the size of our gpt_config-style DecoderOnlyConfig."""
    return TorchGPT(config.vocab, config.max_len, config.num_layers, config.num_heads, config.d_model,
                    config.dropout, config.bias)


def load_numpy_state(model, state):
    """Load a nanoGPT-named dict of numpy arrays (transformer.training.nanogpt.to_nanogpt) into a TorchGPT."""
    model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()})
    return model
