"""Positions inside attention: rotary embeddings (RoPE), ALiBi and a learned relative bias.

The lectures' sinusoidal encoding adds "where am I" to each token's embedding once, at the
bottom of the model.  Most recent models instead tell attention itself how far apart the
query and the key are, in every layer, and add nothing to the embeddings:

- RoPE (Su et al., 2021) rotates each pair of query and key dimensions by an angle
  proportional to the position, so q_i . k_j depends only on the offset i - j.  Two
  families pair the dimensions differently (`pairing`): "half" pairs (i, i + d/2), as
  GPT-NeoX and Hugging Face's Llama write it; "interleaved" pairs (2i, 2i + 1), as the
  RoFormer paper and Meta's Llama write it.  The two are one permutation of the head
  dimensions apart, so a checkpoint moves between them by permuting q_proj's and k_proj's rows.
- ALiBi (Press et al., 2022) adds -m_h |i - j| to the scores: a fixed, head-specific
  penalty for distance, with slopes m_h = 2^(-8h/H), h = 1..H (for H a power of two).
- A learned relative bias (Shaw et al., 2018; T5) adds b_h[clip(j - i, -D, D)], one
  trained number per head and clipped offset.

Each is a score function (see transformer/scores.py) that also takes `q_offset`, the
absolute position of the first query: 0 normally, the number of cached positions when
generating with a key/value cache.  Keys are at positions 0 .. T_k - 1.  They are meant
for self-attention, where queries and keys index the same sequence.
"""

import functools

import numpy as np

import nn
from autograd import Tensor, ops
from transformer.scores import scaled_dot_scores

ATTENTION_POSITIONS = ("rope", "alibi", "relative")


def _positions(q, k, q_offset):
    """Absolute positions of the queries (T_q,) and keys (T_k,)."""
    return q_offset + np.arange(q.shape[-2]), np.arange(k.shape[-2])


def _constant(array, like):
    return Tensor(array.astype(like.dtype, copy=False))


ROPE_PAIRINGS = ("half", "interleaved")


ROPE_SCALINGS = {"linear": ("factor",),
                 "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")}


def check_rope_scaling(scaling):
    """A RoPE scaling is None or {"rope_type": one of ROPE_SCALINGS, and its numbers (> 0)}:
    ValueError naming what is wrong."""
    if scaling is None:
        return
    kind = scaling.get("rope_type") if isinstance(scaling, dict) else None
    if kind not in ROPE_SCALINGS:
        raise ValueError(f"rope_scaling must be None or a dict with rope_type one of {sorted(ROPE_SCALINGS)}, "
                         f"got {scaling!r}")
    wrong = [key for key in ROPE_SCALINGS[kind] if not (isinstance(scaling.get(key), (int, float))
                                                        and not isinstance(scaling.get(key), bool) and scaling[key] > 0)]
    if wrong or set(scaling) != {"rope_type", *ROPE_SCALINGS[kind]}:
        raise ValueError(f"rope_scaling of type {kind!r} takes exactly {', '.join(ROPE_SCALINGS[kind])} (numbers > 0), "
                         f"got {scaling!r}")
    if kind == "llama3" and not scaling["high_freq_factor"] > scaling["low_freq_factor"]:
        raise ValueError(f"rope_scaling llama3: high_freq_factor must exceed low_freq_factor, got {scaling!r}")


def rope_frequencies(d, base=10000.0, scaling=None):
    """The angular frequencies (d/2,) of RoPE's pairs: base^(-2i/d) for pair i, then scaled
    to stretch the context a model was trained on (scaling, see check_rope_scaling):

    - "linear" (position interpolation): every frequency / factor, as if positions were
      factor times closer together.
    - "llama3" (Llama 3.1 and 3.2): with L = original_max_position_embeddings, pairs whose
      wavelength 2 pi / frequency exceeds L / low_freq_factor (they turn less than once or
      so over the original context) are divided by factor; those shorter than
      L / high_freq_factor (local detail) are kept; in between they blend, with
      s = (L / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor):
      (1 - s) frequency / factor + s frequency."""
    frequencies = base ** (-np.arange(0, d, 2) / d)                         # (d/2,)
    if scaling is None:
        return frequencies
    factor = scaling["factor"]
    if scaling["rope_type"] == "linear":
        return frequencies / factor
    low, high, original = (scaling[key] for key in ROPE_SCALINGS["llama3"][1:])
    wavelength = 2 * np.pi / frequencies
    blend = (original / wavelength - low) / (high - low)                    # 0 at L/low, 1 at L/high
    blended = (1 - blend) * frequencies / factor + blend * frequencies
    return np.where(wavelength > original / low, frequencies / factor,
                    np.where(wavelength < original / high, frequencies, blended))


