"""The one line that says Numba is about to compile a kernel of this project: which, why, and
roughly how long it takes, so that a wait (a debugger's step, a first training step) is explained.

Numba fires its "numba:compile" event only when it compiles: a function it finds in its
on-disk cache for these argument types is loaded without the event, and without a line here.
Only a compile Numba starts on its own counts (one a compile starts inside it, a helper it
calls, is part of that compile's wait).  The reason is read from Numba's cache for that
function (cache=True keeps each build on disk, one per set of argument types):

    no cache for it           the function is not kept on disk: every new process compiles it
    no index file yet         the cache holds no build of it (a first run, or a fresh cache)
    an index, but stale       its source file, or Numba, changed since the cache built it
    an index, fresh           the cache holds builds for other argument types, not these

The line is said once per process for each group of kernels (a module and those under it,
with its name on the line and one kernel's rough compile time: the kernel registry passes the
loops tier's and the engine room's), at the first of them Numba compiles: it says how long each takes, and the others the
run needs compiled follow without a line of their own.
"""

import os
import sys

from numba.core import event, types

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def group_of(function, groups):
    """(the group's name, its wait) of a Python function Numba compiles, from groups {module:
    (name, wait)} (a module's submodules in its group too), or None if it is in none."""
    module = getattr(function, "__module__", None) or ""
    for prefix, group in groups.items():
        if module == prefix or module.startswith(prefix + "."):
            return group
    return None


def float_dtypes(args):
    """The float dtypes of the array arguments among Numba's argument types ("float32"), tuples opened."""
    found, pending = set(), list(args)
    while pending:
        arg = pending.pop()
        if isinstance(arg, types.BaseTuple):
            pending.extend(arg.types)
        elif isinstance(arg, types.Array) and isinstance(arg.dtype, types.Float):
            found.add(str(arg.dtype))
    return sorted(found)


def reason(dispatcher):
    """Why Numba compiles this dispatcher's function now, read from its cache (see the top)."""
    cache_file = getattr(getattr(dispatcher, "_cache", None), "_cache_file", None)
    index = getattr(cache_file, "_index_path", None)
    if index is None:
        return "it is not kept in Numba's cache, so every new process compiles it"
    if not os.path.exists(index):
        return "Numba's cache holds no build of it yet (a first run, or a fresh cache)"
    try:
        fresh = bool(cache_file._load_index())       # Numba's own reader: {} when the index is stale
    except Exception:                                 # an index Numba itself could not read: it rebuilds it
        fresh = False
    if not fresh:
        return "its source file, or Numba, changed since Numba's cache built it"
    return "Numba's cache holds builds of it for other argument types only"


def line(dispatcher, args, why, group):
    """The announcement of compiling dispatcher's function, of group (name, wait), for args, as `why`."""
    function = dispatcher.py_func
    whose, wait = group
    dtypes = float_dtypes(args)
    arrays = f" for {' and '.join(dtypes)} arrays" if dtypes else ""
    where = os.path.relpath(function.__code__.co_filename, PROJECT)
    later = "" if why.startswith("it is not kept") else "; later runs load them from the cache"
    return (f"autograd: compiling {function.__name__} ({where}){arrays} with Numba now, as {why}: {wait} for "
            f"{whose} kernels (this one, and any other this run needs compiled){later}")


class Announcer(event.Listener):
    """Says line() on `out` (stderr by default) at the start of the first compile of each group
    that Numba starts on its own (not one nested in another's)."""

    def __init__(self, groups, out=None):
        self.groups, self.out, self.depth, self.said = groups, out, 0, set()

    def on_start(self, ev):
        self.depth += 1
        if self.depth > 1:
            return
        dispatcher = ev.data["dispatcher"]
        group = group_of(dispatcher.py_func, self.groups)
        if group is not None and group not in self.said:
            self.said.add(group)
            print(line(dispatcher, ev.data["args"], reason(dispatcher), group), file=self.out or sys.stderr,
                  flush=True)

    def on_end(self, ev):
        self.depth -= 1


def listen(groups):
    """Register an Announcer of these groups with Numba (once per process: the caller keeps that promise)."""
    event.register("numba:compile", Announcer(groups))
