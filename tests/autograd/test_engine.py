"""The backward pass (autograd/engine.py): what it refuses from an op's backward."""
import numpy as np
import pytest

from autograd import Function, Tensor
def test_a_backward_returning_a_gradient_of_the_wrong_shape_is_named_before_anything_is_stored():
    class RowSum(Function):
        """out = a summed over rows, kept 2-D; its backward (wrongly) forgets to expand."""

        def forward(ctx, a, b):
            return a.sum(axis=0, keepdims=True) + b

        def backward(ctx, grad):
            return grad, grad                       # (1, 3) for a (2, 3) input: wrong; (1, 3) for b: right

    a = Tensor(np.ones((2, 3)), requires_grad=True)
    b = Tensor(np.ones((1, 3)), requires_grad=True)
    with pytest.raises(ValueError, match=r"RowSum.backward returned a gradient of shape \(1, 3\) for its input 0, "
                                         r"of shape \(2, 3\)"):
        RowSum.apply(a, b).sum().backward()
    assert a.grad is None and b.grad is None


@pytest.mark.parametrize("wrong", [(2, 4, 3), (3,), (5,)])
def test_the_wrong_shape_named_is_the_one_backward_returned(wrong):
    """Also when unbroadcast could reduce part of it, or it has fewer dims than its input."""
    class Scale(Function):
        def forward(ctx, a):
            return 2 * a

        def backward(ctx, grad):
            return np.ones(wrong)

    a = Tensor(np.ones((4, 5)), requires_grad=True)
    with pytest.raises(ValueError, match=rf"Scale.backward returned a gradient of shape \({wrong[0]},"):
        Scale.apply(a).sum().backward()
    assert a.grad is None


def test_run_backward_reads_top_to_bottom_in_at_most_30_lines():
    """The walk, the chain rule and the accumulation; the bookkeeping lives in named helpers."""
    import ast
    import inspect

    from autograd import engine
    function = ast.parse(inspect.getsource(engine.run_backward)).body[0]
    body = function.body[1:]                                          # after the docstring
    assert body[-1].end_lineno - body[0].lineno + 1 <= 30


PDB_ADVICE = """
import sys
import numpy as np
from autograd import Tensor
from demos.debug import ProjectPdb, breakpoint_line
x = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
loss = (x * x).mean()
debug = ProjectPdb(stdin=sys.stdin, stdout=sys.stdout)
debug.set_break(*breakpoint_line("autograd/engine.py:run_backward"))
debug.reset()
debug.botframe = sys._getframe()
debug.set_continue()
sys.settrace(debug.trace_dispatch)
try:
    loss.backward()
finally:
    sys.settrace(None)
"""


def test_the_debugger_advice_in_run_backwards_docstring_is_literally_true():
    """`n` down to the line that calls node.backward, then `s` enters the root op's backward."""
    import os
    import re
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    result = subprocess.run([sys.executable, "-c", PDB_ADVICE], input="n\n" * 4 + "s\nq\n", capture_output=True,
                            text=True, cwd=root, timeout=300)
    stops = re.findall(r"> \S+?(\w+\.py)\(\d+\)(\w+)\(\)\n-> (.*)", result.stdout)
    assert [line for *_, line in stops[:5]][-1].strip().startswith("for t, g in input_grads(node, node.backward("), stops
    assert stops[5][:2] == ("reduce.py", "backward"), stops                 # Mean.backward: the root op's