def rotary_embedding(x, positions, base=10000.0, pairing="half", scaling=None):
    """x (..., T, d) with each pair of dimensions (x_a, x_b) turned by the angle
    pos * base^(-2i/d) of pair i and of the token's position pos (with a scaling, the
    frequencies rope_frequencies gives):

        rot(x)_a = x_a cos(angle) - x_b sin(angle)
        rot(x)_b = x_a sin(angle) + x_b cos(angle)

    pairing="half": pair i is (i, i + d/2);  "interleaved": pair i is (2i, 2i + 1).
    positions: the tokens' positions, (T,) for every sequence alike, or (B, T) for each
    sequence its own (x then (B, T, d) or (B, H, T, d)), e.g. after left padding; integers >= 0.
    The angles' cosines and sines are looked up in rope_table, not recomputed at each call."""
    d = x.shape[-1]
    positions = np.asarray(positions)
    if d % 2 or pairing not in ROPE_PAIRINGS:
        raise ValueError(f"rotary_embedding: needs an even last dim and pairing in {ROPE_PAIRINGS}, "
                         f"got d={d}, pairing={pairing!r}")
    if positions.ndim not in (1, 2) or positions.shape[-1] != x.shape[-2] or (
            positions.ndim == 2 and positions.shape[0] != x.shape[0]):
        raise ValueError(f"rotary_embedding: positions must be (T,) or (B, T) for x of shape (B, [H,] T, d) "
                         f"= {x.shape}, got positions of shape {positions.shape}")
    if not np.issubdtype(positions.dtype, np.integer) or (positions.size and positions.min() < 0):
        raise ValueError(f"rotary_embedding: positions must be integers >= 0, got {positions.dtype} "
                         f"{positions.min() if positions.size else ''}")
    length = 1 << int(positions.max(initial=0)).bit_length()            # a power of two past the last position
    cos, sin = (table[positions] for table in rope_table(d, base, _hashable(scaling), length, x.dtype))
    if positions.ndim == 2 and x.ndim == 4:
        cos, sin = cos[:, None], sin[:, None]                                # (B, 1, T, d/2): every head alike
    return ops.RotaryEmbeddingFn.apply(x, cos=cos, sin=sin, pairing=pairing)   # (..., T, d)


def _hashable(scaling):
    """A RoPE scaling dict as a tuple of its items (None stays None), to key rope_table's cache."""
    return None if scaling is None else tuple(sorted(scaling.items()))


@functools.lru_cache(maxsize=64)
def rope_table(d, base, scaling, length, dtype):
    """(cos, sin) of the angles pos * frequency of RoPE's pairs (rope_frequencies; scaling as
    _hashable's tuple) for the positions 0 .. length - 1: two (length, d/2) arrays of dtype,
    read-only.  Computed once per size and shared: without it every layer recomputed them
    for every key at every generated token."""
    angles = np.arange(length)[:, None] * rope_frequencies(d, base, scaling and dict(scaling))   # (length, d/2)
    tables = np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)
    for table in tables:
        table.flags.writeable = False
    return tables


class RotaryScore(nn.Module):
    """Scaled dot product of rotated queries and keys (rotary_embedding), so that
    rot(q, i) . rot(k, j) = q^T R(j - i) k: only the offset matters.  Needs d_head even.
    base: the theta of the angles (10000 in RoFormer and Llama 2, 500000 in Llama 3);
    scaling: None or a RoPE scaling (rope_frequencies)."""

    position_aware = True

    def __init__(self, d_head, base=10000.0, pairing="half", scaling=None):
        super().__init__()
        if d_head % 2:
            raise ValueError(f"RotaryScore: the head size must be even to rotate pairs, got d_head={d_head}")
        if pairing not in ROPE_PAIRINGS:
            raise ValueError(f"RotaryScore: pairing must be one of {ROPE_PAIRINGS}, got {pairing!r}")
        if not base > 1:
            raise ValueError(f"RotaryScore: base must be > 1, got {base!r}")
        check_rope_scaling(scaling)
        self.d_head, self.base, self.pairing, self.scaling = d_head, base, pairing, scaling

    def rotate(self, x, positions):
        """x (..., T, d_head) rotated by its positions (T,) or (B, T)."""
        return rotary_embedding(x, positions, self.base, self.pairing, self.scaling)

    def rotate_queries_and_keys(self, q, k, q_offset=0):
        """(rotated q, rotated k): the queries from position q_offset on, the keys from 0.
        Multi-head attention calls this and then the plain (or fused) attention, which
        equals the scores of forward."""
        q_pos, k_pos = _positions(q, k, q_offset)
        return self.rotate(q, q_pos), self.rotate(k, k_pos)

    def forward(self, q, k, q_offset=0):
        return scaled_dot_scores(*self.rotate_queries_and_keys(q, k, q_offset))   # (..., T_q, T_k)

    def extra_repr(self):
        return f"d_head={self.d_head}, base={self.base}, pairing={self.pairing!r}" + (
            f", scaling={self.scaling}" if self.scaling else "")


