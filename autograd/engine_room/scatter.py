"""Scatter-add of rows for the fast tier: an embedding lookup's gradient."""

import numpy as np
from numba import njit

from autograd.engine_room.dispatch import float_dtype
from autograd.engine_room.fast_math import JIT
from autograd.kernels import reference


@njit(**JIT)
def _index_add_rows(out, ids, rows):
    """out[ids[i]] += rows[i], i in order: one pass, no temporaries."""
    for i in range(ids.shape[0]):
        target, source = out[ids[i]], rows[i]
        for j in range(source.shape[0]):
            target[j] += source[j]


def index_add_rows(out, ids, rows):
    """Same signature and results as reference.index_add_rows, in one pass (numpy's
    ufunc.at, which this replaces, is slow)."""
    if float_dtype(out) is None or out.ndim != 2 or not out.flags.c_contiguous:
        return reference.index_add_rows(out, ids, rows)
    ids = ids.reshape(-1).astype(np.intp, copy=False)
    if ids.size and ids.min() < 0:                     # numpy's negative ids count from the end
        ids = np.where(ids < 0, ids + out.shape[0], ids)
    _index_add_rows(out, ids, np.ascontiguousarray(rows, out.dtype).reshape(ids.size, out.shape[1]))
