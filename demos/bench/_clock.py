"""The clock the step and kernel benchmarks time with (`--clock`).

"wall" (the default) is time.perf_counter: what a learner waits.  "cpu" is the calling
thread's CPU time (time.thread_time): on a machine shared with other work it leaves out the
time the process waited for a core, the main noise of a wall-clock median there.  It counts
only the calling thread, so it is for one-thread runs (`--threads 1`), where numpy's BLAS,
Numba's kernels and PyTorch's ops all run on that thread; caches shared with other
processes still move it.
"""

import time

CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}
now = time.perf_counter


def use(name, threads):
    """Time with clock `name` from now on; "cpu" refuses more than one thread."""
    global now
    if name == "cpu" and threads != 1:
        raise SystemExit("--clock cpu times the calling thread only: use it with --threads 1")
    now = CLOCKS[name]
