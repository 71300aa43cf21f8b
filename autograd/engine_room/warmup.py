"""Compile (or load from Numba's cache) every fast kernel ahead of its first call."""

import functools

import numpy as np

from autograd.engine_room import gemm, small_gemm
from autograd.engine_room.elementwise import _gelu_kernel, _masked_fill_kernel, _relu_kernel
from autograd.engine_room.normalization import _layer_norm_kernel
from autograd.engine_room.optimizer import adam_step, sum_of_squares
from autograd.engine_room.rowwise import _rowwise_set
from autograd.engine_room.scatter import index_add_rows

def warmup(dtypes=(np.float32, np.float64), part=0, parts=1):
    """Compile (or load from the cache) every kernel for float32 and float64, serial and
    parallel, so that the first training step does not pay for compilation.  With parts > 1,
    only the kernels of share `part` (of `parts` about equal shares): compile_once runs one
    child process a share, side by side on a machine with several cores.  Not the fused
    attention kernels: a model's config chooses that op (the GPT recipe does), and
    kernels.prepare compiles them for it, once: then Numba's cache has them."""
    for dtype in dtypes:
        for piece in _share(_warmup_pieces(dtype), part, parts):
            piece()


def _share(pieces, part, parts):
    """Share `part` of (seconds, function) pieces dealt out to `parts` shares of about equal
    seconds: the longest first, each to the share with the fewest seconds so far."""
    totals, shares = [0.0] * parts, [[] for _ in range(parts)]
    for seconds, piece in sorted(pieces, key=lambda item: -item[0]):
        lightest = totals.index(min(totals))
        totals[lightest] += seconds
        shares[lightest].append(piece)
    return shares[part]


def _warmup_pieces(dtype):
    """(seconds, function) for each kernel (both directions of one op together), with roughly
    the seconds it takes to compile (as measured once), to share them out evenly."""
    rows, flat = np.zeros((2, 3), dtype), np.zeros(3, dtype)
    return [(11.5, functools.partial(gemm.gemm_kernel, dtype)),                # compiled when made
            (5.0, functools.partial(small_gemm.small_gemm_kernel, dtype)),
            (4.5, functools.partial(_rowwise_set, dtype)), (2.5, functools.partial(_layer_norm_kernel, dtype, False)),
            (2.2, functools.partial(_gelu_kernel, dtype, False)), (1.4, functools.partial(_relu_kernel, dtype, False)),
            (2.0, functools.partial(_masked_fill_kernel, dtype)),
            (0.3, lambda: adam_step(flat, flat, flat.copy(), flat.copy(), 1e-3, 0.9, 0.999, 1e-8, 0.0, False, 1)),
            (0.3, lambda: index_add_rows(rows.copy(), np.zeros(1, np.intp), rows[:1])),
            (0.2, lambda: sum_of_squares(flat))]
