"""Numba kernels: matmul, softmax, log-softmax and their backwards, compiled for the CPU.

Each public function here has a numpy twin of the same name and signature in
`reference.py`; tests compare the two.  Run with NUMBA_DISABLE_JIT=1 and every kernel is
plain Python you can step through (slowly).

Three tricks make these fast, each explained where it is used:
- matmul (autograd/kernels/gemm.py) blocks and packs both operands as BLAS libraries do,
  and keeps a tile of C in vector registers (4 x 64 float32 with AVX-512, 3 x 32 with
  AVX2: gemm.host_vector_bytes picks it); small products, such as attention's
  per-head ones, skip the packing (autograd/kernels/small_gemm.py);
- `row_max` compares floats as integers (an order-preserving bit mapping), because LLVM
  vectorizes integer max reductions but not float ones here; `bits_to_float` turns the
  winning bits back into a float (a one-instruction LLVM bitcast);
- `exp_row` computes exp with a range reduction and a Taylor polynomial instead of calling
  libm's scalar exp, so the loop vectorizes.

Helpers called by a kernel are `register_jitable` (compiled into their caller): a nested
dispatcher object would make the cache key differ in every process.

The compile options, `row_max`, `bits_to_float` and the vectorizable exp live in fast_math.py.
"""

import functools
import math
import sys

import numba
import numpy as np
from numba import njit
from numba.extending import register_jitable

from autograd.kernels import compile_once, gemm, small_gemm
from autograd.kernels.chunks import chunked, share_of
from autograd.kernels.fast_math import JIT, make_exp_nonpositive, make_row_max
from autograd.kernels.attention import attention_backward, attention_forward  # noqa: F401  (the fused kernels)

# A matmul below this many FLOPs runs on one thread; through the Goto driver, below twice as
# many, since its threaded call is two parallel regions (B's panels packed once, then the
# product).  A region waits for threads that slept since the last one (45-70 us after a
# stretch of Python, 10-20 us back to back) and for its slower thread, which on a shared
# machine is often one the host has descheduled.  On two threads, called in a loop, the
# size-S step's 5-6 MFLOP products ran 0.75-1.46x as fast as on one, its 10-12 MFLOP ones
# 1.3-1.7x as fast; but in the step, those (its linear layers, through the Goto driver)
# made it 1.01-1.07x as long as on one thread (demos.bench_threads); its ReLUs gained nothing.
PARALLEL_MIN_FLOPS = 1 << 23
PARALLEL_MIN_ELEMENTS = 1 << 17        # and a row-wise or elementwise kernel below this many numbers (20-40 us)


def _use_threads(work, threshold):
    return work >= threshold and numba.get_num_threads() > 1


def _chunks_for(work, threshold):
    """How many chunks a row-wise or elementwise kernel's call is cut into (chunks.py): one a
    thread, or one in all for less work than threshold."""
    return numba.get_num_threads() if work >= threshold else 1


def _types(dtype, *kinds):
    """numba array types for dtype: "2r" a C-contiguous 2-D array read only, "2w" written,
    "1r" and "1w" 1-D; "s" a scalar of dtype."""
    t = numba.from_dtype(np.dtype(dtype))
    return tuple(t if kind == "s" else numba.types.Array(t, int(kind[0]), "C", readonly=kind[1] == "r")
                 for kind in kinds)


# ============================================================================ matmul

_aranges = {}


def _batch_index(batch_shape, full_batch):
    """For each matrix of the broadcast batch, the index of the operand's own matrix."""
    count = math.prod(batch_shape)
    if batch_shape == full_batch:        # no broadcasting: matrix t uses matrix t
        if count not in _aranges:
            _aranges[count] = np.arange(count)
        return _aranges[count]
    return np.ascontiguousarray(np.broadcast_to(np.arange(count).reshape(batch_shape), full_batch)).reshape(-1)


