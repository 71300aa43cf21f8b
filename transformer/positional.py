"""Positional encodings: attention itself is blind to order, so each position adds a
vector that says where it is."""

import numpy as np

import nn
from autograd import Tensor


def sinusoidal_table(max_len, d_model):
    """(max_len, d_model): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same).
    Each pair of dims is a rotation at its own frequency, so PE[pos + k] is a linear
    function of PE[pos] and dot products depend on the distance between positions."""
    pos = np.arange(max_len)[:, None]                                # (max_len, 1)
    freq = 1.0 / 10000 ** (np.arange(0, d_model, 2) / d_model)       # (ceil(d/2),)
    table = np.zeros((max_len, d_model))
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq[: d_model // 2])
    return table


def binary_table(max_len, d_model):
    """(max_len, d_model): position written in binary, bit i in dim i, as +-1.  The
    intuitive encoding whose smooth version is the sinusoidal one (the lowest bit flips
    fastest, like the highest frequency)."""
    pos = np.arange(max_len)[:, None]
    bits = (pos >> np.arange(d_model)[None, :]) & 1
    return 2.0 * bits - 1.0


class PositionalEncoding(nn.Module):
    """x + PE[:T], then dropout.  x: (B, T, d_model) embeddings, already scaled by sqrt(d_model).
    kind: "sinusoidal" (fixed, the paper's) or "binary" (fixed)."""

    def __init__(self, d_model, max_len=512, dropout=0.0, kind="sinusoidal"):
        super().__init__()
        tables = {"sinusoidal": sinusoidal_table, "binary": binary_table}
        if kind not in tables:
            raise ValueError(f"PositionalEncoding: kind must be one of {sorted(tables)}, got {kind!r}")
        self.kind, self.max_len, self.d_model = kind, max_len, d_model
        self.table = tables[kind](max_len, d_model)   # float64, a constant; cast to the input's dtype
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, offset=0):
        """offset: the position of x's first element (when generating one token at a time)."""
        end = _check_length(x, self.max_len, self.d_model, type(self).__name__, offset)
        return self.dropout(x + Tensor._make(self.table[offset:end].astype(x.dtype, copy=False), None))

    def extra_repr(self):
        return f"d_model={self.d_model}, max_len={self.max_len}, kind={self.kind!r}"


class LearnedPositionalEncoding(nn.Module):
    """x + P[:T] with P a trained (max_len, d_model) Parameter, then dropout."""

    def __init__(self, d_model, max_len=512, dropout=0.0, generator=None, dtype=np.float32):
        super().__init__()
        self.max_len, self.d_model = max_len, d_model
        self.weight = nn.Parameter(nn.init.normal((max_len, d_model), 0.02, generator, dtype))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, offset=0):
        end = _check_length(x, self.max_len, self.d_model, type(self).__name__, offset)
        return self.dropout(x + self.weight[offset:end])

    def extra_repr(self):
        return f"d_model={self.d_model}, max_len={self.max_len}"


def _check_length(x, max_len, d_model, name, offset=0):
    """The end position offset + seq_len, checked against the table."""
    if x.ndim != 3 or x.shape[-1] != d_model:
        raise ValueError(f"{name}: expected input (batch, seq, {d_model}), got {x.shape}")
    end = offset + x.shape[1]
    if end > max_len:
        raise ValueError(f"{name}: sequence length {end} exceeds the table's max_len {max_len}")
    return end

