"""matmul for the fast tier: the product of (..., M, K) and (..., K, N) arrays, batch dims
broadcast, handed to one of two compiled drivers: the blocked Goto GEMM (gemm.py) for large
products and the small GEMM (small_gemm.py) for products that fit the caches unpacked, such
as attention's per-head ones; a few rows by a large transposed weight (a step of
generation) go to few_rows.py.  `like=` lays the result out in memory as a given operand is,
so that the views that made a gradient's operand hand the gradient back without a copy.
"""

import math

import numpy as np

from autograd.engine_room import few_rows, gemm, small_gemm
from autograd.engine_room.dispatch import PARALLEL_MIN_FLOPS, threads, use_threads


_aranges = {}


def _batch_index(batch_shape, full_batch):
    """For each matrix of the broadcast batch, the index of the operand's own matrix."""
    count = math.prod(batch_shape)
    if batch_shape == full_batch:        # no broadcasting: matrix t uses matrix t
        if count not in _aranges:
            _aranges[count] = np.arange(count)
        return _aranges[count]
    return np.ascontiguousarray(np.broadcast_to(np.arange(count).reshape(batch_shape), full_batch)).reshape(-1)


def matmul(a, b, like=None):
    """(..., M, K) @ (..., K, N) -> (..., M, N), batch dims broadcast: reference.matmul.

    like: the operand whose gradient this product is (ops/matmul.py).  The product is then
    laid out in memory as that operand is, so that the nodes that made the operand
    (transposes, reshapes) hand the gradient back without a copy:
    - a transposed view (columns contiguous: attention's k^T) gets (right^T @ left^T)^T, a
      transposed view of a product laid out as the operand's transpose; computed directly,
      it would also be a product as narrow as the keys are few, which the register tiles
      handle badly;
    - a batch of matrices whose rows are contiguous but which is not one contiguous array
      (a head of (B, T, H, d) seen as (B, H, T, d): attention's q and v) gets its product
      written in the operand's order of dims, so that the head split's Transpose and Reshape
      give back a contiguous (B, T, d_model) without copying it.
    Each entry is the same sum in the same order whatever the layout."""
    if like is None:
        return product(a, b)
    if like.ndim > 2 and like.strides[-2] == like.itemsize != like.strides[-1]:
        return np.swapaxes(matmul(np.swapaxes(b, -1, -2), np.swapaxes(a, -1, -2), like=np.swapaxes(like, -1, -2)),
                           -1, -2)
    if like.ndim > 2 and like.strides[-1] == like.itemsize and not like.flags.c_contiguous \
            and 0 not in like.strides and a.shape[:-2] == b.shape[:-2] == like.shape[:-2]:
        return product(a, b, out=np.empty_like(like, order="K"))
    return product(a, b)


def product(a, b, out=None):
    """matmul written into `out` (any layout whose rows are contiguous), else into a new
    C-contiguous array."""
    dtype = a.dtype if a.dtype == b.dtype else np.result_type(a.dtype, b.dtype)
    if dtype.char not in "fd" or a.ndim < 2 or b.ndim < 2:          # float32, float64
        return np.matmul(a, b, out=out)
    if out is None and few_rows.takes(a, b):                         # a step of generation: W^T read in place
        return few_rows.product(a, b)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k:
        raise ValueError(f"matmul: inner dimensions differ: {a.shape} @ {b.shape}")
    batch = a.shape[:-2] if a.shape[:-2] == b.shape[:-2] else np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if out is None:
        if b.ndim == 2 and a.ndim > 2:   # (..., M, K) @ (K, N): one GEMM over all rows
            return product(a.reshape(-1, k), b).reshape(a.shape[:-1] + (n,))
        out = np.empty(batch + (m, n), dtype)
        c = _as_4d(out, dtype)                                           # (1 or C1, 1 or C2, M, N)
    else:
        if out.shape != batch + (m, n):
            raise ValueError(f"matmul: out has shape {out.shape}; {a.shape} @ {b.shape} is {batch + (m, n)}")
        c = _as_4d_in_place(out)                                         # (C1, C2, M, N), rows contiguous
        if c is None or out.dtype != dtype or out.strides[-1] != dtype.itemsize or out.strides[-2] < n * dtype.itemsize:
            out[...] = product(a, b)             # a layout the kernels cannot write: through a copy
            return out
    if out.size == 0:
        return out
    if k == 0:
        out[...] = 0
        return out
    a_of = _batch_index(a.shape[:-2], batch)
    b_of = a_of if b.shape[:-2] == a.shape[:-2] else _batch_index(b.shape[:-2], batch)
    small = small_gemm.small_enough(m, k, n)
    # (matrix, block of rows): the work items threads share
    items = len(a_of) * (small_gemm.row_blocks(m) if small else -(-m // gemm.MC_THREADED))
    min_flops = PARALLEL_MIN_FLOPS if small else 2 * PARALLEL_MIN_FLOPS      # (see PARALLEL_MIN_FLOPS)
    parallel = items > 1 and use_threads(2 * out.size * k, min_flops)
    chunks = _whole_chunks(items) if parallel else 1
    kernel = small_gemm.small_gemm_kernel(dtype) if small else gemm.gemm_kernel(dtype)
    kernel(_as_4d(a, dtype), _as_4d(b, dtype), a_of, b_of, c, chunks)
    return out


def _whole_chunks(items):
    """How many runs of `items` work items the threads share: a whole number of runs per
    thread, up to four each."""
    count = threads()
    return max(count, min(items, 4 * count) // count * count)


def _as_4d_in_place(x):
    """x viewed as (batch1, batch2, rows, cols) without copying, or None if that would
    need a copy (more than two batch dims that cannot be merged)."""
    if x.ndim < 2:
        return None
    if x.ndim <= 4:
        return x[(None,) * (4 - x.ndim)]
    view = x.view()
    try:
        view.shape = (-1,) + x.shape[-3:]        # raises rather than copy
    except AttributeError:
        return None
    return view


_NEW_AXES = {2: (None, None), 3: (None,), 4: ()}       # x[_NEW_AXES[x.ndim]] is 4-D


def _as_4d(x, dtype):
    """x viewed as (batch1, batch2, rows, cols) without copying when it has <= 4 dims."""
    if x.dtype != dtype:
        x = x.astype(dtype)
    if x.ndim <= 4:
        return x[_NEW_AXES[x.ndim]]
    return x.reshape((-1,) + x.shape[-3:])
