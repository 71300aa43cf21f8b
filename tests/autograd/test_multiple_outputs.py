"""Ops with several outputs (split, chunk, unbind): one node, one gradient per output."""

import numpy as np
import pytest

from autograd import Tensor, detect_anomaly, no_grad, print_graph


def _x(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def test_split_outputs_are_views_of_one_node_with_their_numbers():
    x = _x(3, 7)
    a, b, c = x.split([2, 4, 1], dim=1)
    assert a.grad_fn is b.grad_fn is c.grad_fn
    assert [t._output_nr for t in (a, b, c)] == [0, 1, 2]
    assert a.grad_fn.out_shape == ((3, 2), (3, 4), (3, 1))
    assert np.shares_memory(b.data, x.data)
    np.testing.assert_array_equal(np.concatenate([a.data, b.data, c.data], axis=1), x.data)


def test_unused_pieces_get_zero_gradients_and_used_ones_theirs():
    x = _x(4, 6)
    pieces = x.split(2, dim=1)
    (pieces[0] * 3).sum().backward()
    expected = np.zeros((4, 6))
    expected[:, :2] = 3
    np.testing.assert_array_equal(x.grad, expected)


def test_gradients_of_two_pieces_used_twice_accumulate():
    x = _x(6, 2)
    top, bottom = x.chunk(2)
    (top * bottom + top).sum().backward()
    np.testing.assert_allclose(x.grad, np.concatenate([x.data[3:] + 1, x.data[:3]]))


def test_backward_may_start_at_one_output_of_a_split():
    x = _x(2, 5)
    pieces = x.unbind(1)
    upstream = np.arange(2.0)
    pieces[3].backward(upstream)
    expected = np.zeros((2, 5))
    expected[:, 3] = upstream
    np.testing.assert_array_equal(x.grad, expected)


def test_hooks_and_retained_grads_belong_to_their_own_output():
    x = _x(3, 4)
    left, right = (x * 1).split(2, dim=1)
    seen = []
    left.register_hook(lambda g: seen.append(("left", g.copy())))
    right.register_hook(lambda g: g * 10)           # replaces right's gradient only
    right.retain_grad()
    (left.sum() + (right * 2).sum()).backward()
    assert [name for name, _ in seen] == ["left"]
    np.testing.assert_array_equal(seen[0][1], np.ones((3, 2)))
    np.testing.assert_array_equal(right.grad, np.full((3, 2), 20.0))   # after the hook
    assert left.grad is None
    np.testing.assert_array_equal(x.grad, np.concatenate([np.ones((3, 2)), np.full((3, 2), 20.0)], axis=1))


def test_split_of_a_non_differentiable_tensor_and_under_no_grad_records_nothing():
    with no_grad():
        pieces = _x(4, 2).split(1)
    assert all(p.grad_fn is None and not p.requires_grad for p in pieces)
    assert all(p.grad_fn is None for p in Tensor(np.ones((2, 2))).unbind())


def test_second_backward_through_a_split_is_an_error():
    x = _x(4)
    a, b = x.split(2)
    loss = (a * b).sum()
    loss.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        loss.backward()


def test_graph_printing_and_anomaly_mode_handle_several_outputs(capsys):
    x = _x(2, 4)
    a, b = x.split(2, dim=1)
    with detect_anomaly():
        loss = (a * b).sum()
        loss.backward()
    print_graph(loss)
    assert "Split" in capsys.readouterr().out


@pytest.mark.parametrize("call, error, words", [
    (lambda x: x.split([2, 2], dim=1), ValueError, "do not add up to the size 5"),
    (lambda x: x.split([6, -1], dim=1), ValueError, "do not add up"),
    (lambda x: x.split(0), ValueError, "split_size must be positive"),
    (lambda x: x.split(1, dim=2), IndexError, "out of range"),
    (lambda x: x.chunk(0), ValueError, "chunks must be positive"),
    (lambda x: x.unbind(-3), IndexError, "out of range"),
])
def test_bad_splits_say_what_was_wrong(call, error, words):
    with pytest.raises(error, match=words):
        call(_x(3, 5))


def test_split_sizes_match_pytorchs_rules():
    x = _x(7, 2)
    assert [p.shape[0] for p in x.split(3)] == [3, 3, 1]
    assert [p.shape[0] for p in x.chunk(3)] == [3, 3, 1]
    assert [p.shape[0] for p in x.chunk(4)] == [2, 2, 2, 1]
    assert [p.shape[0] for p in _x(6, 1).chunk(4)] == [2, 2, 2]        # fewer pieces than asked
    assert [p.shape for p in x.unbind(1)] == [(7,), (7,)]
