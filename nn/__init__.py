"""Layers, losses, optimizers, schedules and checkpoints on the autograd engine, with
PyTorch's names: `nn.Linear`, `nn.functional.cross_entropy` (as F), `nn.optim.Adam`, ..."""

from nn.module import Module, Parameter, Sequential, ModuleList
from nn.layers import Linear, Embedding, LayerNorm, RMSNorm, Dropout, ReLU, GELU, SiLU
from nn import functional, init, optim, schedule
from nn.serialization import save, load, average_checkpoints

__all__ = ["Module", "Parameter", "Sequential", "ModuleList", "Linear", "Embedding", "LayerNorm", "RMSNorm",
           "Dropout", "ReLU", "GELU", "SiLU", "functional", "init", "optim", "schedule", "save", "load",
           "average_checkpoints"]
