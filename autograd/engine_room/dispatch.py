"""What every fast kernel's Python wrapper decides before it calls compiled code: how many
threads the call earns, the Numba types of its arguments, and whether its dtype is one the
compiled kernels take (float32 or float64; any other goes to the numpy definition).

A call earns threads only when its work is large enough to pay for waking them: a parallel
region waits for threads that slept since the last one and for its slowest thread, which
on a shared machine is often one the host has descheduled.  The thresholds below are
where, on the project's benchmarks, a threaded call stopped losing to a serial one
(`python -m demos.bench.threads` measures it).

A call also earns threads only while the cores are free. Numba's OpenMP threads spin
while they wait for work, so two processes that each run threads on the same cores take
turns spinning on the cores the other needs: each runs at a fraction of its speed. So every
SAMPLE_SECONDS the wrappers look at how busy the machine is (/proc/stat) beside how busy
this process is, and while other processes keep a core busy they use one thread fewer per
core taken (one, on two cores). The thread count never changes a result (chunks.py), only
the speed; `share_cores(False)` or AUTOGRAD_SHARE_CORES=0 turns this off
(`python -m demos.bench.share` measures both).
"""

import math
import os
import time

import numba
import numpy as np

PARALLEL_MIN_FLOPS = 1 << 23           # a matmul (through the Goto driver: twice as many, two parallel regions)
PARALLEL_MIN_ELEMENTS = 1 << 17        # a row-wise or elementwise kernel


SAMPLE_SECONDS = 0.25
BUSY_ELSEWHERE = 0.5                   # cores other processes keep busy before a thread is given up


class _Sharing:
    """The threads a parallel call may use now, re-measured every SAMPLE_SECONDS."""
    enabled = os.environ.get("AUTOGRAD_SHARE_CORES", "1") != "0"
    next_sample = 0.0
    threads = 1
    last = None                        # (wall, process CPU seconds, busy jiffies, all jiffies)


def _machine_jiffies():
    """(busy, all) jiffies of every core since boot, from /proc/stat; None where there is none."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)            # idle + iowait
    return sum(fields) - idle, sum(fields)


def threads():
    """Numba's thread count, less one thread for each core that other processes kept busy
    over the last sample (at least one)."""
    now = time.monotonic()
    if now < _Sharing.next_sample:
        return _Sharing.threads
    _Sharing.next_sample = now + SAMPLE_SECONDS
    most = numba.get_num_threads()
    jiffies = _machine_jiffies() if _Sharing.enabled else None
    sample = None if jiffies is None else (now, time.process_time(), *jiffies)
    _Sharing.threads = most
    if sample and _Sharing.last and sample[3] > _Sharing.last[3]:
        wall, cpu, busy, total = (a - b for a, b in zip(sample, _Sharing.last))
        cores = os.cpu_count() or 1
        elsewhere = busy / total * cores - cpu / wall                        # cores busy with other processes
        if elsewhere >= BUSY_ELSEWHERE:
            _Sharing.threads = max(1, min(most, cores - math.ceil(elsewhere - BUSY_ELSEWHERE)))
    _Sharing.last = sample
    return _Sharing.threads


def share_cores(enabled):
    """Whether calls give up threads while other processes keep cores busy (the default)."""
    _Sharing.enabled, _Sharing.next_sample, _Sharing.last = bool(enabled), 0.0, None


def set_threads(count):
    """Let the kernels' parallel loops use `count` threads (at most NUMBA_NUM_THREADS)."""
    numba.set_num_threads(count)
    _Sharing.next_sample = 0.0


def use_threads(work, threshold):
    """Whether a call with this much work runs on several threads."""
    return work >= threshold and threads() > 1


def chunks_for(work, threshold):
    """How many chunks a row-wise or elementwise kernel's call is cut into (chunks.py): one a
    thread, or one in all for less work than threshold."""
    return threads() if work >= threshold else 1


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
