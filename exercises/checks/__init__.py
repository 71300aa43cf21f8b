"""The checks that grade each exercise, one module per part of the course: the judge.

Each check chooses inputs that expose the usual mistakes, has the learner's code run on
them in a child process apart from it (`task.call(probe, *inputs)`: exercises/sandbox.py runs
the probes of exercises/probes.py there, and only data comes back), and compares what comes
back with the definition: a gradient, a forward against the numpy definition
(exercises/checks/expected.py), a decoder on a model whose answers are known. On a mismatch
it names the property checked, the smallest failing case, expected against got and, when the
answer is a classic wrong one, the mistake. Nothing here runs the learner's code.
"""

import re

from exercises.catalog import EXERCISES
from exercises.checks import attention, cache, decoding, kernels, layers, scalar, tensors
from exercises.checks.feedback import Wrong, mistake
from exercises.child_text import mark, plain

CHECKS = {name[len("check_"):]: function for module in (scalar, tensors, kernels, layers, attention, decoding, cache)
          for name, function in vars(module).items() if name.startswith("check_")}
NEEDS = re.compile(r"^exercise (\w+): ")
NOT_STARTED = ("not yet", "not started: the region still raises NotImplementedError")
NEEDS_EXERCISE_START = "needs exercise "          # a check stopped at an exercise it runs, not written yet
NEEDS_EXERCISE = (NEEDS_EXERCISE_START + "{}, which this copy has not done yet: do it first "
                  "(the teacher's grade uses its solution)")
# The names a region must set because the code after it reads them, and nothing before it sets
# them (the hints say so, and also name those set before: unbroadcast's grad, kv_cache's k, v, past).
GIVEN_NAMES = {"matmul_backward": ("grad_a", "grad_b"), "layer_norm_backward": ("dx",), "linear": ("rows", "out"),
               "attention": ("weights",), "sinusoidal": ("table",)}


def _renamed(name, err):
    """The message for a NameError on a name the code after the region reads, else None."""
    given = GIVEN_NAMES.get(name, ())
    quoted = re.search(r"'(\w+)'", str(err))                 # an UnboundLocalError carries no .name
    missing = getattr(err, "name", None) or (quoted and quoted.group(1))
    if missing not in given:
        return None
    names = ", ".join(f"`{n}`" for n in given)
    return mistake("given names changed", f"the code after the region reads `{missing}`: keep the "
                   f"name{'s' if len(given) > 1 else ''} {names} for what the region computes")


def _where(err):
    """' (in FILE line N)': where in the project the child's exception came from, if it said."""
    return getattr(err, "where", "")


def run(name, task):
    """Run one exercise's check on a task child (exercises/sandbox.py's Task): (status,
    message), status "passed" or "not yet". A Crashed task (a death, a time-out) passes through."""
    from exercises.zygote import Crashed, Raised
    try:
        what = CHECKS[name](task)
    except Crashed:
        raise
    except Raised as err:
        return "not yet", f"raised {err.kind}: {err}{_where(err)}"
    except Wrong as err:
        return "not yet", str(err)
    except NotImplementedError as err:
        needed = NEEDS.match(plain(str(err)))
        needed = needed if needed and needed.group(1) in EXERCISES else None     # a name of ours, not the child's
        if needed and needed.group(1) != name:
            return "not yet", NEEDS_EXERCISE.format(needed.group(1))
        if needed:
            return NOT_STARTED
        return "not yet", f"raised NotImplementedError: {err}{_where(err)}"
    except NameError as err:
        return "not yet", _renamed(name, err) or f"raised NameError: {err}{_where(err)}"
    except BaseException as err:                         # noqa: BLE001  the learner's code may raise anything
        # raised here, by the judge's own code on the child's answer (int('...') of a string it
        # sent), the text may quote that answer: it is the child's, as its own exceptions are
        return "not yet", f"raised {type(err).__name__}: {mark(plain(str(err)), 4000)}{_where(err)}"
    return "passed", what
