"""The kernels: the few array functions the ops spend their time in, in three tiers behind one switch.

    tier     where                          what it is
    numpy    kernels/reference.py           each kernel's definition, in numpy
    loops    kernels/loops.py               matmul, softmax, log-softmax and their backwards as
                                            plain Numba loops, the code a learner steps into
    fast     autograd/engine_room/          the speed engine (its README); the default

Ops call `kernels.matmul(a, b)`, `kernels.softmax(x)`, ... (the names in KERNELS; each one's
meaning is its numpy definition in reference.py).  Each name here IS the chosen tier's
function, bound when the tier is first used: `s` on an op's kernel call lands in the tier's
own code, with no frame of this switch in between.  Every tier offers the same names and
signatures; a tier that does not write a kernel runs its numpy definition.  Choose with the
environment variable AUTOGRAD_KERNELS=numpy|loops|fast before import, or `use_tier(name)` at
run time.  NUMBA_DISABLE_JIT=1 on its own chooses "loops": turning the JIT off means
stepping into loops one can read.  An engine room that cannot be loaded (deleted, or failing
to build) leaves the loops tier in its place, said in one line on stderr.  In a student
copy that hands out an exercise a faster tier answers too (softmax, Adam's step, ...), those
kernels run their numpy definitions, the exercise's region, in every tier (twins.py), said
once.

A debugger opens the classroom: when one is tracing as the kernels are chosen (pdb and
demos.debug, VS Code's debugpy, PyCharm: sys.settrace, or on Python 3.12+ a tool holding
sys.monitoring's DEBUGGER_ID) and AUTOGRAD_KERNELS is not set, the tier is "loops", each
loop run as the Python it is written in (Numba's py_func) where the debugger may step into
it (loops.run_as_python), and `stepping()` is true, which turns fused attention into the
composed ops (transformer/attention.py); said in one line on stderr.  AUTOGRAD_KERNELS=fast
keeps the engine room under a debugger.

This file is the one place in the classroom that knows the engine room exists.
"""

import importlib.util
import os
import sys
import types

from autograd.kernels import reference
from autograd.kernels.twins import kernels_cut

TIERS = ("numpy", "loops", "fast")
KERNELS = ("matmul", "matmul_grad", "softmax", "softmax_backward", "log_softmax", "log_softmax_backward", "layer_norm",
           "layer_norm_backward", "gelu", "gelu_backward", "relu", "relu_backward", "masked_fill", "index_add_rows",
           "adam_step", "sum_of_squares", "attention_forward", "attention_backward", "rotate_pairs")

COMPILED = {f"{__name__}.loops": ("the loops tier's", "about a second each"),
            "autograd.engine_room": ("the engine room's", "from under a second to about ten seconds each")}
# the kernels Numba compiles, by module: their name on the line that announces a compile, and roughly how long
# one of them takes to compile (python -m demos.bench.kernels measures each kernel's compile time)

_tier = None         # the chosen tier's name
_current = None      # the chosen tier's kernels once bound below (None until the first kernel call)
_announcing = False  # whether Numba tells us of each compile (_announce_compiling)
_said_cut = False    # whether the kernels a student copy runs in numpy were named (_namespace)
_as_python = None    # where the loops run as Python for a debugger (use_tier's stepping): loops.run_as_python


def _namespace(module):
    """The tier's kernels: the module's own, the numpy definition for any it does not write
    or whose twin this student copy is without (twins.py)."""
    global _said_cut
    cut = kernels_cut()
    if cut and not _said_cut:
        print(f"autograd: in this student copy {', '.join(cut)} run their numpy definitions (reference.py), the "
              "exercises' own code, in every tier: their faster twins are cut from it", file=sys.stderr, flush=True)
        _said_cut = True
    return types.SimpleNamespace(**{name: getattr(reference if name in cut else module, name, getattr(reference, name))
                                    for name in KERNELS})


def _engine_room(step, *args):
    """The engine room after engine_room.<step>(*args) ("ready", "prepare" or "start"), or
    None if it cannot be imported or that step fails: then the loops tier is chosen instead,
    said in one line on stderr.  The classroom runs without the engine room, only slower."""
    try:
        from autograd import engine_room
        getattr(engine_room, step)(*args)
        return engine_room
    except Exception as err:          # deleted, or failing to build: any reason means "run without it"
        _say_loops_instead(f"{type(err).__name__}: {err}")
        use_tier("loops")
        return None


def _say_loops_instead(reason):
    """The one line that says the engine room is not used, and why."""
    print(f"autograd: the engine room (autograd/engine_room/) cannot be loaded ({reason}); "
          "running the loops tier instead", file=sys.stderr, flush=True)


def _load(name):
    """The kernels of tier `name`, ready to call (the loops tier's if the engine room cannot be loaded)."""
    if name == "numpy":
        return reference
    engine_room = _engine_room("ready") if name == "fast" else None
    if engine_room is not None:
        return _namespace(engine_room)
    from autograd.kernels import loops
    loops.run_as_python(_as_python)                   # (at the first load: use_tier could not tell it)
    return _namespace(loops)


