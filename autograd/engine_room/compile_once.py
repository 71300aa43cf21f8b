"""The kernels are compiled in child processes, so that every process runs them as loaded
from Numba's cache and the same seed gives the same bits in the first run as in later ones.

Why: Numba compiles some pieces of a kernel as libraries of their own (a helper it does
not inline, the body of a prange loop) and links them in, and the process that compiles a
kernel does not run the same machine code for those pieces as a process that loads the
kernel from the cache: the compiling process may call a helper's separately compiled copy
(say a vectorized sum), the loading process the copy inside the cached object, compiled as
part of the kernel.  The two can group the sum differently, so rows come out different in
their last bits, and a training run right after the cache was emptied (a fresh clone, an
edited kernel) would drift away from every later run with the same seed.

So the first process that finds the float32 kernels missing from the cache starts child
processes that compile them (`warmup.warmup`, a share each, side by side) and write them to
the cache, then loads them from there like every later process.  A marker file in Numba's
cache directory, named after a digest of the kernels' source, Numba's version and the CPU,
records that the children's work is done.  The float64 kernels (gradient checks, tests, a
model trained in float64) go the same way, in children of their own, when a process first
makes float64 softmaxes.  The fused attention kernels (a marker of their own) gave the same
bits compiled as loaded, but are compiled in the children too when a model asks for them:
there they share the cores evenly with the other kernels.

The children can be started early and waited for later (`start`, then `Compiling.wait`):
a training demo starts them before it reads its data, so the two overlap.

Not covered: every kernel when the cache directory is not writable (each compiles in the
process that first calls it).  AUTOGRAD_COMPILE_IN_PROCESS=1 turns the children off (the
children themselves run with it; so does the compile-time benchmark, which times each
kernel's compile).
"""

import atexit
import functools
import hashlib
import os
import re
import subprocess
import sys
import time
import warnings

import numba

IN_PROCESS = "AUTOGRAD_COMPILE_IN_PROCESS"
CHILD_SCRIPT = ("import numpy as np; from autograd.engine_room.warmup import warmup; "
                "warmup((np.{dtype},), {part}, {parts}, kernels={kernels}, attention={attention})")
# Children that compile side by side, each a share of the kernels (warmup's `part`), at most
# one a core.
CHILDREN = 2


@functools.cache
def _digest():
    """What the cached kernels depend on: their source, Numba, Python, and the CPU they are
    compiled for (its name and features: NUMBA_CPU_NAME and NUMBA_CPU_FEATURES, else the host's)."""
    from autograd.engine_room import target
    folder = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for name in sorted(os.listdir(folder)):
        if name.endswith(".py"):
            with open(os.path.join(folder, name), "rb") as source:
                digest.update(name.encode() + source.read())
    digest.update(f"{numba.__version__} {sys.version} {target.compile_cpu_name()} {sorted(target.compile_features())}".encode())
    return digest.hexdigest()[:20]


def _usable_cores():
    """The cores this process may run on (fewer than the machine's when pinned, e.g. by taskset)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def marker(kind):
    """The marker file's path for `kind` ("float32", "float64-attention", ...), in the
    directory Numba caches the engine room's kernels in."""
    from autograd.engine_room.scatter import _index_add_rows
    return os.path.join(_index_add_rows.stats.cache_path, f"autograd-{kind}-kernels-{_digest()}.done")


class Compiling:
    """Child processes compiling kernels into Numba's cache; wait() for them."""

    def __init__(self, dtype, kinds, what):
        self.kinds, self.what, self.started = kinds, what, time.perf_counter()
        self.parts = max(1, min(CHILDREN, _usable_cores()))
        print(f"autograd: compiling {what} in {self.parts} child process{'es' if self.parts > 1 else ''}, once "
              f"(later runs load them from Numba's cache): {why_and_how_long(kinds)}", file=sys.stderr, flush=True)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the project
        env = dict(os.environ, **{IN_PROCESS: "1"},
                   PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p))
        script = [CHILD_SCRIPT.format(dtype=dtype, part=part, parts=self.parts, kernels=dtype in kinds,
                                      attention=f"{dtype}-attention" in kinds) for part in range(self.parts)]
        self.children = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True) for code in script]
        atexit.register(self.stop)

    def stop(self):
        """Stop children not waited for (this process is leaving: a user's mistake, found
        after they started)."""
        for child in self.children or ():
            child.kill()
            child.wait()

    def wait(self):
        """Wait for the children; mark their kinds done, or warn if one failed (the kernels
        are then compiled here, on first use)."""
        if self.children is None:
            return
        errors = [child.communicate()[1] for child in self.children]
        failed = [stderr for child, stderr in zip(self.children, errors) if child.returncode != 0]
        self.children = None
        if failed:
            warnings.warn("autograd: compiling the kernels in child processes failed; compiling them here "
                          f"instead (their last bits may differ from a later run's):\n{failed[0][-2000:]}")
            return
        for kind in self.kinds:
            with open(marker(kind), "w") as done:
                done.write(f"{kind}: compiled in {self.parts} child processes in {time.perf_counter() - self.started:.1f} s; "
                           "see autograd/engine_room/compile_once.py\n")
        print(f"autograd: {self.what} compiled in {time.perf_counter() - self.started:.0f} s", file=sys.stderr,
              flush=True)


def why_and_how_long(kinds):
    """Why `kinds` are compiled now, and how long that takes, for the line that announces it:
    an earlier build's markers (another digest) mean the kernels, Numba, Python or the CPU
    changed, and hold how long their compile took here; without any, it is a first run."""
    folder = os.path.dirname(marker(kinds[0]))
    earlier = [os.path.join(folder, name) for name in os.listdir(folder)
               if any(re.fullmatch(rf"autograd-{kind}-kernels-[0-9a-f]+\.done", name) for kind in kinds)]
    if not earlier:
        return "their first run with this Numba cache (a fresh clone); usually under a minute, longer on a busy machine"
    with open(max(earlier, key=os.path.getmtime)) as done:
        took = re.search(r" in ([0-9.]+) s;", done.read())
    return ("the kernels, Numba, Python or the CPU changed since their last compile here"
            + (f", which took {float(took.group(1)):.0f} s" if took else ""))


_under_way = {}      # kind -> the Compiling that compiles it, in this process


def start(dtype="float32", attention=False):
    """Start child processes compiling the kernels for dtype ("float32" or "float64"), and
    the fused attention's if asked, unless their markers say it was done or children are at
    it already (see the module docstring); wait() waits for them."""
    if numba.config.DISABLE_JIT or os.environ.get(IN_PROCESS) == "1":
        return
    folder = os.path.dirname(marker(dtype))
    os.makedirs(folder, exist_ok=True)
    if not os.access(folder, os.W_OK):
        return
    kinds = [kind for kind in [dtype] + [f"{dtype}-attention"] * attention
             if kind not in _under_way and not os.path.exists(marker(kind))]
    if kinds:
        names = {dtype: f"the {dtype} Numba kernels", f"{dtype}-attention": f"the fused attention kernels for {dtype}"}
        compiling = Compiling(dtype, kinds, " and ".join(names[kind] for kind in kinds))
        _under_way.update((kind, compiling) for kind in kinds)


def wait(dtype="float32", attention=False):
    """start(dtype, attention), then wait for the children compiling what it asks for."""
    start(dtype, attention)
    for kind in [dtype] + [f"{dtype}-attention"] * attention:
        if kind in _under_way:
            _under_way[kind].wait()
