"""The matmuls one training step makes: their shapes, operand layouts and FLOPs, and the
time numpy's BLAS takes for the same operands (for demos.bench.train and bench_kernels).

`record_matmuls(step)` runs `step` once with the engine room's GEMM entry wrapped, and groups
the calls by what the kernel sees: both operands' shapes and layouts.  A layout is
"C" (rows contiguous, row-major), "T" (a transposed view: columns contiguous) or "S"
(rows contiguous but further apart than a row, e.g. one head's slice of (B, T, H, d)).
"""

import numpy as np

from autograd.engine_room import products
from demos.bench import _clock


def layout(x):
    """'C', 'T' or 'S' for the last two dims of x (see the module docstring)."""
    rows, cols = x.shape[-2:]
    row_stride, col_stride = x.strides[-2:]
    if col_stride == x.itemsize or cols == 1:
        return "C" if row_stride == cols * x.itemsize or rows == 1 else "S"
    return "T" if row_stride == x.itemsize else "S"


def record_matmuls(step):
    """Run step() once; returns one dict per distinct (shapes, layouts, dtype) of
    the GEMM's operands (engine_room.products.product, after matmul's choice of layout): a, b
    (the first operands seen), count, flops (of one call)."""
    calls = {}
    original = products.product

    def recording(a, b, out=None):        # out: where a gradient is written (timed here without it)
        key = (a.shape, layout(a), b.shape, layout(b), a.dtype.name)
        if key not in calls:
            m, k = a.shape[-2:]
            batch = int(np.prod(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])))
            calls[key] = {"a": a, "b": b, "count": 0, "flops": 2 * batch * m * k * b.shape[-1]}
        calls[key]["count"] += 1
        return original(a, b, out)

    products.product = recording
    try:
        step()
    finally:
        products.product = original
    return list(calls.values())


def describe(call):
    """'(640, 64) C @ (64, 256) T' for a recorded call."""
    a, b = call["a"], call["b"]
    return f"{tuple(a.shape)} {layout(a)} @ {tuple(b.shape)} {layout(b)}"


def interleaved(ours, baseline, rounds=31, seconds_each=0.002):
    """Median seconds of ours() and baseline(), and the median of their per-round ratios
    (ours / baseline).  The two alternate in short rounds, so a change in the machine's
    load falls on both.  Timed on the benchmark's clock (_clock.py)."""
    ours()
    baseline()
    start = _clock.now()
    baseline()
    inner = max(1, int(seconds_each / max(_clock.now() - start, 1e-7)))
    times_ours, times_base, ratios = [], [], []
    for _ in range(rounds):
        pair = []
        for fn in (ours, baseline):
            start = _clock.now()
            for _ in range(inner):
                fn()
            pair.append((_clock.now() - start) / inner)
        times_ours.append(pair[0])
        times_base.append(pair[1])
        ratios.append(pair[0] / pair[1])
    median = lambda values: sorted(values)[len(values) // 2]                  # noqa: E731
    return median(times_ours), median(times_base), median(ratios)


def blas_rate(n=1024, repeats=9):
    """numpy's matmul rate in GFLOP/s on an n x n float32 product (its large-matrix speed)."""
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    np.matmul(a, b)
    times = []
    for _ in range(repeats):
        start = _clock.now()
        np.matmul(a, b)
        times.append(_clock.now() - start)
    return 2 * n ** 3 / sorted(times)[repeats // 2] / 1e9
