"""RoPE's rotation of pairs for the fast tier: each number read once and written once.

reference.rotate_pairs writes the rotation as whole-row numpy products: five passes over x
and four arrays made (the angles laid out as pairs, the swapped halves).  A step of
generation rotates every layer's new queries and all its cached keys (the cache holds them
unrotated), so those passes were a large share of a generated token's time outside the
products.  Here one loop reads each pair (a, b) and its angle's cos and sin where they lie
and writes

    out_a = a cos - b sin,    out_b = b cos + a sin

compiled without fast math, so that no product is fused into a multiply-add: every number
is the one reference.rotate_pairs gives, bit for bit (each product rounded, then their sum).
"""

import numba
import numpy as np

from autograd.engine_room import gemm
from autograd.kernels import reference

EXACT = dict(cache=True, boundscheck=False, error_model="numpy", nogil=True)    # no fast math: see above


def _rotate(x, cos, sin, half, out):
    """out = x with each pair turned, for x, out (N1, N2, T, d) and cos, sin (N1, N2, T, d/2),
    or 1 in a dim they are the same along (broadcast); rows contiguous, any strides else;
    half: pairs (i, i + d/2), else (2i, 2i + 1)."""
    pairs = x.shape[3] // 2
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            ci, cj = min(i, cos.shape[0] - 1), min(j, cos.shape[1] - 1)          # the angles' matrix
            x_ij, cos_ij, sin_ij, out_ij = (gemm.matrix_at(x, i, j), gemm.matrix_at(cos, ci, cj),
                                            gemm.matrix_at(sin, ci, cj), gemm.matrix_at(out, i, j))
            for t in range(x.shape[2]):
                ct = min(t, cos.shape[2] - 1)
                row, c, s = gemm.row_run(x_ij, t, 0, 2 * pairs), gemm.row_run(cos_ij, ct, 0, pairs), \
                    gemm.row_run(sin_ij, ct, 0, pairs)
                target = gemm.row_run(out_ij, t, 0, 2 * pairs)
                if half:
                    for p in range(pairs):
                        a, b = row[p], row[p + pairs]
                        target[p] = a * c[p] - b * s[p]
                        target[p + pairs] = b * c[p] + a * s[p]
                else:
                    for p in range(pairs):
                        a, b = row[2 * p], row[2 * p + 1]
                        target[2 * p] = a * c[p] - b * s[p]
                        target[2 * p + 1] = b * c[p] + a * s[p]


_kernels = {}


def rotate_kernel(dtype):
    """_rotate compiled for one dtype (or loaded from Numba's cache), on first use."""
    dtype = np.dtype(dtype)
    if dtype not in _kernels:
        t = numba.from_dtype(dtype)
        given = numba.types.Array(t, 4, "A", readonly=True)
        signature = (given, given, given, numba.types.boolean, numba.types.Array(t, 4, "A"))
        _kernels[dtype] = numba.njit(numba.types.void(*signature), **EXACT)(_named(_rotate, dtype.name))
    return _kernels[dtype]


def _named(function, name):
    """A copy of function named function[name], so that Numba caches each dtype's build
    under its own name (as chunks.chunked does)."""
    copy = type(function)(function.__code__, function.__globals__, function.__name__)
    copy.__qualname__ = f"{function.__qualname__}[{name}]"
    return copy


def _angles_fit(x, cos, sin):
    """Whether cos and sin are one shape that broadcasts to x's (..., d/2) with a size-1 dim
    where they differ (what rotary_embedding passes: (T, d/2), or (B, 1, T, d/2) for each
    sequence's own positions), in x's dtype."""
    lead = x.shape[:-1]
    return (cos.shape == sin.shape and x.dtype == cos.dtype == sin.dtype and cos.ndim <= x.ndim
            and cos.shape[-1] == x.shape[-1] // 2
            and all(n in (1, m) for n, m in zip(cos.shape[-2::-1], lead[::-1])))


def _as_4d_rows(x):
    """x (..., n) with at most four dims as (N1, N2, T, n), its rows contiguous (a copy only
    if they are not)."""
    if x.strides[-1] != x.itemsize and x.shape[-1] > 1:
        x = np.ascontiguousarray(x)
    return x[(None,) * (4 - x.ndim)]


def rotate_pairs(x, cos, sin, pairing):
    """Same signature and numbers as reference.rotate_pairs (x (..., d), cos and sin
    broadcastable to (..., d/2)); arrays of other dtypes than float32 and float64, of more
    than four dims, or angles that broadcast otherwise (_angles_fit) go to it."""
    if x.dtype.type not in (np.float32, np.float64) or not 1 <= x.ndim <= 4 or x.shape[-1] % 2 \
            or not _angles_fit(x, cos, sin):
        return reference.rotate_pairs(x, cos, sin, pairing)
    out = np.empty(x.shape, x.dtype)
    rotate_kernel(x.dtype)(_as_4d_rows(x), _as_4d_rows(cos), _as_4d_rows(sin), pairing == "half", _as_4d_rows(out))
    return out
