"""softmax, log-softmax and their backwards for the fast tier, over rows of the last axis.

The row's maximum is taken by `row_max` (floats compared as integers, which LLVM
vectorizes) and its exps by `exp_nonpositive` (a polynomial that vectorizes, instead of
libm's scalar exp): both in fast_math.py.  Short rows are exponentiated a block of rows at a
time, so that the vector loop is never left with only its scalar remainder.
"""


import numpy as np
from numba.extending import register_jitable

from autograd.engine_room import compile_once
from autograd.engine_room.chunks import chunked, share_of
from autograd.engine_room.dispatch import PARALLEL_MIN_ELEMENTS, array_types, chunks_for, float_dtype
from autograd.engine_room.fast_math import JIT, make_exp_nonpositive, make_row_max
from autograd.kernels import reference


# A row shorter than SHORT_ROW numbers is exponentiated together with its neighbours, about
# BLOCK_NUMBERS numbers (4 KiB of float32) at a time: LLVM's loop over one row's exps takes
# 16 float32 a turn (8 lanes, 2 registers), so a row of 10 (attention's at the smallest
# size) would run entirely in the loop's scalar remainder.  Below 16 numbers the rows' sums
# are added in the same order as the loop over one row adds them (one by one), so float32
# softmax gives the same bits.  Longer rows would gain too, but their sums would be grouped
# otherwise, changing every larger trained model's last bits.  log-softmax's
# backward takes its exps a block at a time for rows up to LONG_ROW numbers: there each exp
# stands alone, so any row length keeps its bits.
SHORT_ROW = 16
BLOCK_NUMBERS = 1024
LONG_ROW = BLOCK_NUMBERS // 8


