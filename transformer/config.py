"""Checks shared by the configuration dataclasses: a bad value is reported when the config
is made, by name, before any model or training state exists."""

import dataclasses

import numpy as np

from transformer.positional import ADDED_ENCODINGS, POSITIONAL_KINDS
from transformer.scores import SCORES

DTYPES = ("float32", "float64")
ATTENTION_KINDS = ("composed", "fused")


def require_positive(owner, **values):
    """Raise ValueError naming the first of `values` that is not an integer >= 1."""
    for name, value in values.items():
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{owner}: {name} must be an integer >= 1, got {value!r}")


def check_kv_heads(owner, num_heads, num_kv_heads):
    """Grouped-query attention's rule: the query heads split into groups of equal size, one
    per key/value head, so num_heads must be a multiple of num_kv_heads."""
    require_positive(owner, num_kv_heads=num_kv_heads)
    if num_heads % num_kv_heads:
        raise ValueError(f"{owner}: num_heads={num_heads} is not a multiple of num_kv_heads={num_kv_heads} "
                         "(each key/value head serves an equal group of query heads)")


def require(owner, name, value, ok, expected):
    """Raise ValueError naming the field when its value is not as expected:
    "TrainConfig: lr must be > 0, got -1.0"."""
    if not ok:
        raise ValueError(f"{owner}: {name} must be {expected}, got {value!r}")


def require_dtype(owner, dtype):
    if dtype not in DTYPES:
        raise ValueError(f"{owner}: dtype must be one of {DTYPES}, got {dtype!r}")


def check_model_config(config, *positive):
    """The fields every model config shares (d_model, num_heads, dropout, positional, dtype)
    and the named positive integer fields."""
    owner = type(config).__name__
    require_positive(owner, **{name: getattr(config, name) for name in positive})
    if config.d_model % config.num_heads:
        raise ValueError(f"{owner}: d_model={config.d_model} is not divisible by num_heads={config.num_heads}")
    require(owner, "dropout", config.dropout, 0.0 <= config.dropout < 1.0, "in [0, 1)")
    require_dtype(owner, config.dtype)
    require(owner, "attention", config.attention, config.attention in ATTENTION_KINDS, f"one of {ATTENTION_KINDS}")
    require(owner, "positional", config.positional, config.positional in POSITIONAL_KINDS, f"one of {POSITIONAL_KINDS}")
    require(owner, "score", config.score, config.score in SCORES, f"one of {sorted(SCORES)}")
    if config.score != "scaled_dot" and config.positional not in ADDED_ENCODINGS:
        raise ValueError(f"{owner}: score={config.score!r} needs positions added to the embeddings "
                         f"({', '.join(ADDED_ENCODINGS)}); positional={config.positional!r} is a score of its own")
    if config.positional == "rope" and (config.d_model // config.num_heads) % 2:
        raise ValueError(f"{owner}: positional='rope' rotates pairs of dimensions, so the head size "
                         f"d_model/num_heads = {config.d_model // config.num_heads} must be even")


@dataclasses.dataclass(kw_only=True)
class BlockConfig:
    """The fields every model's configuration shares (keyword-only), checked when the config
    is made.  A model's config subclasses it, adds its own fields, and names the ones that
    must be positive integers in `positive_fields`."""
    d_model: int = 64
    num_heads: int = 4
    d_ff: int = 128
    dropout: float = 0.0
    positional: str = "learned"       # any of transformer.positional.POSITIONAL_KINDS
    score: str = "scaled_dot"         # self-attention's score function: any of transformer.scores.SCORES
    dtype: str = "float32"            # of every parameter ("float64" for gradient checks)
    # how attention runs: "composed" (matmul, masked_fill, softmax, matmul: the nodes a learner
    # steps through) or "fused" (one op that keeps no weights, autograd/ops/attention.py:
    # faster at a GPT's 64-token blocks, slower at the main demo's short sequences)
    attention: str = "composed"

    positive_fields = ()

    def __post_init__(self):
        check_model_config(self, "d_model", "num_heads", "d_ff", *self.positive_fields)
