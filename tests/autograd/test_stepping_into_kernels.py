"""From an op into its loop in a few `s` presses: pdb driven as a learner drives it.

With NUMBA_DISABLE_JIT=1 the registry chooses the loops tier and its kernels run as Python.
A subprocess runs one op under the project's pdb (demos/debug.py: library frames stepped
over), stops at the first line of the op's forward (or backward), and presses `s` until
the current frame is the loop function in autograd/kernels/loops.py.  Every frame passed
on the way must say what it is (a docstring).
"""

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOST_PRESSES = {"MatMul": 7, "Softmax": 6, "LogSoftmax": 6}              # 8 each while pdb stopped on every `def`
MOST_PRESSES_BACKWARD = {"MatMul": 10, "Softmax": 6, "LogSoftmax": 6}   # MatMul: its exercise region's lines first

DRIVER = """
import sys
import numpy as np
from autograd import Tensor
from demos.debug import ProjectPdb, breakpoint_line

op, method, call = sys.argv[1:4]
rng = np.random.default_rng(0)
a = Tensor(rng.standard_normal((2, 3, 4)), requires_grad=True)
b = Tensor(rng.standard_normal((4, 5)), requires_grad=True)
calls = {"matmul": lambda: a @ b, "softmax": lambda: a.softmax(1), "log_softmax": lambda: a.log_softmax(-1)}
out = calls[call]()
run = {"forward": calls[call], "backward": lambda: out.backward(Tensor(rng.standard_normal(out.shape)))}[method]
debug = ProjectPdb(stdin=sys.stdin, stdout=sys.stdout)
debug.set_break(*breakpoint_line(f"autograd/ops/{'matmul' if call == 'matmul' else 'softmax'}.py:{op}.{method}"))
debug.reset()
debug.botframe = sys._getframe()
debug.set_continue()
sys.settrace(debug.trace_dispatch)
try:
    run()
finally:
    sys.settrace(None)
"""

CASES = [("MatMul", "matmul", "matmul_loops"), ("Softmax", "softmax", "softmax_loops"),
         ("LogSoftmax", "log_softmax", "log_softmax_loops")]
BACKWARD_LOOPS = {"matmul_loops": "matmul_loops", "softmax_loops": "softmax_backward_loops",
                  "log_softmax_loops": "log_softmax_backward_loops"}
LOCATION = re.compile(r"(?:^|\(Pdb\) )> (\S+?\.py)\((\d+)\)(<?\w+>?)\(\)", re.M)    # pdb's "> file(line)function()"


def frames_stepped(op, method, call, presses=30):
    """[(file, function)] where pdb stands after each `s` from the first line of op.method
    (the first entry: the breakpoint itself)."""
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    env.pop("AUTOGRAD_KERNELS", None)
    result = subprocess.run([sys.executable, "-c", DRIVER, op, method, call], input="s\n" * presses + "q\n",
                            capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    places = [(os.path.relpath(path, ROOT), function) for path, _, function in LOCATION.findall(result.stdout)]
    assert places, f"pdb never stopped:\n{result.stdout}\n{result.stderr}"
    return places


def presses_to(places, loop):
    """How many `s` presses until the current frame is `loop` in loops.py (None: never)."""
    for presses, (path, function) in enumerate(places):
        if path == os.path.join("autograd", "kernels", "loops.py") and function == loop:
            return presses
    return None


def say_what_they_are(places, loop):
    """Every function passed on the way to `loop` says what it is: its docstring, or for an
    op's method its class's (the op's math)."""
    import importlib
    for path, function in places[:presses_to(places, loop)]:
        module = importlib.import_module(path[:-3].replace(os.sep, "."))
        owners = [obj for obj in vars(module).values() if isinstance(obj, type) and function in vars(obj)]
        docs = [getattr(module, function, None).__doc__ if hasattr(module, function) else None]
        docs += [vars(owner)[function].__doc__ or owner.__doc__ for owner in owners]
        assert any(docs), f"{path}:{function} says nothing of what it is"


@pytest.mark.parametrize("op,call,loop", CASES)
def test_forward_reaches_its_loop_in_a_few_presses(op, call, loop):
    places = frames_stepped(op, "forward", call)
    assert places[0][1] == "forward"
    presses = presses_to(places, loop)
    assert presses is not None and presses <= MOST_PRESSES[op], f"{op}.forward to {loop}: {places}"
    say_what_they_are(places, loop)


@pytest.mark.parametrize("op,call,loop", CASES)
def test_backward_reaches_its_loop_in_a_few_presses(op, call, loop):
    places = frames_stepped(op, "backward", call)
    assert places[0][1] == "backward"
    presses = presses_to(places, BACKWARD_LOOPS[loop])
    assert presses is not None and presses <= MOST_PRESSES_BACKWARD[op], f"{op}.backward to {BACKWARD_LOOPS[loop]}: {places}"
    say_what_they_are(places, BACKWARD_LOOPS[loop])