def _make_rowwise(dtype):
    """softmax, log-softmax and their backwards over the rows of a 2-D array, for one
    dtype.  Every constant is of that dtype: a float64 literal in a float32 kernel would
    silently turn the whole computation into float64."""
    f = np.dtype(dtype).type
    itype = np.int32 if dtype == np.float32 else np.int64
    ZERO, ONE = f(0.0), f(1.0)
    NEG_INF = f(-np.inf)
    exp_nonpositive = make_exp_nonpositive(dtype)
    row_max = make_row_max(dtype)

    @register_jitable(**JIT)
    def exp_row(row, shift, out):
        """out[j] = exp(row[j] - shift) for row[j] <= shift; returns sum_j out[j]."""
        total = ZERO
        for j in range(row.shape[0]):
            e = exp_nonpositive(row[j] - shift)
            out[j] = e
            total += e
        return total

    @register_jitable(**JIT)
    def log_minus_log_sum(row, m, total, out):
        """out = row - m - log(total), total = sum exp(row - m) (zeros for a fully masked
        row, m = -inf)."""
        # BEGIN TWIN log_softmax
        if m == NEG_INF:
            out[:] = ZERO
            return
        log_sum = f(np.log(total))
        for j in range(row.shape[0]):                      # two passes, so that fast-math cannot
            out[j] = row[j] - m                            # regroup (x - m) - log_sum as
        for j in range(row.shape[0]):                      # x - (m + log_sum): with x and m near
            out[j] -= log_sum                              # 1e4 that loses 3 digits in float32
        # END TWIN

    @register_jitable(**JIT)
    def normalize(row, m, total, out):
        """out *= 1 / total, total = sum exp(row - m) (a fully masked row's zeros stay)."""
        # BEGIN TWIN softmax
        inv = ONE / total if total != ZERO else ZERO
        for j in range(out.shape[0]):
            out[j] *= inv
        # END TWIN

    @register_jitable(**JIT)
    def row_sum(row):
        total = ZERO
        for j in range(row.shape[0]):
            total += row[j]
        return total

    def short_rows(finish):
        """A function (x, out) that does out = exp(x - each row's max) for rows shorter than
        SHORT_ROW, a block of rows at a time, and then finish(x's row, its max, the sum of
        the exps, out's row) for each row: normalize for softmax, log_minus_log_sum for
        log-softmax.  Each row's max is spread over its numbers in `shifts`, so that one
        loop over the block's numbers does the exps, in whole vectors (SHORT_ROW)."""
        @register_jitable(**JIT)
        def exp_then_finish(x, out):
            n = x.shape[1]
            bits = x.view(itype)
            per_block = BLOCK_NUMBERS // n
            shifts, maxima = np.empty(per_block * n, dtype), np.empty(per_block, dtype)
            for top in range(0, x.shape[0], per_block):
                count = min(per_block, x.shape[0] - top)
                for r in range(count):
                    maxima[r] = row_max(bits[top + r])
                    shift = ZERO if maxima[r] == NEG_INF else maxima[r]   # fully masked: exp(-inf - 0) = 0
                    for j in range(n):
                        shifts[r * n + j] = shift
                flat_x, flat_out = x[top:top + count].reshape(count * n), out[top:top + count].reshape(count * n)
                for e in range(count * n):
                    flat_out[e] = exp_nonpositive(flat_x[e] - shifts[e])
                for r in range(count):
                    finish(x[top + r], maxima[r], row_sum(out[top + r]), out[top + r])
        return exp_then_finish

    softmax_short_rows, log_softmax_short_rows = short_rows(normalize), short_rows(log_minus_log_sum)

    def softmax(x, out, chunk, chunks):
        """out = softmax of each row of x (zeros for a fully masked row), for the rows of
        share `chunk` (chunks.py), as every kernel below."""
        # BEGIN TWIN softmax
        x, out = share_of(x, chunk, chunks), share_of(out, chunk, chunks)
        if x.shape[1] < SHORT_ROW:
            softmax_short_rows(x, out)
            return
        bits = x.view(itype)
        for i in range(x.shape[0]):
            m = row_max(bits[i])
            if m == NEG_INF:
                out[i] = ZERO
                continue
            inv = ONE / exp_row(x[i], m, out[i])
            for j in range(x.shape[1]):
                out[i, j] *= inv
        # END TWIN

    def softmax_backward(y, dy, dx, chunk, chunks):
        """dx = y * (dy - sum(dy * y)) row by row."""
        # BEGIN TWIN softmax_backward
        y, dy, dx = share_of(y, chunk, chunks), share_of(dy, chunk, chunks), share_of(dx, chunk, chunks)
        for i in range(y.shape[0]):
            dot = ZERO
            for j in range(y.shape[1]):
                dot += dy[i, j] * y[i, j]
            for j in range(y.shape[1]):
                dx[i, j] = y[i, j] * (dy[i, j] - dot)
        # END TWIN

    def log_softmax(x, out, chunk, chunks):
        """out = x - max - log(sum exp(x - max)) row by row (zeros for a fully masked row).
        Its loop over long rows repeats softmax's on purpose: a shared helper returning
        (max, sum) made short rows slower."""
        # BEGIN TWIN log_softmax
        x, out = share_of(x, chunk, chunks), share_of(out, chunk, chunks)
        if x.shape[1] < SHORT_ROW:
            log_softmax_short_rows(x, out)
            return
        bits = x.view(itype)
        for i in range(x.shape[0]):
            m = row_max(bits[i])
            if m == NEG_INF:
                out[i] = ZERO
                continue
            log_minus_log_sum(x[i], m, exp_row(x[i], m, out[i]), out[i])   # out[i]: scratch
        # END TWIN

    @register_jitable(**JIT)
    def minus_exp_times_sum(dy, total_p, dx):
        """dx = dy - dx * sum(dy), dx holding exp(y) and total_p its sum (a fully masked
        row's y is all 0, so total_p = n > 1.5: its dx is zero)."""
        if total_p > f(1.5):
            dx[:] = ZERO
            return
        total_dy = row_sum(dy)
        for j in range(dy.shape[0]):
            dx[j] = dy[j] - dx[j] * total_dy

    def log_softmax_backward(y, dy, dx, chunk, chunks):
        """dx = dy - exp(y) * sum(dy), a block of rows at a time: one loop over the block's
        numbers takes the exps in whole vectors, however short the rows (cross-entropy's
        over the reverse task's 13 tokens, for one).  Each exp is
        taken alone and their sum is only compared with 1.5, so the bits are those of a
        loop row by row.  Rows longer than LONG_ROW go one at a time, their exps summed as
        they are taken: a separate pass for the sum would cost more than it saves."""
        y, dy, dx = share_of(y, chunk, chunks), share_of(dy, chunk, chunks), share_of(dx, chunk, chunks)
        n = y.shape[1]
        if n > LONG_ROW:
            for i in range(y.shape[0]):
                minus_exp_times_sum(dy[i], exp_row(y[i], ZERO, dx[i]), dx[i])
            return
        per_block = BLOCK_NUMBERS // n
        for top in range(0, y.shape[0], per_block):
            count = min(per_block, y.shape[0] - top)
            flat_y, flat_dx = y[top:top + count].reshape(count * n), dx[top:top + count].reshape(count * n)
            for e in range(count * n):
                flat_dx[e] = exp_nonpositive(flat_y[e])
            for i in range(top, top + count):
                minus_exp_times_sum(dy[i], row_sum(dx[i]), dx[i])

    name, forward, backward = np.dtype(dtype).name, array_types(dtype, "2r", "2w"), array_types(dtype, "2r", "2r", "2w")
    return {"softmax": chunked(softmax, name, forward), "log_softmax": chunked(log_softmax, name, forward),
            "softmax_backward": chunked(softmax_backward, name, backward),
            "log_softmax_backward": chunked(log_softmax_backward, name, backward)}


