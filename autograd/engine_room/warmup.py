"""Compile (or load from Numba's cache) every fast kernel ahead of its first call."""

import functools

import numpy as np

from autograd.engine_room import attention, few_queries, gemm, rotary, small_gemm
from autograd.engine_room.elementwise import _gelu_kernel, _masked_fill_kernel, _relu_kernel
from autograd.engine_room.normalization import _layer_norm_kernel
from autograd.engine_room.optimizer import adam_step, sum_of_squares
from autograd.engine_room.rowwise import _rowwise_set
from autograd.engine_room.scatter import index_add_rows
from autograd.kernels.twins import kernels_cut

def warmup(dtypes=(np.float32, np.float64), part=0, parts=1, kernels=True, attention=False):
    """Compile (or load from the cache) every kernel for float32 and float64, so that the
    first training step does not pay for compilation; with attention, the fused attention's
    kernels too (a model's config chooses that op: the GPT recipe does); without kernels,
    only those.  With parts > 1, only the kernels of share `part` (of `parts` about equal
    shares): compile_once runs one child process a share, side by side on a machine with
    several cores."""
    for dtype in dtypes:
        pieces = (_warmup_pieces(dtype) if kernels else []) + ([_attention_piece(dtype)] if attention else [])
        for piece in _share(pieces, part, parts):
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


def _attention_piece(dtype):
    """(seconds, function) for the fused attention's kernels (few_queries.py's too), as _warmup_pieces."""
    kind = np.dtype(dtype).type
    return 15.0, lambda: (attention._kernels_for(kind), few_queries.forward_kernel(kind))


def _warmup_pieces(dtype):
    """(seconds, function) for each kernel (both directions of one op together), with the
    rough time it takes to compile relative to the others, to share them out evenly.  Adam's
    is compiled by a call, which a student copy without its twin cannot make (twins.py)."""
    rows, flat = np.zeros((2, 3), dtype), np.zeros(3, dtype)
    adam = [] if "adam_step" in kernels_cut() else [
        (0.3, lambda: adam_step(flat, flat, flat.copy(), flat.copy(), 1e-3, 0.9, 0.999, 1e-8, 0.0, False, 1))]
    return adam + [
        (10.2, functools.partial(gemm.gemm_kernel, dtype)),                # compiled when made
        (5.5, functools.partial(small_gemm.small_gemm_kernel, dtype)),
        (7.8, functools.partial(_rowwise_set, dtype)), (2.3, functools.partial(_layer_norm_kernel, dtype, False)),
        (2.0, functools.partial(_gelu_kernel, dtype, False)), (0.7, functools.partial(_relu_kernel, dtype, False)),
        (1.1, functools.partial(_masked_fill_kernel, dtype)),
        (0.3, lambda: index_add_rows(rows.copy(), np.zeros(1, np.intp), rows[:1])),
        (0.15, lambda: sum_of_squares(flat)), (0.3, functools.partial(rotary.rotate_kernel, dtype))]
