"""From model code to an op's forward in a few `s` presses under `python -m demos.debug`.

A learner stopped on `weights = scores.softmax(-1)` in transformer/attention.py presses `s`
until they stand in Softmax.forward; one stopped in Linear.forward, until LinearFn.forward.
Each press lands on a line that does something (demos/debug.py: no "--Call--" stop on a
`def`, none on a bare `try:` or in a comprehension's frame) and the way goes through
Function.apply, whose lines a learner reads (learning path, step 2).  Counted here as pdb
prints them: one "> file(line)function()" per press.
"""

import ast
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOCATION = re.compile(r"(?:^|\(Pdb\) )> (\S+?\.py)\((\d+)\)(<?\w+>?)\(\)", re.M)    # pdb's "> file(line)function()"
TRAIN = ["demos.train", "--task", "reverse", "--steps", "1", "--batch-size", "4", "--d-model", "16", "--heads", "2",
         "--d-ff", "32"]

CASES = [   # breakpoint, the op's forward, most presses, the functions on the way (in order)
    ("transformer/attention.py:scaled_dot_product_attention:scores.softmax(-1)", ("autograd/ops/softmax.py", "forward"),
     5, ["softmax", "apply"]),
    ("nn/layers.py:Linear.forward", ("autograd/ops/linear.py", "forward"), 7, ["forward", "linear", "apply"]),
    # a line of three ops (q * scale, k's transpose, their product): through each op's apply and forward in turn,
    # none of the bookkeeping they call (STEPPED_OVER), no second stop on a function's last line
    ("transformer/attention.py:scaled_dot_product_attention:scores = (score", ("autograd/ops/matmul.py", "forward"),
     38, ["scaled_dot_scores", "__mul__", "apply", "forward", "apply", "transpose", "apply", "forward", "apply",
          "__matmul__", "apply"]),
]


def stops(spec, presses, tmp_path):
    """[(file relative to the project, function)] where pdb stands at the breakpoint and after each `s`."""
    result = subprocess.run([sys.executable, "-m", "demos.debug", "-b", spec, *TRAIN, "--out", str(tmp_path)],
                            input="s\n" * presses + "q\n", capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env={k: v for k, v in os.environ.items() if k != "AUTOGRAD_KERNELS"})
    places = [(os.path.relpath(path, ROOT), function) for path, _, function in LOCATION.findall(result.stdout)]
    assert len(places) > presses, f"pdb stopped {len(places)} times:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    return places


@pytest.mark.parametrize("spec,target,most,on_the_way", CASES, ids=["attention-to-Softmax", "Linear-to-LinearFn",
                                                                     "three-ops-to-MatMul"])
def test_s_reaches_the_ops_forward_in_a_few_presses(spec, target, most, on_the_way, tmp_path):
    places = stops(spec, most + 3, tmp_path)
    reached = [i for i, place in enumerate(places) if place == target]
    assert reached and reached[0] <= most, f"{spec}: {target} not within {most} presses: {places}"
    between = [function for _, function in places[1:reached[0]]]
    assert [f for i, f in enumerate(between) if i == 0 or between[i - 1] != f] == on_the_way, between
    assert places[reached[0] - 1] == ("autograd/function.py", "apply")      # from apply's ctx.forward line
    assert all(function not in ("<listcomp>", "<genexpr>") for _, function in places[:reached[0]]), places


def test_every_function_stepped_over_is_there_to_step_over():
    """demos/debug.py's STEPPED_OVER names functions by file and qualified name: each must
    still be defined there, or the list has gone stale and `s` wanders into it again."""
    from demos.debug import STEPPED_OVER, _function_node
    for path, qualname in sorted(STEPPED_OVER):
        with open(os.path.join(ROOT, path)) as f:
            assert _function_node(ast.parse(f.read()), qualname.split(".")) is not None, (path, qualname)


@pytest.mark.parametrize("spec, commands, caller", [
    # run_backward returns to Tensor.backward's last line, which returns to the tour's next line
    ("autograd/engine.py:run_backward", "r\nn\n", ("demos/tour.py", "main")),
    # optimize, the step's last call, returns into the GPT job's step: its check that the loss is finite
    ("nn/recipe.py:optimize:loss.item", "n\n", ("transformer/training/lm.py", "step"))])
def test_leaving_a_function_stops_in_its_caller_entered_before_the_breakpoint(spec, commands, caller, tmp_path):
    """pdb traces only frames it entered while something could stop there: callers begun before
    the first breakpoint were run through, so leaving the function ran on to the next stop
    elsewhere (learner trial 6). demos.debug traces the callers of every stop."""
    demo = ["demos.tour"] if "engine" in spec else \
        ["demos.gpt", "--attention", "composed", "--max-iters", "1", "--eval-iters", "1", "--sample-tokens", "1",
         "--layers", "1", "--heads", "2", "--d-model", "16", "--block-size", "8", "--batch-size", "2"]
    result = subprocess.run([sys.executable, "-m", "demos.debug", "-b", spec, *demo, "--out", str(tmp_path)],
                            input=commands + "q\n", capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env={**os.environ, "AUTOGRAD_KERNELS": "numpy"})
    places = [(os.path.relpath(path, ROOT), function) for path, _, function in LOCATION.findall(result.stdout)]
    assert places and places[-1] == caller, f"{places}\n{result.stdout[-1500:]}{result.stderr[-1500:]}"
