"""What every fast kernel's Python wrapper decides before it calls compiled code: how many
threads the call earns, the Numba types of its arguments, and whether its dtype is one the
compiled kernels take (float32 or float64; any other goes to the numpy definition).

A call earns threads only when its work is large enough to pay for waking them: a parallel
region waits for threads that slept since the last one and for its slowest thread, which
on a shared machine is often one the host has descheduled.  The thresholds below are
where, on the project's benchmarks, a threaded call stopped losing to a serial one
(`python -m demos.bench.threads` measures it).
"""

import numba
import numpy as np

PARALLEL_MIN_FLOPS = 1 << 23           # a matmul (through the Goto driver: twice as many, two parallel regions)
PARALLEL_MIN_ELEMENTS = 1 << 17        # a row-wise or elementwise kernel


def set_threads(count):
    """Let the kernels' parallel loops use `count` threads (at most NUMBA_NUM_THREADS)."""
    numba.set_num_threads(count)


def use_threads(work, threshold):
    """Whether a call with this much work runs on several threads."""
    return work >= threshold and numba.get_num_threads() > 1


def chunks_for(work, threshold):
    """How many chunks a row-wise or elementwise kernel's call is cut into (chunks.py): one a
    thread, or one in all for less work than threshold."""
    return numba.get_num_threads() if work >= threshold else 1


def array_types(dtype, *kinds):
    """numba array types for dtype: "2r" a C-contiguous 2-D array read only, "2w" written,
    "1r" and "1w" 1-D; "s" a scalar of dtype."""
    t = numba.from_dtype(np.dtype(dtype))
    return tuple(t if kind == "s" else numba.types.Array(t, int(kind[0]), "C", readonly=kind[1] == "r")
                 for kind in kinds)


def float_dtype(*arrays):
    """The dtype the arrays combine to, if the compiled kernels take it (float32, float64), else None."""
    dtype = np.result_type(*arrays)
    return dtype if dtype in (np.float32, np.float64) else None
