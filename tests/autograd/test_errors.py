"""Bad input gets a clear error naming the op and the shapes, before anything changes."""

import numpy as np
import pytest

from autograd import Tensor
from tests.helpers import leaf


def test_matmul_inner_dimension_mismatch_names_both_shapes():
    with pytest.raises(ValueError, match=r"(?s)inner dimensions differ: \(2, 3\) @ \(4, 5\).*"
                                         r"in MatMul.forward, input shapes: \(2, 3\), \(4, 5\)"):
        leaf(2, 3) @ leaf(4, 5)


def test_shapes_that_do_not_broadcast():
    with pytest.raises(ValueError, match=r"(?s)broadcast.*in Add.forward, input shapes: \(2, 3\), \(4,\)"):
        leaf(2, 3) + leaf(4)


def test_reshape_to_a_different_size():
    with pytest.raises(ValueError, match=r"cannot reshape a tensor of shape \(2, 3\) \(6 elements\) to \(4, 2\)"):
        leaf(2, 3).reshape(4, 2)


@pytest.mark.parametrize("call", [lambda t: t.sum(dim=2), lambda t: t.transpose(0, 5), lambda t: t.max(dim=(0, 4))])
def test_invalid_dim(call):
    with pytest.raises(IndexError, match=r"dim -?\d+ is out of range for a tensor with 2 dims"):
        call(leaf(2, 3))


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
@pytest.mark.parametrize("dim", [-3, 2, 7])
def test_invalid_dim_of_a_row_wise_op_is_named_by_numpy(name, dim):
    """The softmax family checks dim with numpy's normalize_axis_index (C: no frame for a
    debugger's `s`), whose message names the op, the dim and the tensor's dims."""
    with pytest.raises(IndexError, match=rf"{name}: axis {dim} is out of bounds for array of dimension 2"):
        getattr(leaf(2, 3), name)(dim)
    with pytest.raises(TypeError, match="integer"):
        getattr(leaf(2, 3), name)(1.5)


def test_masked_fill_needs_a_boolean_mask_of_a_broadcastable_shape():
    with pytest.raises(TypeError, match="boolean, got dtype int64"):
        leaf(2, 3).masked_fill(np.array([1, 0, 1]), 0.0)
    with pytest.raises(ValueError, match=r"mask of shape \(4, 2, 3\) does not broadcast to the tensor's shape \(2, 3\)"):
        leaf(2, 3).masked_fill(np.ones((4, 2, 3), bool), 0.0)


def test_index_out_of_range_names_the_op():
    with pytest.raises(IndexError, match=r"(?s)index 5 is out of bounds.*in Index.forward"):
        leaf(3, 2)[np.array([0, 5])]


def test_item_of_many_elements():
    with pytest.raises(ValueError, match=r"only a one-element tensor.*\(2,\)"):
        Tensor([1.0, 2.0]).item()


def test_failed_op_leaves_inputs_unchanged():
    a = leaf(2, 3)
    before = a.data.copy()
    with pytest.raises(ValueError):
        a @ leaf(2, 3)
    np.testing.assert_array_equal(a.data, before)
    assert a.grad is None


def test_an_error_in_an_ops_forward_keeps_its_traceback():
    """The traceback (and a post-mortem debugger) ends at the failing line of the op's
    forward, not in Function.apply; the op and the shapes are in a note."""
    with pytest.raises(ValueError) as info:
        leaf(2, 3) @ leaf(4, 5)
    last = info.traceback[-1]
    assert last.name == "forward" and last.path.name == "matmul.py"
    assert info.value.__notes__ == ["in MatMul.forward, input shapes: (2, 3), (4, 5)"]


def test_softmax_dim_error_says_softmax_once():
    with pytest.raises(IndexError) as info:
        leaf(2, 3).softmax(-3)
    assert str(info.value).lower().count("softmax") == 1