def matmul(a, b, out=None):
    """(..., M, K) @ (..., K, N) -> (..., M, N), batch dims broadcast, float32 or float64.
    out: an array to write the product into (any layout whose rows are contiguous; see
    ops/matmul.py), else a new C-contiguous one."""
    dtype = a.dtype if a.dtype == b.dtype else np.result_type(a.dtype, b.dtype)
    if dtype.char not in "fd" or a.ndim < 2 or b.ndim < 2:          # float32, float64
        return np.matmul(a, b, out=out)
    m, k = a.shape[-2:]
    n = b.shape[-1]
    if b.shape[-2] != k:
        raise ValueError(f"matmul: inner dimensions differ: {a.shape} @ {b.shape}")
    batch = a.shape[:-2] if a.shape[:-2] == b.shape[:-2] else np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if out is None:
        if b.ndim == 2 and a.ndim > 2:   # (..., M, K) @ (K, N): one GEMM over all rows
            return matmul(a.reshape(-1, k), b).reshape(a.shape[:-1] + (n,))
        out = np.empty(batch + (m, n), dtype)
        c = _as_4d(out, dtype)                                           # (1 or C1, 1 or C2, M, N)
    else:
        if out.shape != batch + (m, n):
            raise ValueError(f"matmul: out has shape {out.shape}; {a.shape} @ {b.shape} is {batch + (m, n)}")
        c = _as_4d_in_place(out)                                         # (C1, C2, M, N), rows contiguous
        if c is None or out.dtype != dtype or out.strides[-1] != dtype.itemsize or out.strides[-2] < n * dtype.itemsize:
            out[...] = matmul(a, b)              # a layout the kernels cannot write: through a copy
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
    parallel = items > 1 and _use_threads(2 * out.size * k, min_flops)
    chunks = _whole_chunks(items) if parallel else 1
    kernel = small_gemm.small_gemm_kernel(dtype) if small else gemm.gemm_kernel(dtype)
    kernel(_as_4d(a, dtype), _as_4d(b, dtype), a_of, b_of, c, chunks)
    return out


