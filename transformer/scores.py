"""Score functions: how well does a query match each key?

Attention turns scores into weights with a softmax; the score function is the one part
that differs between the classic variants (the lectures list cosine similarity, a small
network, h^T W z, and the dot product).  Every score here is a Module called as

    score(q, k) -> (..., T_q, T_k)   for q (..., T_q, d_q) and k (..., T_k, d_k),

so any of them can be plugged into `scaled_dot_product_attention(..., score=...)`,
`MultiHeadAttention(..., score=...)` or the RNN attention decoder.
"""

import math

import nn


class DotProductScore(nn.Module):
    """q . k (Luong's "dot").  Needs d_q == d_k.  It is the Transformer's scaled score below
    with its scale taken back, and computed so: the one dot product of queries and keys here
    is the attention exercise's."""

    def forward(self, q, k):
        return scaled_dot_scores(q, k) * math.sqrt(q.shape[-1])   # (..., T_q, T_k)


def scaled_dot_scores(q, k):
    """q . k / sqrt(d_k), scaling q (the smaller tensor) rather than the scores."""
    # BEGIN EXERCISE attention
    return (q * (1.0 / math.sqrt(q.shape[-1]))) @ k.transpose(-2, -1)   # (..., T_q, T_k)
    # END EXERCISE


class ScaledDotProductScore(nn.Module):
    """q . k / sqrt(d_k) (the Transformer's): keeps the scores' variance near 1."""

    def forward(self, q, k):
        return scaled_dot_scores(q, k)


class CosineScore(nn.Module):
    """cos(q, k) = q . k / (|q| |k|), in [-1, 1], times `scale` (a small range makes a flat
    softmax, so a temperature is usually wanted)."""

    def __init__(self, scale=1.0, eps=1e-8):
        super().__init__()
        self.scale, self.eps = scale, eps

    def _unit(self, x):
        return x / ((x * x).sum(-1, keepdim=True) + self.eps).sqrt()

    def forward(self, q, k):
        return (self._unit(q) * self.scale) @ self._unit(k).transpose(-2, -1)

    def extra_repr(self):
        return f"scale={self.scale}"


class AdditiveScore(nn.Module):
    """v^T tanh(W_q q + W_k k) (Bahdanau et al.'s small network): works when query and key
    sizes differ, at the cost of a hidden layer of size `hidden` for every (query, key) pair."""

    def __init__(self, d_query, d_key, hidden):
        super().__init__()
        self.query_proj = nn.Linear(d_query, hidden, bias=False)
        self.key_proj = nn.Linear(d_key, hidden)
        self.v = nn.Linear(hidden, 1, bias=False)

    def forward(self, q, k):
        pq = self.query_proj(q).unsqueeze(-2)                  # (..., T_q, 1, hidden)
        pk = self.key_proj(k).unsqueeze(-3)                    # (..., 1, T_k, hidden)
        return self.v((pq + pk).tanh()).squeeze(-1)           # (..., T_q, T_k)


class BilinearScore(nn.Module):
    """k^T W q (Luong's "general"): a learned metric between query and key spaces."""

    def __init__(self, d_query, d_key):
        super().__init__()
        self.weight = nn.Linear(d_query, d_key, bias=False)    # W q

    def forward(self, q, k):
        return self.weight(q) @ k.transpose(-2, -1)            # (..., T_q, d_k) @ (..., d_k, T_k)


SCORES = {"dot": DotProductScore, "scaled_dot": ScaledDotProductScore, "cosine": CosineScore,
          "additive": AdditiveScore, "bilinear": BilinearScore}


def make_score(name, d_query, d_key, hidden=None):
    """A score module by name, sized for queries of d_query and keys of d_key."""
    if name not in SCORES:
        raise ValueError(f"unknown score function {name!r}; expected one of {sorted(SCORES)}")
    if name in ("dot", "scaled_dot") and d_query != d_key:
        raise ValueError(f"{name} score needs queries and keys of one size, got {d_query} and {d_key}")
    if name == "additive":
        return AdditiveScore(d_query, d_key, hidden or d_key)
    if name == "bilinear":
        return BilinearScore(d_query, d_key)
    if name == "cosine":
        return CosineScore(scale=math.sqrt(d_key))
    return SCORES[name]()