def alibi_slopes(num_heads):
    """The heads' slopes m_h, as the ALiBi authors' released code makes them (and so every
    model trained with ALiBi elsewhere).  For H a power of two, m_h = 2^(-8h/H), h = 1..H:
    head 1 looks locally, head H almost uniformly.  For any other H, the slopes of the power
    of two below H, then every other slope of the power of two above it, as many as are
    still needed (so the added heads fall between the others' slopes)."""
    below = 2 ** int(np.floor(np.log2(num_heads)))
    if below == num_heads:
        return 2.0 ** (-8.0 * np.arange(1, num_heads + 1) / num_heads)
    return np.concatenate([alibi_slopes(below), alibi_slopes(2 * below)[0::2][:num_heads - below]])


class ALiBiScore(nn.Module):
    """q . k / sqrt(d_k) - m_h |i - j|.  Nothing is learned; the penalty is linear in the
    distance, so it extends to lengths never seen in training."""

    position_aware = True

    def __init__(self, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.slopes = alibi_slopes(num_heads)                               # (H,)

    def forward(self, q, k, q_offset=0):
        if q.ndim < 3 or q.shape[-3] != self.num_heads:
            raise ValueError(f"ALiBiScore({self.num_heads} heads): expected q (..., {self.num_heads}, T_q, d), "
                             f"got {q.shape}")
        q_pos, k_pos = _positions(q, k, q_offset)
        distance = np.abs(q_pos[:, None] - k_pos[None, :])                  # (T_q, T_k)
        bias = -self.slopes[:, None, None] * distance                       # (H, T_q, T_k)
        return scaled_dot_scores(q, k) + _constant(bias, q)

    def extra_repr(self):
        return f"num_heads={self.num_heads}"


class RelativeBiasScore(nn.Module):
    """q . k / sqrt(d_k) + b_h[clip(j - i, -D, D)]: a trained (H, 2D + 1) table of biases,
    one per head and relative offset; offsets beyond D share the end entries, so any length
    uses only trained entries.  Starts at zero (plain attention)."""

    position_aware = True

    def __init__(self, num_heads, max_distance=8):
        super().__init__()
        if max_distance < 1:
            raise ValueError(f"RelativeBiasScore: max_distance must be >= 1, got {max_distance}")
        self.num_heads, self.max_distance = num_heads, max_distance
        self.bias = nn.Parameter(np.zeros((num_heads, 2 * max_distance + 1), np.float32))

    def forward(self, q, k, q_offset=0):
        if q.ndim < 3 or q.shape[-3] != self.num_heads:
            raise ValueError(f"RelativeBiasScore({self.num_heads} heads): expected q (..., {self.num_heads}, "
                             f"T_q, d), got {q.shape}")
        q_pos, k_pos = _positions(q, k, q_offset)
        offset = np.clip(k_pos[None, :] - q_pos[:, None], -self.max_distance, self.max_distance)   # (T_q, T_k)
        return scaled_dot_scores(q, k) + self.bias[:, offset + self.max_distance]   # + (H, T_q, T_k)

    def extra_repr(self):
        return f"num_heads={self.num_heads}, max_distance={self.max_distance}"


def position_score_factory(kind, num_heads, d_head, rope_base=10000.0, rope_pairing="half", rope_scaling=None):
    """A zero-argument function making one score module per attention layer for `kind`
    ("rope", "alibi", "relative"), or None for the other (additive) schemes."""
    if kind == "rope":
        if d_head % 2:
            raise ValueError(f"positional='rope' needs an even head size, got d_model/num_heads = {d_head}")
        return lambda: RotaryScore(d_head, rope_base, rope_pairing, rope_scaling)
    if kind == "alibi":
        return lambda: ALiBiScore(num_heads)
    if kind == "relative":
        return lambda: RelativeBiasScore(num_heads)
    return None


def is_position_aware(score):
    return getattr(score, "position_aware", False)

