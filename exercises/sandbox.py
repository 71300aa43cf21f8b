"""Running checks in child processes, each with a time limit, several at once.

Each check runs in a child forked from the grader (POSIX fork: what the grader imported
before any learner code ran, numpy, numba, the pristine project, is shared rather than
imported again, so a check costs milliseconds). A module the child imports afresh comes
from `root`, some files' text replaced in memory (the learner's regions spliced in:
`overrides`). The child runs one job, the check, and writes its verdict to a pipe. The grader kills a child that outlives the time
limit, and turns a child that dies without a verdict (a signal, os._exit, a crash in C) into
one line naming the exercise: nothing the learner's code does can stop the other checks.
Each child also has a memory limit (its address space, RLIMIT_AS): an answer that allocates
past it fails with one line naming the limit, not a machine out of memory.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import resource
import select
import signal
import sys
import time

ENVIRONMENT = {"AUTOGRAD_KERNELS": "numpy", "NUMBA_DISABLE_JIT": "1", "MPLBACKEND": "Agg",
               "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
MEMORY_MB = 2048       # a check's child, numpy and the project imported, peaks near 300 MB of address space


def prepare_grader():
    """Set the environment every check runs in and import what all of them share (before
    any fork): the numpy kernels, the plain-Python loop kernels (Numba's JIT off)."""
    os.environ.update(ENVIRONMENT)
    import numba  # noqa: F401
    import numpy  # noqa: F401


class OverrideFinder(importlib.abc.MetaPathFinder):
    """Imports the files named in `overrides` ({absolute path: source text}) from that text
    instead of from disk (whether or not the file is on disk), and none of those whose text
    is None (not in the project as made); every other module as usual."""

    def __init__(self, overrides):
        self.overrides = overrides

    def _origin(self, fullname, path):
        """The overridden file that would be module `fullname`, on disk or not, or None."""
        last = fullname.rpartition(".")[2]
        candidates = [os.path.join(entry, *parts) for entry in (path or sys.path)
                      for parts in ((last, "__init__.py"), (last + ".py",))]
        return next((c for c in candidates if c in self.overrides), None)

    def find_spec(self, fullname, path, target=None):
        origin = self._origin(fullname, path)
        if origin is None:
            return None                                   # the usual finders' business
        if self.overrides[origin] is None:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        package = [os.path.dirname(origin)] if origin.endswith("__init__.py") else None
        loader = TextLoader(fullname, origin, self.overrides[origin])
        return importlib.util.spec_from_file_location(fullname, origin, loader=loader,
                                                      submodule_search_locations=package)


class TextLoader(importlib.machinery.SourceFileLoader):
    """A source loader that reads a module's code from a string, never from a cached .pyc."""

    def __init__(self, fullname, path, text):
        super().__init__(fullname, path)
        self.text = text

    def get_code(self, fullname):
        return compile(self.text, self.path, "exec", dont_inherit=True)


def _over_memory(verdict, memory_mb):
    """The verdict, or one line naming the memory limit if the check ran out of it."""
    if verdict[0] != "passed" and "MemoryError" in verdict[1]:
        return "not yet", f"used more than {memory_mb:g} MB of memory (the limit is --memory)"
    return verdict


def _child(root, overrides, job, write_end, memory_mb):
    """In the forked child: limit its memory, import from root with the overrides, run job(),
    report, exit."""
    try:
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        limit = int(memory_mb * 2 ** 20) if hard == resource.RLIM_INFINITY else min(int(memory_mb * 2 ** 20), hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        os.setpgid(0, 0)
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        sys.path.insert(0, root)
        os.chdir(root)
        sys.meta_path.insert(0, OverrideFinder({os.path.join(root, f): t for f, t in overrides.items()}))
        verdict = _over_memory(job(), memory_mb)
    except BaseException as err:                          # noqa: BLE001  anything at all, reported
        verdict = _over_memory(("not yet", f"crashed: {type(err).__name__} escaped the check: {err}"), memory_mb)
    os.write(write_end, json.dumps(verdict).encode())
    os._exit(0)


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _verdict_of_dead_child(status, output):
    if output:
        return tuple(json.loads(output))
    if os.WIFSIGNALED(status):
        return "not yet", f"crashed: killed by {_signal_name(os.WTERMSIG(status))}"
    return "not yet", f"crashed: the process exited with status {os.waitstatus_to_exitcode(status)}"


def run_jobs(tasks, timeout, jobs, memory_mb=MEMORY_MB):
    """Run each task (key, root, overrides, job) in a forked child, at most `jobs` at a time;
    yields (key, (status, message)) as each ends. job() runs in the child, in at most
    `memory_mb` of address space, and returns the verdict (status, message); a child still
    running after `timeout` seconds is killed."""
    pending, running = list(tasks)[::-1], {}
    while pending or running:
        while pending and len(running) < max(1, jobs):
            key, root, overrides, job = pending.pop()
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read_end)
                _child(root, overrides, job, write_end, memory_mb)
            os.close(write_end)
            running[read_end] = (key, pid, time.monotonic() + timeout, [])
        wait = max(0.0, min(deadline for _, _, deadline, _ in running.values()) - time.monotonic())
        ready, _, _ = select.select(list(running), [], [], wait)
        for fd in ready:
            chunk = os.read(fd, 65536)
            if chunk:
                running[fd][3].append(chunk)
                continue
            key, pid, _, output = running.pop(fd)
            os.close(fd)
            _, status = os.waitpid(pid, 0)
            yield key, _verdict_of_dead_child(status, b"".join(output))
        now = time.monotonic()
        for fd in [fd for fd, (_, _, deadline, _) in running.items() if deadline <= now and fd not in ready]:
            key, pid, _, _ = running.pop(fd)
            _kill(pid)
            os.close(fd)
            yield key, ("timed out", f"timed out after {timeout:g} s (an endless loop? the time limit is --timeout)")


def _kill(pid):
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            target()
        except ProcessLookupError:
            pass
    os.waitpid(pid, 0)
