"""Stateless functions on tensors (PyTorch's `torch.nn.functional`, imported as F)."""

import numpy as np

from autograd import Tensor, as_tensor, ops
from autograd.random import default_generator


def linear(x, weight, bias=None):
    """y = x W^T + b, with W of shape (out, in): (..., in) -> (..., out), as one fused op."""
    return ops.LinearFn.apply(x, weight) if bias is None else ops.LinearFn.apply(x, weight, bias)


def dropout(x, p=0.5, training=True, generator=None):
    """Inverted dropout: zero each element with probability p and scale the rest by
    1/(1-p), so the expected value is unchanged and evaluation needs no rescaling."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout: p must be in [0, 1], got {p}")
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * np.zeros((), dtype=x.dtype)
    rng = generator or default_generator()
    keep = (rng.random(x.shape) >= p).astype(x.dtype) / np.asarray(1.0 - p, dtype=x.dtype)
    return x * as_tensor(keep)


def layer_norm(x, normalized_shape, weight, bias=None, eps=1e-5):
    """Normalize over the trailing `normalized_shape` dims (biased variance, eps inside the sqrt)."""
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if weight.shape != normalized_shape:
        raise ValueError(f"layer_norm: weight shape {weight.shape} != normalized_shape {normalized_shape}")
    if bias is None:
        return ops.LayerNormFn.apply(x, weight, eps=eps)
    return ops.LayerNormFn.apply(x, weight, bias, eps=eps)


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """x / sqrt(mean(x^2) + eps) over the trailing `normalized_shape` dims, times weight if
    given (PyTorch's F.rms_norm; eps=None is the machine epsilon of x's dtype, as there)."""
    normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if len(normalized_shape) > x.ndim or tuple(x.shape[x.ndim - len(normalized_shape):]) != normalized_shape:
        raise ValueError(f"rms_norm: normalized_shape {normalized_shape} is not the last dims of input {x.shape}")
    if weight is not None and weight.shape != normalized_shape:
        raise ValueError(f"rms_norm: weight shape {weight.shape} != normalized_shape {normalized_shape}")
    eps = float(np.finfo(x.dtype).eps) if eps is None else eps
    inputs = (x,) if weight is None else (x, weight)
    return ops.RMSNormFn.apply(*inputs, normalized_ndim=len(normalized_shape), eps=eps)


def embedding(ids, weight):
    """Rows of `weight` picked by integer ids: (...,) ids -> (..., dim)."""
    ids = np.asarray(ids.data if isinstance(ids, Tensor) else ids)
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"embedding: token ids must be integers, got dtype {ids.dtype}")
    vocab = weight.shape[0]
    bad = (ids < 0) | (ids >= vocab)
    if bad.any():
        raise IndexError(f"embedding: token id {int(ids[bad][0])} is out of range for a vocabulary of "
                         f"{vocab} (ids must be in 0..{vocab - 1})")
    # BEGIN EXERCISE embedding
    return weight[ids]
    # END EXERCISE


def softmax(x, dim=-1):
    return x.softmax(dim)


def log_softmax(x, dim=-1):
    return x.log_softmax(dim)


def relu(x):
    return x.relu()


def gelu(x, approximate="none"):
    return x.gelu(approximate)


def silu(x):
    return x.silu()


def _check_targets(logits, target, op):
    target = np.asarray(target.data if isinstance(target, Tensor) else target)
    if not np.issubdtype(target.dtype, np.integer):
        raise TypeError(f"{op}: targets must be integer class ids, got dtype {target.dtype}")
    if target.shape != logits.shape[:-1]:
        raise ValueError(f"{op}: logits of shape {logits.shape} (classes last) need targets of shape "
                         f"{logits.shape[:-1]}, got {target.shape}")
    return target


def _reduce(per_item, valid, reduction, target_shape, op):
    if reduction == "none":
        return per_item.reshape(target_shape)
    if reduction == "sum":
        return per_item.sum()
    if reduction == "mean":
        return per_item.sum() / max(int(valid.sum()), 1)
    raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def nll_loss(log_probs, target, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of the target classes: -log_probs[i, target_i], averaged over
    the targets that are not `ignore_index`.  log_probs: (N, C) or (N, T, C), classes last."""
    return _classification_loss(log_probs, target, ignore_index, 0.0, reduction, "nll_loss")


def cross_entropy(logits, target, ignore_index=-100, label_smoothing=0.0, reduction="mean"):
    """Cross-entropy from logits, computed as nll_loss(log_softmax(logits)) (never log of softmax).

    With label smoothing e over C classes the target distribution is (1-e) one-hot + e/C:
        loss_i = (1 - e) * (-log p[i, t_i]) + e * mean_c(-log p[i, c])
    Targets equal to ignore_index contribute nothing, and "mean" divides by the number of
    the others (PyTorch's definitions).  Differences from PyTorch, on purpose: classes are
    the LAST dim, so (N, T, C) logits take (N, T) targets (PyTorch wants (N, C, T)); and if
    every target is ignored the mean is 0 rather than NaN.
    """
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
    return _classification_loss(logits.log_softmax(-1), target, ignore_index, label_smoothing, reduction,
                                "cross_entropy")


def _classification_loss(log_probs, target, ignore_index, label_smoothing, reduction, op):
    target = _check_targets(log_probs, target, op)
    n_classes = log_probs.shape[-1]
    flat_t = target.reshape(-1)
    valid = flat_t != ignore_index
    out_of_range = valid & ((flat_t < 0) | (flat_t >= n_classes))
    if out_of_range.any():
        raise IndexError(f"{op}: target {int(flat_t[out_of_range][0])} is out of range for {n_classes} classes")
    rows = log_probs.reshape(-1, n_classes)                       # (N, C)
    picked = rows[np.arange(len(flat_t)), np.where(valid, flat_t, 0)]   # (N,)
    per_item = -picked
    if label_smoothing:
        per_item = (1 - label_smoothing) * per_item - label_smoothing * rows.mean(-1)
    per_item = per_item * as_tensor(valid.astype(rows.dtype))
    return _reduce(per_item, valid, reduction, target.shape, op)


def mse_loss(input, target, reduction="mean"):
    """Mean (or sum) of squared differences."""
    if input.shape != target.shape:
        raise ValueError(f"mse_loss: input shape {input.shape} != target shape {target.shape}")
    sq = (input - target) ** 2
    if reduction == "mean":
        return sq.mean()
    if reduction == "sum":
        return sq.sum()
    if reduction == "none":
        return sq
    raise ValueError(f"mse_loss: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
