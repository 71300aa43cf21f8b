"""Positions inside attention: rotary embeddings (RoPE), ALiBi and a learned relative bias.

The lectures' sinusoidal encoding adds "where am I" to each token's embedding once, at the
bottom of the model.  Most recent models instead tell attention itself how far apart the
query and the key are, in every layer, and add nothing to the embeddings:

- RoPE (Su et al., 2021) rotates each pair of query and key dimensions by an angle
  proportional to the position, so q_i . k_j depends only on the offset i - j.
- ALiBi (Press et al., 2022) adds -m_h |i - j| to the scores: a fixed, head-specific
  penalty for distance, with slopes m_h = 2^(-8h/H), h = 1..H (for H a power of two).
- A learned relative bias (Shaw et al., 2018; T5) adds b_h[clip(j - i, -D, D)], one
  trained number per head and clipped offset.

Each is a score function (see transformer/scores.py) that also takes `q_offset`, the
absolute position of the first query: 0 normally, the number of cached positions when
generating with a key/value cache.  Keys are at positions 0 .. T_k - 1.  They are meant
for self-attention, where queries and keys index the same sequence.
"""

import numpy as np

import nn
from autograd import Tensor, cat
from transformer.scores import scaled_dot_scores

ATTENTION_POSITIONS = ("rope", "alibi", "relative")


def _positions(q, k, q_offset):
    """Absolute positions of the queries (T_q,) and keys (T_k,)."""
    return q_offset + np.arange(q.shape[-2]), np.arange(k.shape[-2])


def _constant(array, like):
    return Tensor(array.astype(like.dtype, copy=False))


class RotaryScore(nn.Module):
    """Scaled dot product of rotated queries and keys.  Dimension pairs (x_i, x_{i+d/2})
    turn by angle pos * base^(-2i/d):
        rot(x)_i       = x_i cos(theta_i pos) - x_{i+d/2} sin(theta_i pos)
        rot(x)_{i+d/2} = x_i sin(theta_i pos) + x_{i+d/2} cos(theta_i pos)
    so rot(q, i) . rot(k, j) = q^T R(j - i) k: only the offset matters.  Needs d_head even."""

    position_aware = True

    def __init__(self, d_head, base=10000.0):
        super().__init__()
        if d_head % 2:
            raise ValueError(f"RotaryScore: the head size must be even to rotate pairs, got d_head={d_head}")
        self.d_head, self.base = d_head, base
        self.inv_freq = base ** (-np.arange(0, d_head, 2) / d_head)         # (d_head/2,)

    def rotate(self, x, positions):
        """x (..., T, d_head) rotated by its positions (T,)."""
        angles = positions[:, None] * self.inv_freq[None, :]                # (T, d_head/2)
        cos, sin = _constant(np.cos(angles), x), _constant(np.sin(angles), x)
        half = self.d_head // 2
        x1, x2 = x[..., :half], x[..., half:]                               # (..., T, d_head/2) each
        return cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)     # (..., T, d_head)

    def forward(self, q, k, q_offset=0):
        q_pos, k_pos = _positions(q, k, q_offset)
        return scaled_dot_scores(self.rotate(q, q_pos), self.rotate(k, k_pos))   # (..., T_q, T_k)

    def extra_repr(self):
        return f"d_head={self.d_head}, base={self.base}"


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


def position_score_factory(kind, num_heads, d_head):
    """A zero-argument function making one score module per attention layer for `kind`
    ("rope", "alibi", "relative"), or None for the other (additive) schemes."""
    if kind == "rope":
        if d_head % 2:
            raise ValueError(f"positional='rope' needs an even head size, got d_model/num_heads = {d_head}")
        return lambda: RotaryScore(d_head)
    if kind == "alibi":
        return lambda: ALiBiScore(num_heads)
    if kind == "relative":
        return lambda: RelativeBiasScore(num_heads)
    return None


def is_position_aware(score):
    return getattr(score, "position_aware", False)