def _whole_chunks(items):
    """How many runs of `items` work items the threads share: a whole number of runs per
    thread, up to four each.  (Asked only for parallel calls: numba.get_num_threads() takes
    2 us, a quarter of a small product's whole call.)"""
    threads = numba.get_num_threads()
    return max(threads, min(items, 4 * threads) // threads * threads)


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


# ============================================================================ row-wise kernels

# A row shorter than SHORT_ROW numbers is exponentiated together with its neighbours, about
# BLOCK_NUMBERS numbers (4 KiB of float32) at a time: LLVM's loop over one row's exps takes
# 16 float32 a turn (8 lanes, 2 registers), so a row of 10 (attention's at size S) ran
# entirely in the loop's scalar remainder (softmax of rows of 8 to 13 numbers: 1.9-2.2x as
# fast so, log-softmax 1.4x).  Below 16 numbers the rows' sums are added in the same order
# as the loop over one row adds them (one by one), so float32 softmax gives the same bits.
# Longer rows would gain too (1.9x at 16, 1.3x at 32, nothing at 64), but their sums would
# be grouped otherwise, changing every larger trained model's last bits.  log-softmax's
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
        if m == NEG_INF:
            out[:] = ZERO
            return
        log_sum = f(np.log(total))
        for j in range(row.shape[0]):                      # two passes, so that fast-math cannot
            out[j] = row[j] - m                            # regroup (x - m) - log_sum as
        for j in range(row.shape[0]):                      # x - (m + log_sum): with x and m near
            out[j] -= log_sum                              # 1e4 that loses 3 digits in float32

    @register_jitable(**JIT)
    def normalize(row, m, total, out):
        """out *= 1 / total, total = sum exp(row - m) (a fully masked row's zeros stay)."""
        inv = ONE / total if total != ZERO else ZERO
        for j in range(out.shape[0]):
            out[j] *= inv

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

    def softmax_backward(y, dy, dx, chunk, chunks):
        """dx = y * (dy - sum(dy * y)) row by row."""
        y, dy, dx = share_of(y, chunk, chunks), share_of(dy, chunk, chunks), share_of(dx, chunk, chunks)
        for i in range(y.shape[0]):
            dot = ZERO
            for j in range(y.shape[1]):
                dot += dy[i, j] * y[i, j]
            for j in range(y.shape[1]):
                dx[i, j] = y[i, j] * (dy[i, j] - dot)

    def log_softmax(x, out, chunk, chunks):
        """out = x - max - log(sum exp(x - max)) row by row (zeros for a fully masked row).
        Its loop over long rows repeats softmax's on purpose: a shared helper returning
        (max, sum) made short rows 1.5x slower."""
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
        over the reverse task's 13 tokens, and rows of 32: 1.4-1.6x as fast so).  Each exp is
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

    name, forward, backward = np.dtype(dtype).name, _types(dtype, "2r", "2w"), _types(dtype, "2r", "2r", "2w")
    return {"softmax": chunked(softmax, name, forward), "log_softmax": chunked(log_softmax, name, forward),
            "softmax_backward": chunked(softmax_backward, name, backward),
            "log_softmax_backward": chunked(log_softmax_backward, name, backward)}


_rowwise_kernels = {}


def _rowwise_set(dtype):
    dtype = np.dtype(dtype)
    if dtype not in _rowwise_kernels:
        if dtype == np.float64:      # compiled here, they would give other last bits than loaded
            compile_once.compile_in_a_child_if_needed(sys.modules[__name__], "float64")
        _rowwise_kernels[dtype] = _make_rowwise(dtype.type)
    return _rowwise_kernels[dtype]


def _as_rows(x, dtype):
    """x as a C-contiguous 2-D array of rows along its last axis."""
    n = x.shape[-1] if x.ndim else 1
    return np.ascontiguousarray(x, dtype).reshape(-1, n)


def _float_dtype(*arrays):
    dtype = np.result_type(*arrays)
    return dtype if dtype in (np.float32, np.float64) else None


def _forward(name, x):
    dtype = _float_dtype(x)
    if dtype is None or x.size == 0 or x.ndim == 0:
        from autograd.kernels import reference
        return getattr(reference, name)(x)
    rows = _as_rows(x, dtype)
    out = np.empty_like(rows)
    _rowwise_set(dtype)[name](rows, out, _chunks_for(rows.size, PARALLEL_MIN_ELEMENTS))
    return out.reshape(x.shape)


def _backward(name, y, dy):
    dtype = _float_dtype(y, dy)
    if dtype is None or y.size == 0 or y.ndim == 0:
        from autograd.kernels import reference
        return getattr(reference, name)(y, dy)
    y_rows, dy_rows = _as_rows(y, dtype), _as_rows(dy, dtype)
    dx = np.empty_like(y_rows)
    _rowwise_set(dtype)[name](y_rows, dy_rows, dx, _chunks_for(y_rows.size, PARALLEL_MIN_ELEMENTS))
    return dx.reshape(y.shape)


def softmax(x):
    """Row-wise softmax along the last axis (see reference.softmax)."""
    return _forward("softmax", x)


def softmax_backward(y, dy):
    return _backward("softmax_backward", y, dy)


def log_softmax(x):
    return _forward("log_softmax", x)


def log_softmax_backward(y, dy):
    return _backward("log_softmax_backward", y, dy)


# ============================================================================ layer norm

def _make_layer_norm(dtype):
    """Layer norm forward and backward (see reference.layer_norm) for one dtype.  Rows are
    independent, so threads share them.  The parameter gradients are sums over rows: each
    chunk adds up a share of the columns, every column over all rows in row order (rows
    split among threads would group the sums differently, and every trained model's last
    bits would change with the number of threads)."""

    def layer_norm_rows(x, weight, bias, eps, out, xhat, rstd, chunk, chunks):
        x, out, xhat, rstd = (share_of(x, chunk, chunks), share_of(out, chunk, chunks), share_of(xhat, chunk, chunks),
                              share_of(rstd, chunk, chunks))
        n, d = x.shape
        for i in range(n):
            total = x[i, 0] * 0
            for j in range(d):
                total += x[i, j]
            mean = total / d
            var = total * 0
            for j in range(d):
                c = x[i, j] - mean
                var += c * c
            r = 1 / np.sqrt(var / d + eps)
            rstd[i, 0] = r
            for j in range(d):
                h = (x[i, j] - mean) * r
                xhat[i, j] = h
                out[i, j] = h * weight[j] + bias[j]

    def layer_norm_backward_rows(grad, xhat, rstd, weight, dx, dweight, dbias, chunk, chunks):
        first, stop = chunk * grad.shape[1] // chunks, (chunk + 1) * grad.shape[1] // chunks
        # this chunk's columns, summed in buffers of its own: summed in dweight itself, the
        # chunks' shares met in one cache line, which both threads wrote for every row (two
        # threads took 1.6x as long as one on a (2048, 256) gradient)
        dweight_share, dbias_share = np.zeros(stop - first, dweight.dtype), np.zeros(stop - first, dbias.dtype)
        for i in range(grad.shape[0]):              # each column summed in row order
            grad_row, xhat_row = grad[i, first:stop], xhat[i, first:stop]
            for j in range(stop - first):
                dweight_share[j] += grad_row[j] * xhat_row[j]
                dbias_share[j] += grad_row[j]
        for j in range(stop - first):               # element by element: a slice assignment
            dweight[first + j] = dweight_share[j]   # checks the shapes, and its error message
            dbias[first + j] = dbias_share[j]       # (string formatting) took 3 s to compile
        grad, xhat, rstd, dx = (share_of(grad, chunk, chunks), share_of(xhat, chunk, chunks),
                                share_of(rstd, chunk, chunks), share_of(dx, chunk, chunks))
        n, d = grad.shape
        for i in range(n):
            mean_g = grad[i, 0] * 0
            mean_gx = grad[i, 0] * 0
            for j in range(d):
                gw = grad[i, j] * weight[j]
                mean_g += gw
                mean_gx += gw * xhat[i, j]
            mean_g /= d
            mean_gx /= d
            for j in range(d):
                dx[i, j] = rstd[i, 0] * (grad[i, j] * weight[j] - mean_g - xhat[i, j] * mean_gx)

    name = np.dtype(dtype).name
    return (chunked(layer_norm_rows, name, _types(dtype, "2r", "1r", "1r", "s", "2w", "2w", "2w")),
            chunked(layer_norm_backward_rows, name, _types(dtype, "2r", "2r", "2r", "1r", "2w", "1w", "1w")))


_layer_norm_kernels = {}


def _layer_norm_kernel(dtype, backward):
    dtype = np.dtype(dtype)
    if dtype not in _layer_norm_kernels:
        _layer_norm_kernels[dtype] = _make_layer_norm(dtype.type)
    return _layer_norm_kernels[dtype][int(backward)]


def layer_norm(x, weight, bias, eps):
    """Same signature and results as reference.layer_norm, in one pass per row."""
    dtype = x.dtype
    x = np.ascontiguousarray(x)
    out, xhat = np.empty_like(x), np.empty_like(x)
    rstd = np.empty((x.shape[0], 1), dtype)
    _layer_norm_kernel(dtype, False)(x, np.ascontiguousarray(weight, dtype), np.ascontiguousarray(bias, dtype),
                                     dtype.type(eps), out, xhat, rstd, _chunks_for(x.size, PARALLEL_MIN_ELEMENTS))
    return out, xhat, rstd


def layer_norm_backward(grad, xhat, rstd, weight):
    """Same signature and results as reference.layer_norm_backward."""
    grad = np.ascontiguousarray(grad, xhat.dtype)
    dx = np.empty_like(grad)
    dweight, dbias = np.empty(grad.shape[1], xhat.dtype), np.empty(grad.shape[1], xhat.dtype)
    _layer_norm_kernel(xhat.dtype, True)(grad, xhat, rstd, np.ascontiguousarray(weight, xhat.dtype), dx, dweight, dbias,
                                         _chunks_for(grad.size, PARALLEL_MIN_ELEMENTS))
    return dx, dweight, dbias


# ============================================================================ GELU

def _make_gelu(dtype):
    """GELU forward and backward, elementwise, for one dtype (see reference.gelu).

    float64 calls libm's erf, exp and tanh (exact, scalar).  float32 is written so that
    LLVM vectorizes it: Phi(x) = 1 - erfc(x / sqrt 2) / 2 with erfc from the Chebyshev
    fit of Numerical Recipes (section 6.2, fractional error < 1.2e-7 everywhere, below
    float32 rounding), and tanh u = sign(u) (1 - e) / (1 + e) with e = exp(-2|u|), each exp
    by `make_exp_nonpositive`.  The loops are compiled for 512-bit vectors (see gemm.py's
    docstring): elementwise, so the results' bits are the same, and exact GELU of a GPT
    batch's (768, 512) activations takes 0.6x the time it takes with 256-bit ones."""
    f = np.dtype(dtype).type
    exact = dtype == np.float64
    exp_nonpositive = make_exp_nonpositive(dtype, keep_nan=False)
    ZERO, HALF, ONE, TWO, THREE = f(0), f(0.5), f(1), f(2), f(3)
    SQRT_HALF, INV_SQRT_2PI = f(math.sqrt(0.5)), f(1 / math.sqrt(2 * math.pi))
    SQRT_2_OVER_PI, CUBIC = f(math.sqrt(2 / math.pi)), f(0.044715)
    ERFC = tuple(f(c) for c in (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806,
                                0.09678418, 0.37409196, 1.00002368, -1.26551223))   # highest power first

    @register_jitable(**JIT)
    def cdf(v):
        """Phi(v) = (1 + erf(v / sqrt 2)) / 2."""
        if exact:
            return HALF * (ONE + math.erf(v * SQRT_HALF))
        z = abs(v) * SQRT_HALF
        t = ONE / (ONE + HALF * z)
        p = ERFC[0]
        for c in ERFC[1:]:
            p = p * t + c
        tail = HALF * t * exp_nonpositive(p - z * z)              # erfc(z) / 2
        return ONE - tail if v >= ZERO else tail

    @register_jitable(**JIT)
    def tanh(u):
        if exact:
            return math.tanh(u)
        e = exp_nonpositive(-TWO * abs(u))
        t = (ONE - e) / (ONE + e)
        return t if u >= ZERO else -t

    @register_jitable(**JIT)
    def pdf(v):
        """Phi'(v) = exp(-v^2 / 2) / sqrt(2 pi)."""
        return INV_SQRT_2PI * (math.exp(-HALF * v * v) if exact else exp_nonpositive(-HALF * v * v))

    def gelu_forward(x, out, tanh_form, chunk, chunks):
        """out = x Phi(x)."""
        gemm.prefer_wide_vectors()
        x, out = share_of(x, chunk, chunks), share_of(out, chunk, chunks)
        for i in range(x.shape[0]):
            v = x[i]
            if tanh_form:
                out[i] = HALF * v * (ONE + tanh(SQRT_2_OVER_PI * (v + CUBIC * v * v * v)))
            else:
                out[i] = v * cdf(v)

    def gelu_backward(x, grad, dx, tanh_form, chunk, chunks):
        """dx = grad (Phi(x) + x Phi'(x))."""
        gemm.prefer_wide_vectors()
        x, grad, dx = share_of(x, chunk, chunks), share_of(grad, chunk, chunks), share_of(dx, chunk, chunks)
        for i in range(x.shape[0]):
            v = x[i]
            if tanh_form:
                t = tanh(SQRT_2_OVER_PI * (v + CUBIC * v * v * v))
                slope = HALF * (ONE + t) + HALF * v * (ONE - t * t) * SQRT_2_OVER_PI * (ONE + THREE * CUBIC * v * v)
            else:
                slope = cdf(v) + v * pdf(v)
            dx[i] = grad[i] * slope

    name, flag = np.dtype(dtype).name, numba.boolean
    return (chunked(gelu_forward, name, _types(dtype, "1r", "1w") + (flag,)),
            chunked(gelu_backward, name, _types(dtype, "1r", "1r", "1w") + (flag,)))


_gelu_kernels = {}


def _gelu_kernel(dtype, backward):
    dtype = np.dtype(dtype)
    if dtype not in _gelu_kernels:
        _gelu_kernels[dtype] = _make_gelu(dtype.type)
    return _gelu_kernels[dtype][int(backward)]


def _gelu_form(approximate):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return approximate == "tanh"


def gelu(x, approximate):
    """Same signature and results as reference.gelu."""
    tanh_form = _gelu_form(approximate)
    if _float_dtype(x) is None:
        from autograd.kernels import reference
        return reference.gelu(x, approximate)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    _gelu_kernel(flat.dtype, False)(flat, out, tanh_form, _chunks_for(flat.size, PARALLEL_MIN_ELEMENTS))
    return out.reshape(x.shape)


def gelu_backward(x, grad, approximate):
    """Same signature and results as reference.gelu_backward."""
    tanh_form = _gelu_form(approximate)
    if _float_dtype(x) is None:
        from autograd.kernels import reference
        return reference.gelu_backward(x, grad, approximate)
    flat = np.ascontiguousarray(x).reshape(-1)
    dx = np.empty_like(flat)
    _gelu_kernel(flat.dtype, True)(flat, np.ascontiguousarray(grad, x.dtype).reshape(-1), dx, tanh_form,
                                   _chunks_for(flat.size, PARALLEL_MIN_ELEMENTS))
    return dx.reshape(x.shape)


# ============================================================================ ReLU

def _make_relu(dtype):
    def relu_forward(x, out, chunk, chunks):
        """out = x where x > 0, else 0 (NaN stays NaN)."""
        x, out = share_of(x, chunk, chunks), share_of(out, chunk, chunks)
        for i in range(x.shape[0]):
            out[i] = 0 if x[i] <= 0 else x[i]

    def relu_backward(out, grad, dx, chunk, chunks):
        """dx = grad where the output is > 0, else 0."""
        out, grad, dx = share_of(out, chunk, chunks), share_of(grad, chunk, chunks), share_of(dx, chunk, chunks)
        for i in range(out.shape[0]):
            dx[i] = grad[i] if out[i] > 0 else 0

    name = np.dtype(dtype).name
    return (chunked(relu_forward, name, _types(dtype, "1r", "1w")),
            chunked(relu_backward, name, _types(dtype, "1r", "1r", "1w")))


_relu_kernels = {}


def _relu_kernel(dtype, backward):
    dtype = np.dtype(dtype)
    if dtype not in _relu_kernels:
        _relu_kernels[dtype] = _make_relu(dtype.type)
    return _relu_kernels[dtype][int(backward)]


def relu(x):
    """Same signature and results as reference.relu."""
    if _float_dtype(x) is None:
        from autograd.kernels import reference
        return reference.relu(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    _relu_kernel(flat.dtype, False)(flat, out, _chunks_for(flat.size, PARALLEL_MIN_ELEMENTS))
    return out.reshape(x.shape)


def relu_backward(out, grad):
    """Same signature and results as reference.relu_backward."""
    if _float_dtype(out) is None:
        from autograd.kernels import reference
        return reference.relu_backward(out, grad)
    flat = np.ascontiguousarray(out).reshape(-1)
    dx = np.empty_like(flat)
    _relu_kernel(flat.dtype, True)(flat, np.ascontiguousarray(grad, out.dtype).reshape(-1), dx,
                                   _chunks_for(flat.size, PARALLEL_MIN_ELEMENTS))
    return dx.reshape(out.shape)


# ============================================================================ masked fill

def _make_masked_fill(dtype):
    def masked_fill_rows(rows, mask_rows, row_of, value, out, chunk, chunks):
        """out[i, j] = value where mask_rows[row_of[i], j], else rows[i, j]."""
        rows, row_of, out = share_of(rows, chunk, chunks), share_of(row_of, chunk, chunks), share_of(out, chunk, chunks)
        width = rows.shape[1]
        for i in range(rows.shape[0]):
            mask, source, target = gemm.row_run(mask_rows, row_of[i], 0, width), gemm.row_run(rows, i, 0, width), \
                gemm.row_run(out, i, 0, width)
            for j in range(width):
                target[j] = value if mask[j] else source[j]

    rows, out, value = _types(dtype, "2r", "2w", "s")
    mask_rows = numba.types.Array(numba.boolean, 2, "C", readonly=True)
    row_of = numba.types.Array(numba.intp, 1, "A", readonly=True)           # may be a broadcast (stride 0)
    return chunked(masked_fill_rows, np.dtype(dtype).name, (rows, mask_rows, row_of, value, out))


_masked_fill_kernels = {}


def _masked_fill_kernel(dtype):
    dtype = np.dtype(dtype)
    if dtype not in _masked_fill_kernels:
        _masked_fill_kernels[dtype] = _make_masked_fill(dtype.type)
    return _masked_fill_kernels[dtype]


def masked_fill(x, mask, value):
    """Same signature and results as reference.masked_fill, in one pass (numpy's where with
    a mask broadcast over the batch and heads takes 3 ns an element).  x is seen as rows of
    its last dim; row i of x reads row row_of[i] of the mask (the broadcast, as indices)."""
    mask = np.asarray(mask)
    if _float_dtype(x) is None or x.ndim == 0 or x.size == 0 or mask.dtype != np.bool_:
        from autograd.kernels import reference
        return reference.masked_fill(x, mask, value)
    width = x.shape[-1]
    if mask.ndim == 0 or mask.shape[-1] != width:                    # broadcast along the last dim
        mask = np.broadcast_to(mask, mask.shape[:-1] + (width,))
    mask_rows = np.ascontiguousarray(mask).reshape(-1, width)           # (M, L)
    row_of = np.broadcast_to(np.arange(len(mask_rows)).reshape(mask.shape[:-1]), x.shape[:-1]).reshape(-1)   # (N,)
    rows = np.ascontiguousarray(x).reshape(-1, width)                   # (N, L)
    out = np.empty_like(rows)
    _masked_fill_kernel(x.dtype)(rows, mask_rows, row_of, x.dtype.type(value), out,
                                 _chunks_for(x.size, PARALLEL_MIN_ELEMENTS))
    return out.reshape(x.shape)


# ============================================================================ scatter-add

@njit(**JIT)
def _index_add_rows(out, ids, rows):
    """out[ids[i]] += rows[i], i in order: one pass, no temporaries."""
    for i in range(ids.shape[0]):
        target, source = out[ids[i]], rows[i]
        for j in range(source.shape[0]):
            target[j] += source[j]


def index_add_rows(out, ids, rows):
    """Same signature and results as reference.index_add_rows (numpy's ufunc.at, which
    this replaces, takes ~0.8 ms for a GPT batch's 768 token embeddings)."""
    if _float_dtype(out) is None or out.ndim != 2 or not out.flags.c_contiguous:
        from autograd.kernels import reference
        return reference.index_add_rows(out, ids, rows)
    ids = ids.reshape(-1).astype(np.intp, copy=False)
    if ids.size and ids.min() < 0:                     # numpy's negative ids count from the end
        ids = np.where(ids < 0, ids + out.shape[0], ids)
    _index_add_rows(out, ids, np.ascontiguousarray(rows, out.dtype).reshape(ids.size, out.shape[1]))


# ============================================================================ optimizer

@njit(**JIT)
def _adam_step(p, g, m, v, lr, beta1, beta2, eps, shrink, l2, correction1, correction2, one):
    """reference.adam_step in one pass over the elements (Adam's numpy form makes about ten
    passes and ten calls per parameter, which dominate for small parameters).  Every scalar
    arrives in the arrays' dtype, so float32 parameters are updated in float32."""
    for i in range(p.shape[0]):                              # no branches in the loop
        pi = p[i] * shrink                                   # AdamW: p *= 1 - lr wd
        gi = g[i] + l2 * pi                                  # Adam: g += wd p
        m[i] = beta1 * m[i] + (one - beta1) * gi
        v[i] = beta2 * v[i] + (one - beta2) * gi * gi
        p[i] = pi - lr * (m[i] / correction1) / (np.sqrt(v[i] / correction2) + eps)


def adam_step(p, g, m, v, lr, beta1, beta2, eps, weight_decay, decoupled, step):
    """Same signature as reference.adam_step; p, m, v must be contiguous (they are flattened
    as views) and are updated in place."""
    flat = p.reshape(-1)
    if not np.shares_memory(flat, p):
        raise ValueError("adam_step: the parameter array must be contiguous to be updated in place")
    t = p.dtype.type
    shrink = 1 - lr * weight_decay if decoupled else 1.0
    l2 = 0.0 if decoupled else weight_decay
    _adam_step(flat, np.ascontiguousarray(g, p.dtype).reshape(-1), m.reshape(-1), v.reshape(-1),
               t(lr), t(beta1), t(beta2), t(eps), t(shrink), t(l2), t(1 - beta1 ** step), t(1 - beta2 ** step), t(1))


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
    np.square(x, dtype=float64) writes one: 0.7-1.1 ms for the GPT's 0.8 M gradients, most
    of what clipping them cost)."""
    if _float_dtype(x) is None:
        from autograd.kernels import reference
        return reference.sum_of_squares(x)
    return float(_sum_of_squares(np.ascontiguousarray(x).reshape(-1)))


def warmup(dtypes=(np.float32, np.float64), part=0, parts=1):
    """Compile (or load from the cache) every kernel for float32 and float64, serial and
    parallel, so that the first training step does not pay for compilation.  With parts > 1,
    only the kernels of share `part` (of `parts` about equal shares): compile_once runs one
    child process a share, side by side on a machine with several cores.  Not the fused
    attention kernels: that op is opt-in (transformer.attention.use_fused_attention; the
    GPT recipe opts in), and they compile on first use (17-26 s for float32, once: then
    Numba's cache has them)."""
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
    """(seconds, function) for each kernel (both directions of one op together), with about
    the seconds it took to compile for float32 on an AMD Zen 3, to share them out evenly."""
    rows, flat = np.zeros((2, 3), dtype), np.zeros(3, dtype)
    return [(11.5, functools.partial(gemm.gemm_kernel, dtype)),                # compiled when made
            (5.0, functools.partial(small_gemm.small_gemm_kernel, dtype)),
            (4.5, functools.partial(_rowwise_set, dtype)), (2.5, functools.partial(_layer_norm_kernel, dtype, False)),
            (2.2, functools.partial(_gelu_kernel, dtype, False)), (1.4, functools.partial(_relu_kernel, dtype, False)),
            (2.0, functools.partial(_masked_fill_kernel, dtype)),
            (0.3, lambda: adam_step(flat, flat, flat.copy(), flat.copy(), 1e-3, 0.9, 0.999, 1e-8, 0.0, False, 1)),
            (0.3, lambda: index_add_rows(rows.copy(), np.zeros(1, np.intp), rows[:1])),
            (0.2, lambda: sum_of_squares(flat))]
