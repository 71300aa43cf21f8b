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
