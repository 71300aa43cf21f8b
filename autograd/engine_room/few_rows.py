"""Products of a few rows by a large transposed weight, x @ W^T with W (n, k) row-major:
each step of a language model's generation, one new row per sequence through every Linear
and the vocabulary projection.

The Goto driver (gemm.py) packs W^T into panels at every call; for one row that copy of
the whole weight costs many times the product itself (a 576 x 49,152 vocabulary projection
took 140 ms, the product alone about 7 ms).  Here each output is the dot product of a row
of x and a row of W, both contiguous and read in place: W is streamed once, which is all a
product of one row can do (it is bound by memory, not arithmetic).  Eight rows of W are read
side by side: one core reads memory faster with several streams in flight than with one
(at SmolLM2-135M's size, a generated token's Linears about 1.5 times as fast; see
demos.bench.generate).  Each dot product keeps
partial sums that LLVM vectorises (fast math's reassociation), so its last bits differ
from the Goto driver's sum.  Threads share W's rows, each streaming its own from memory,
whatever the product's size: every weight that comes here (MIN_WEIGHT numbers or more, a
quarter of a MiB in float32) takes one core longer to read than waking the other threads
costs, and one core alone cannot draw all the memory's bandwidth (two draw several times
one's: demos.bench.generate --threads 2), whereas the threshold the other kernels use
(dispatch.py's PARALLEL_MIN_FLOPS, counted in arithmetic) kept every Linear of a 135M model
serial.

A prompt's rows come here too, up to MAX_ROWS: each group of W's rows, read once from
memory, stays in the fastest cache while every row of x meets it, so the product grows with
the rows at the rate of the arithmetic, whereas the Goto driver's packing of W costs about
as much as reading it several times, whatever the rows (at SmolLM2-135M's size, a 32-token
prompt through every Linear took about twice as long by the Goto driver; at 128 rows the two
are even).
"""

import numpy as np

from autograd.engine_room.chunks import chunked
from autograd.engine_room.dispatch import array_types, threads

MAX_ROWS = 64                         # x with at most this many rows (a prompt's too: see below),
MIN_WEIGHT = 1 << 16                  # and W of at least this many numbers, come here


def takes(a, b):
    """Whether a @ b goes here: a (m <= MAX_ROWS, k) of b's dtype, b (k, n) the transposed
    view of a row-major (n, k) weight of at least MIN_WEIGHT numbers."""
    return (a.ndim == b.ndim == 2 and a.shape[0] <= MAX_ROWS and a.dtype == b.dtype and b.size >= MIN_WEIGHT
            and b.T.flags.c_contiguous)


def _make(dtype):
    """The chunk function for one dtype (its zero of that dtype: a float64 literal would
    turn a float32 sum into float64)."""
    zero = np.dtype(dtype).type(0)

    def rows_by_transposed(x, w, out, chunk, chunks):
        """out[i, j] = x[i] . w[j] for the rows j of w in share `chunk` of `chunks`: the
        shares divide w's groups of eight rows, each group's rows read side by side; the
        last n % 8 rows, one by one, belong to the last share (so that every row is summed
        the same way whatever the number of shares, and threads give the serial bits)."""
        n, k = w.shape
        groups = n // 8
        start, grouped = chunk * groups // chunks * 8, (chunk + 1) * groups // chunks * 8
        stop = n if chunk == chunks - 1 else grouped
        for j in range(start, grouped, 8):
            for i in range(x.shape[0]):
                t0 = t1 = t2 = t3 = t4 = t5 = t6 = t7 = zero
                for kk in range(k):
                    xi = x[i, kk]
                    t0 += xi * w[j, kk]
                    t1 += xi * w[j + 1, kk]
                    t2 += xi * w[j + 2, kk]
                    t3 += xi * w[j + 3, kk]
                    t4 += xi * w[j + 4, kk]
                    t5 += xi * w[j + 5, kk]
                    t6 += xi * w[j + 6, kk]
                    t7 += xi * w[j + 7, kk]
                out[i, j], out[i, j + 1], out[i, j + 2], out[i, j + 3] = t0, t1, t2, t3
                out[i, j + 4], out[i, j + 5], out[i, j + 6], out[i, j + 7] = t4, t5, t6, t7
        for j in range(grouped, stop):
            for i in range(x.shape[0]):
                total = zero
                for kk in range(k):
                    total += x[i, kk] * w[j, kk]
                out[i, j] = total
    return chunked(rows_by_transposed, np.dtype(dtype).name, array_types(dtype, "2r", "2r", "2w"))


_kernels = {}


def product(a, b):
    """a @ b for takes(a, b): (m, k) @ (k, n) -> (m, n)."""
    dtype = a.dtype
    if dtype not in _kernels:
        _kernels[dtype] = _make(dtype.type)
    out = np.empty((a.shape[0], b.shape[1]), dtype)
    _kernels[dtype](np.ascontiguousarray(a), b.T, out, threads())
    return out