def _bind():
    """Load the chosen tier and make each kernel name of this module its function."""
    global _current
    if _tier != "numpy":
        _announce_compiling()                         # before the engine room readies its kernels
    _current = _load(_tier)
    globals().update((name, getattr(_current, name)) for name in KERNELS)


def _announce_compiling():
    """Have Numba say, in one line on stderr, when it starts compiling a kernel of this
    project in this process: which, why (read from its cache) and roughly how long
    (compile_notice.py), so that a wait, a debugger's step or a first training step, says
    why.  Loading a compiled kernel from Numba's cache says nothing.  Registered once,
    before the first kernel is loaded or prepared."""
    global _announcing
    if not _announcing:
        from autograd.kernels import compile_notice
        compile_notice.listen(COMPILED)
        _announcing = True


def __getattr__(name):
    """A kernel name not bound yet: the first kernel call loads the chosen tier, so that
    importing autograd (as the scalar engine's demos do) compiles nothing."""
    if name not in KERNELS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _bind()
    return globals()[name]


def use_tier(name, stepping=False):
    """Send every kernel call to tier `name`: "numpy", "loops" or "fast" (loaded at the next call).
    stepping=True (the loops tier only): its loops run as Python where a debugger may step
    into them, and attention is composed: what a debugger gets (see the top of this file)."""
    global _tier, _current, _as_python
    if name not in TIERS:
        raise ValueError(f"unknown kernel tier {name!r}; expected one of {', '.join(TIERS)}")
    if stepping and name != "loops":
        raise ValueError(f"stepping=True needs the loops tier (the one a debugger steps into), not {name!r}")
    # as Python where a sys.settrace debugger traces the loops' callers, or always for one that does not trace
    _tier, _current, _as_python = name, None, ("traced" if sys.gettrace() else "always") if stepping else None
    if f"{__name__}.loops" in sys.modules:              # loaded already: its loops compiled again, or Python
        sys.modules[f"{__name__}.loops"].run_as_python(_as_python)
    for kernel in KERNELS:
        globals().pop(kernel, None)


def tier():
    """The name of the tier the ops use now."""
    return _tier


def stepping():
    """Whether the kernels were chosen for a debugger to step into: the loops tier, run as
    Python where the debugger may enter them.  Fused attention asks, and runs composed then."""
    return _as_python is not None


def debugger_tracing():
    """Whether a debugger is tracing this program: a sys.settrace tracer (pdb, debugpy,
    PyCharm; coverage.py's line counter is no debugger), or a tool holding sys.monitoring's
    DEBUGGER_ID (Python 3.12+, where debuggers may use it instead)."""
    tracer = sys.gettrace()
    if tracer is not None and not type(getattr(tracer, "__self__", tracer)).__module__.startswith("coverage"):
        return True
    monitoring = getattr(sys, "monitoring", None)
    return monitoring is not None and monitoring.get_tool(monitoring.DEBUGGER_ID) is not None


def prepare(dtype="float32", fused_attention=False):
    """Make the chosen tier ready before a training loop starts its clock, so that no step
    pays for compiling: the one hook a training loop calls.  The fast tier compiles its
    kernels here the first time (saying so), and for a model with fused attention those
    kernels too; it also keeps freed memory for the next step (engine_room/allocator.py).
    The loops tier, with the JIT on, compiles (or loads) its kernels for dtype here, saying so."""
    if _tier != "numpy":
        _announce_compiling()                         # before the engine room prepares its kernels
    if _tier == "fast":
        _engine_room("prepare", dtype, fused_attention and "attention_forward" not in kernels_cut())
    if _current is None:
        _bind()
    if _tier == "loops":
        from autograd.kernels import loops
        loops.warmup(dtype, skip=kernels_cut())


def prepare_in_background(dtype="float32", fused_attention=False):
    """Start what prepare() does first, without waiting for it: the fast tier starts
    compiling the kernels (in child processes) if this is their first run, and prepare()
    later waits for them.  A demo calls this before it reads its data, so the two overlap."""
    if _tier == "fast":
        _engine_room("start", dtype, fused_attention and "attention_forward" not in kernels_cut())


def _default_tier():
    """(tier, stepping): AUTOGRAD_KERNELS if set; else the loops run as Python under a
    debugger; else "loops" with the JIT off or without the engine room, "fast" otherwise."""
    if "AUTOGRAD_KERNELS" in os.environ:
        return os.environ["AUTOGRAD_KERNELS"], False
    if debugger_tracing():
        print("autograd: a debugger is tracing, so the kernels are the loops tier, run as Python where you "
              "step into them (autograd/kernels/loops.py); AUTOGRAD_KERNELS=fast keeps the engine room",
              file=sys.stderr, flush=True)
        return "loops", True
    if os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return "loops", False
    if importlib.util.find_spec("autograd.engine_room") is None:     # the engine room deleted: the loops, slower
        _say_loops_instead("the folder is absent")
        return "loops", False
    return "fast", False


use_tier(*_default_tier())
