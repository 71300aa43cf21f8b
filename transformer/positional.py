"""Positional encodings: attention itself is blind to order, so each position adds a
vector that says where it is.

`make_positional(kind, ...)` builds any of the schemes by name, for every model's
`positional` option: "sinusoidal", "binary" and "learned" add a vector to each embedding;
"rope", "alibi" and "relative" leave the embeddings alone and put positions into every
self-attention's scores (transformer/relative_position.py); "none" gives no positions at
all, so that self-attention sees a bag of tokens (see demos/positional_encoding.py).
"""

import numpy as np

import nn
from autograd import as_tensor
from transformer.relative_position import ATTENTION_POSITIONS, position_score_factory
from transformer.scores import make_score

ADDED_ENCODINGS = ("sinusoidal", "binary", "learned", "none")
POSITIONAL_KINDS = ADDED_ENCODINGS + ATTENTION_POSITIONS


def sinusoidal_table(max_len, d_model):
    """(max_len, d_model): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same).
    Each pair of dims is a rotation at its own frequency, so PE[pos + k] is a linear
    function of PE[pos] and dot products depend on the distance between positions."""
    # BEGIN EXERCISE sinusoidal
    pos = np.arange(max_len)[:, None]                                # (max_len, 1)
    freq = 1.0 / 10000 ** (np.arange(0, d_model, 2) / d_model)       # (ceil(d/2),)
    table = np.zeros((max_len, d_model))
    table[:, 0::2] = np.sin(pos * freq)
    table[:, 1::2] = np.cos(pos * freq[: d_model // 2])
    # END EXERCISE
    return table


def binary_table(max_len, d_model):
    """(max_len, d_model): position written in binary, bit i in dim i, as +-1.  The
    intuitive encoding whose smooth version is the sinusoidal one (the lowest bit flips
    fastest, like the highest frequency)."""
    pos = np.arange(max_len)[:, None]
    bits = (pos >> np.arange(d_model)[None, :]) & 1
    return 2.0 * bits - 1.0


# ----- the naive schemes the lecture rules out, for the demo that shows why -----

def integer_table(length, d_model):
    """Every dimension holds the position number 0, 1, 2, ... (grows without bound)."""
    return np.repeat(np.arange(length, dtype=float)[:, None], d_model, axis=1)


def one_hot_table(length, d_model):
    """Position p is the unit vector e_p: only d_model positions exist."""
    if length > d_model:
        raise ValueError(f"one-hot positions: a {d_model}-dim code has no vector for positions {d_model}..{length - 1}")
    return np.eye(length, d_model)


def scaled_table(length, d_model):
    """Position p of a sentence of `length` as p / (length - 1), in [0, 1]."""
    return np.repeat((np.arange(length) / max(length - 1, 1))[:, None], d_model, axis=1)


def encoding_criteria(table, d_model=16, lengths=(8, 16, 32)):
    """The lecture's four criteria, measured for table(length, d_model) on sentences of the
    given lengths: unique codes, deterministic, one distance between neighbours (the same
    in every sentence), and generalising to longer sentences (a code exists, and stays in
    the range seen in the shortest sentence, with earlier positions unchanged)."""
    codes, defined = {}, True
    for n in lengths:
        try:
            codes[n] = table(n, d_model)
        except ValueError:
            defined = False
    present = [codes[n] for n in lengths if n in codes]
    steps = np.concatenate([np.linalg.norm(np.diff(c, axis=0), axis=1) for c in present])
    shortest, longest = present[0], present[-1]
    return {
        "unique": all(len(np.unique(c.round(12), axis=0)) == len(c) for c in present),
        "deterministic": all(np.array_equal(table(n, d_model), codes[n]) for n in codes),
        "same neighbour distance": bool(np.ptp(steps) < 1e-9),
        "generalises to longer": defined and bool(np.abs(longest).max() <= np.abs(shortest).max() + 1e-9)
                                 and np.allclose(longest[:len(shortest)], shortest),
    }


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
        return self.dropout(x + as_tensor(self.table[offset:end].astype(x.dtype, copy=False)))

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


class NoPositionalEncoding(nn.Module):
    """Adds nothing (dropout only): the input encoding of models whose attention handles
    positions, or of a model that is to see no order at all."""

    def __init__(self, d_model, dropout=0.0):
        super().__init__()
        self.d_model = d_model
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, offset=0):
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"NoPositionalEncoding: expected input (batch, seq, {self.d_model}), got {x.shape}")
        return self.dropout(x)


def make_positional(kind, d_model, num_heads, max_len, dropout=0.0, score="scaled_dot", **rope):
    """(the module that encodes positions into the embeddings, a factory of self-attention
    score modules or None for the scaled dot product) for the scheme `kind`, one of
    POSITIONAL_KINDS. `score` names the self-attention's score function
    (transformer/scores.py: SCORES) for the schemes that add positions to the embeddings;
    the others (RoPE, ALiBi, relative bias) put positions into the score itself.  rope:
    rope_base, rope_pairing and rope_scaling, for kind "rope" (see RotaryScore)."""
    if kind not in POSITIONAL_KINDS:
        raise ValueError(f"positional must be one of {POSITIONAL_KINDS}, got {kind!r}")
    if kind in ADDED_ENCODINGS and score != "scaled_dot":
        d_head = d_model // num_heads
        encoding, _ = make_positional(kind, d_model, num_heads, max_len, dropout)
        return encoding, lambda: make_score(score, d_head, d_head)
    if kind == "learned":
        return LearnedPositionalEncoding(d_model, max_len, dropout), None
    if kind in ("sinusoidal", "binary"):
        return PositionalEncoding(d_model, max_len, dropout, kind=kind), None
    return NoPositionalEncoding(d_model, dropout), position_score_factory(kind, num_heads, d_model // num_heads, **rope)


def _check_length(x, max_len, d_model, name, offset=0):
    """The end position offset + seq_len, checked against the table."""
    if x.ndim != 3 or x.shape[-1] != d_model:
        raise ValueError(f"{name}: expected input (batch, seq, {d_model}), got {x.shape}")
    end = offset + x.shape[1]
    if end > max_len:
        raise ValueError(f"{name}: sequence length {end} exceeds the table's max_len {max_len}")
    return end

