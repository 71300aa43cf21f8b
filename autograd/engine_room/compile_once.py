"""The kernels are compiled in child processes, so that every process runs them as loaded
from Numba's cache and the same seed gives the same bits in the first run as in later ones.

Why: Numba compiles some pieces of a kernel as libraries of their own (a helper it does
not inline, the body of a prange loop) and links them in, and the process that compiles a
kernel does not run the same machine code for those pieces as a process that loads the
kernel from the cache.  Seen in softmax's serial build: the compiling process called the
helper's separately compiled copy (exp_row, a vectorized sum), the loading process the copy
inside the cached object, compiled as part of the kernel.  The two grouped the sum
differently, so rows came out different in their last bits (a few rows in ten, in the
serial and the parallel builds the kernels then had), and a training run right after the
cache was emptied (a fresh clone, an edited kernel) drifted away from every later run with
the same seed.

So the first process that finds the float32 kernels missing from the cache starts child
processes that compile them (`warmup.warmup`, a share each, side by side) and write them to the
cache, then loads them from there like every later process.  A marker file in Numba's cache directory, named after a digest
of the kernels' source, Numba's version and the CPU, records that the child's work is done.
The float64 kernels (gradient checks, tests, a model trained in float64) go the same way,
in children of their own, when a process first makes float64 softmaxes: the other float64
kernels, and the fused attention in both dtypes, gave the same bits compiled as loaded.

Not covered: every kernel when the cache directory is not writable (each compiles in the
process that first calls it).  AUTOGRAD_COMPILE_IN_PROCESS=1 turns the child off (the child
itself runs with it; so does the compile-time benchmark, which times each kernel's compile).
"""

import hashlib
import os
import subprocess
import sys
import time
import warnings

import numba

IN_PROCESS = "AUTOGRAD_COMPILE_IN_PROCESS"
CHILD_SCRIPT = ("import numpy as np; from autograd.engine_room.warmup import warmup; "
                "warmup((np.{dtype},), {part}, {parts})")
# Children that compile side by side, each a share of the kernels (warmup's `part`), at most
# one a core.
CHILDREN = 2


def _digest():
    """What the cached kernels depend on: their source, Numba, Python and the CPU."""
    import llvmlite.binding
    folder = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as source:
                digest.update(name.encode() + source.read())
    digest.update(f"{numba.__version__} {sys.version} {llvmlite.binding.get_host_cpu_name()}".encode())
    return digest.hexdigest()[:20]


def marker(kind):
    """The marker file's path for `kind` ("float32", "float64-attention", ...), in the
    directory Numba caches the engine room's kernels in."""
    from autograd.engine_room.scatter import _index_add_rows
    return os.path.join(_index_add_rows.stats.cache_path, f"autograd-{kind}-kernels-{_digest()}.done")


def compile_in_a_child_if_needed(dtype="float32", meanwhile=None):
    """Run warmup.warmup for dtype ("float32" or "float64") in child processes (a share each, one
    a core, at most CHILDREN) unless the marker says it ran (see the module docstring).
    Called before this process runs its first kernel (float32) or makes its first float64
    softmax.  meanwhile: a function this process runs while the children compile (the fused
    attention's own compilation: on two cores the three share the two)."""
    if numba.config.DISABLE_JIT or os.environ.get(IN_PROCESS) == "1":
        return
    done_marker = marker(dtype)
    folder = os.path.dirname(done_marker)
    os.makedirs(folder, exist_ok=True)
    if os.path.exists(done_marker) or not os.access(folder, os.W_OK):
        return
    parts = max(1, min(CHILDREN, os.cpu_count() or 1))
    print(f"autograd: compiling the {dtype} Numba kernels in {parts} child process{'es' if parts > 1 else ''}, once "
          "(later runs load them from Numba's cache)", file=sys.stderr, flush=True)
    started = time.perf_counter()
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the project
    env = dict(os.environ, **{IN_PROCESS: "1"},
               PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
    children = [subprocess.Popen([sys.executable, "-c", CHILD_SCRIPT.format(dtype=dtype, part=part, parts=parts)],
                                 env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for part in range(parts)]
    try:
        if meanwhile is not None:
            meanwhile()
    finally:
        errors = [child.communicate()[1] for child in children]
    failed = [stderr for child, stderr in zip(children, errors) if child.returncode != 0]
    if failed:
        warnings.warn("autograd: compiling the kernels in child processes failed; compiling them here "
                      f"instead (their last bits may differ from a later run's):\n{failed[0][-2000:]}")
        return
    with open(done_marker, "w") as done:
        done.write(f"warmup((np.{dtype},)) ran in {parts} child processes; see autograd/engine_room/compile_once.py\n")
    print(f"autograd: the {dtype} Numba kernels compiled in {time.perf_counter() - started:.0f} s", file=sys.stderr,
          flush=True)
