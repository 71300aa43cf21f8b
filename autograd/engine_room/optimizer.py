"""The optimizer's kernels for the fast tier: Adam's update and the gradients' squared norm,
each one pass over the elements."""

import numpy as np
from numba import njit

from autograd.engine_room.dispatch import float_dtype
from autograd.engine_room.fast_math import JIT
from autograd.kernels import reference


@njit(**JIT)
def _adam_step(p, g, m, v, scalars):
    """reference.adam_step in one pass over the elements (Adam's numpy form makes about ten
    passes and ten calls per parameter, which dominate for small parameters).  The scalars
    arrive as one array of the parameters' dtype (lr, beta1, beta2, eps, shrink, l2, the two
    bias corrections, 1), so float32 parameters are updated in float32, and a call passes
    one scalar argument, not nine (Numba types each argument of every call)."""
    # BEGIN TWIN adam_step
    lr, beta1, beta2, eps, shrink, l2, correction1, correction2, one = (
        scalars[0], scalars[1], scalars[2], scalars[3], scalars[4], scalars[5], scalars[6], scalars[7], scalars[8])
    for i in range(p.shape[0]):                              # no branches in the loop
        pi = p[i] * shrink                                   # AdamW: p *= 1 - lr wd
        gi = g[i] + l2 * pi                                  # Adam: g += wd p
        m[i] = beta1 * m[i] + (one - beta1) * gi
        v[i] = beta2 * v[i] + (one - beta2) * gi * gi
        p[i] = pi - lr * (m[i] / correction1) / (np.sqrt(v[i] / correction2) + eps)
    # END TWIN


def adam_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    """Same signature as reference.adam_step; p, m, v must be contiguous (they are flattened
    as views) and are updated in place."""
    # BEGIN TWIN adam_step
    if not p.flags.c_contiguous:                             # reshape(-1) would update a copy
        raise ValueError("adam_step: the parameter array must be contiguous to be updated in place")
    shrink = 1 - lr * weight_decay if decoupled else 1.0
    l2 = 0.0 if decoupled else weight_decay
    scalars = np.array((lr, beta1, beta2, eps, shrink, l2, 1 - beta1 ** step, 1 - beta2 ** step, 1), p.dtype)
    _adam_step(p.reshape(-1), np.ascontiguousarray(g, p.dtype).reshape(-1), m.reshape(-1), v.reshape(-1), scalars)
    # END TWIN


@njit(**{**JIT, "fastmath": {"contract", "reassoc"}})
def _sum_of_squares(x):
    """sum of x[i]**2 in float64.  'reassoc' lets LLVM regroup the sum: it keeps running
    sums in the lanes of several vector registers and adds them up at the end (without it,
    one chain of dependent additions, an element at a time).  The grouping is fixed by the
    machine's vector width, so a run repeats its bits; float64 keeps the result within
    ~1e-15 of numpy's pairwise sum."""
    total = 0.0
    for i in range(x.shape[0]):
        value = np.float64(x[i])
        total += value * value
    return total


def sum_of_squares(x):
    """Same signature as reference.sum_of_squares: one pass, no float64 copy of x (numpy's
    np.square(x, dtype=float64) writes one, most of what clipping the gradients cost)."""
    if float_dtype(x) is None:
        return reference.sum_of_squares(x)
    return float(_sum_of_squares(np.ascontiguousarray(x).reshape(-1)))