_rowwise_kernels = {}


def _rowwise_set(dtype):
    dtype = np.dtype(dtype)
    if dtype not in _rowwise_kernels:
        if dtype == np.float64:      # compiled here, they would give other last bits than loaded
            compile_once.wait("float64")
        _rowwise_kernels[dtype] = _make_rowwise(dtype.type)
    return _rowwise_kernels[dtype]


def _as_rows(x, dtype):
    """x as a C-contiguous 2-D array of rows along its last axis."""
    n = x.shape[-1] if x.ndim else 1
    return np.ascontiguousarray(x, dtype).reshape(-1, n)


def _forward(name, x):
    dtype = float_dtype(x)
    if dtype is None or x.size == 0 or x.ndim == 0:
        return getattr(reference, name)(x)
    rows = _as_rows(x, dtype)
    out = np.empty_like(rows)
    _rowwise_set(dtype)[name](rows, out, chunks_for(rows.size, PARALLEL_MIN_ELEMENTS))
    return out.reshape(x.shape)


def _backward(name, y, dy):
    dtype = float_dtype(y, dy)
    if dtype is None or y.size == 0 or y.ndim == 0:
        return getattr(reference, name)(y, dy)
    y_rows, dy_rows = _as_rows(y, dtype), _as_rows(dy, dtype)
    dx = np.empty_like(y_rows)
    _rowwise_set(dtype)[name](y_rows, dy_rows, dx, chunks_for(y_rows.size, PARALLEL_MIN_ELEMENTS))
    return dx.reshape(y.shape)


def softmax(x):
    """Row-wise softmax along the last axis (see reference.softmax)."""
    # BEGIN TWIN softmax
    return _forward("softmax", x)
    # END TWIN


def softmax_backward(y, dy):
    # BEGIN TWIN softmax_backward
    return _backward("softmax_backward", y, dy)
    # END TWIN


def log_softmax(x):
    # BEGIN TWIN log_softmax
    return _forward("log_softmax", x)
    # END TWIN


def log_softmax_backward(y, dy):
    return _backward("log_softmax_backward", y, dy)
