"""PyTorch's graph semantics, each asserted."""

import weakref

import numpy as np
import pytest

from autograd import Tensor, no_grad, enable_grad, is_grad_enabled
from autograd.function import Function
from tests.helpers import leaf


def test_leaf_gradients_accumulate_across_backward_calls():
    a = Tensor(np.array([1.0, 2.0]), requires_grad=True)
    (a * 3).sum().backward()
    (a * 3).sum().backward()
    np.testing.assert_array_equal(a.grad, [6.0, 6.0])


class _Handing(Function):
    """y = 2 x; backward makes a fresh gradient and, if asked, keeps a reference to it."""
    made = []

    def forward(ctx, x, keep=False):
        ctx.keep = keep
        return 2 * x

    def backward(ctx, grad):
        fresh = 2 * grad
        _Handing.made.append(weakref.ref(fresh))
        if ctx.keep:
            ctx.kept = fresh
        return fresh


def test_a_leafs_grad_shares_memory_with_nothing_else():
    """A leaf's .grad is memory of its own: a gradient that backward has just made, one that
    the node keeps, one that two leaves receive, a view of an upstream gradient and a
    transposed one all become copies, so that an optimizer scaling .grad in place changes
    nothing else."""
    a = leaf(2, 3)
    _Handing.apply(a).sum().backward()
    assert a.grad.flags.owndata and np.array_equal(a.grad, 2 * np.ones((2, 3)))
    b = leaf(2, 3)
    y = _Handing.apply(b, keep=True)
    y.sum().backward()
    assert _Handing.made[-1]() is not b.grad and np.array_equal(b.grad, 2 * np.ones((2, 3)))
    c, d = leaf(2, 3), leaf(2, 3)
    (c + d).backward(np.ones((2, 3)))                          # Add hands one array to both
    assert not np.shares_memory(c.grad, d.grad)
    c.grad *= 5                                                # as an optimizer scales in place
    np.testing.assert_array_equal(d.grad, np.ones((2, 3)))
    e = leaf(6)
    upstream = np.arange(6.0)
    e.reshape(2, 3).backward(upstream.reshape(2, 3))           # a view of the caller's array
    assert not np.shares_memory(e.grad, upstream)
    f = leaf(6)
    _Handing.apply(f.reshape(2, 3)).sum().backward()           # Reshape's view of its upstream gradient
    assert f.grad.base is None and np.array_equal(f.grad, 2 * np.ones(6))
    g = leaf(2, 3)
    _Handing.apply(g.T).sum().backward()                       # not C-contiguous: copied
    assert g.grad.flags.c_contiguous and not np.shares_memory(g.grad, _Handing.made[-1]())


def test_intermediate_grad_is_none_unless_retained():
    a = Tensor(np.array([1.0, -2.0]), requires_grad=True)
    b = a * 2
    c = a * 3
    c.retain_grad()
    (b * c).sum().backward()
    assert b.grad is None
    np.testing.assert_allclose(c.grad, b.data)


def test_backward_on_non_scalar_without_grad_is_an_error():
    with pytest.raises(RuntimeError, match=r"one-element output, got shape \(2, 3\)"):
        (leaf(2, 3) * 2).backward()


def test_backward_with_grad_of_wrong_shape_is_an_error():
    with pytest.raises(ValueError, match=r"grad has shape \(3, 2\) but the tensor has shape \(2, 3\)"):
        (leaf(2, 3) * 2).backward(np.ones((3, 2)))


def test_second_backward_through_freed_graph_raises_and_retain_graph_allows_it():
    a = leaf(3)
    y = (a.exp() * 2).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_allclose(a.grad, 4 * np.exp(a.data))
    with pytest.raises(RuntimeError, match="backward through the graph a second time.*retain_graph=True"):
        y.backward()
    np.testing.assert_allclose(a.grad, 4 * np.exp(a.data))   # unchanged by the refused call


def test_no_grad_builds_no_graph():
    a = leaf(2)
    with no_grad():
        assert not is_grad_enabled()
        b = a * 2
        with enable_grad():
            c = a * 2
    assert is_grad_enabled()
    assert not b.requires_grad and b.grad_fn is None
    assert c.requires_grad and c.grad_fn.name == "Mul"


def test_detach_shares_data_and_stops_gradient():
    a = leaf(3)
    d = (a * 2).detach()
    assert d.grad_fn is None and not d.requires_grad
    y = (a * d).sum()
    y.backward()
    np.testing.assert_allclose(a.grad, d.data)


def test_reused_node_gets_both_contributions():
    a = Tensor(np.array([1.5, -2.0]), requires_grad=True)
    b = a + a
    c = b * b          # c = 4 a^2, dc/da = 8a
    c.sum().backward()
    np.testing.assert_allclose(a.grad, 8 * a.data)


def test_long_chain_backpropagates_without_recursion_error():
    a = Tensor(np.array(1.0), requires_grad=True)
    x = a
    for _ in range(100_000):
        x = x * 1.0
    x.backward()
    assert a.grad == 1.0


def test_requires_grad_on_integer_tensor_is_an_error():
    with pytest.raises(TypeError, match="floating-point.*int64"):
        Tensor([1, 2, 3], requires_grad=True)


def test_backward_without_grad_requirement_is_an_error():
    with pytest.raises(RuntimeError, match="does not require grad"):
        (Tensor([1.0]) * 2).sum().backward()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_flows_end_to_end(dtype):
    a = Tensor(np.ones((2, 3), dtype), requires_grad=True)
    w = Tensor(np.ones((3, 4), dtype), requires_grad=True)
    y = ((a @ w).relu().softmax(-1) * 2.0).log_softmax(-1).mean()
    y.backward()
    assert y.dtype == dtype and a.grad.dtype == dtype and w.grad.dtype == dtype


def test_python_numbers_give_float32_and_ints_int64():
    assert Tensor(1.5).dtype == np.float32
    assert Tensor([[1.0, 2.0]]).dtype == np.float32
    assert Tensor([1, 2]).dtype == np.int64
    assert Tensor(np.zeros(2)).dtype == np.float64
    assert (Tensor(np.zeros(2, np.float32)) * 2.5).dtype == np.float32


def test_comparisons_give_boolean_tensors_without_grad():
    a = leaf(2, 3)
    m = a > 0
    assert m.dtype == np.bool_ and not m.requires_grad
    np.testing.assert_array_equal((a == a).data, np.ones((2, 3), bool))


def test_repr_names_shape_dtype_and_op():
    a = leaf(2, 3)
    r = repr(a @ leaf(3, 4))
    assert "shape=(2, 4)" in r and "float64" in r and "grad_fn=MatMul" in r
    assert repr((a @ leaf(3, 4)).grad_fn) == "<MatMul node, output shape (2, 4)>"


def test_backward_method_is_named_after_its_op():
    from autograd.ops import MatMul
    assert MatMul.backward.__qualname__ == "MatMul.backward"


def test_print_graph_lists_ops_and_shapes():
    from autograd import print_graph
    a, b = leaf(2, 3), leaf(3)
    y = (a * b).sum()
    y.backward()
    text = print_graph(y)
    assert text.splitlines()[0].startswith("Sum") and "Mul" in text
    assert "leaf (2, 3) float64, grad shape (2, 3)" in text


def test_draw_graph_writes_an_image(tmp_path):
    from autograd import draw_graph
    a, b = leaf(2), leaf(2)
    path = draw_graph(((a * b).tanh() + a).sum(), tmp_path / "graph.png")
    assert path.stat().st_size > 1000


@pytest.fixture
def box_labels(monkeypatch):
    """The text of every box draw_graph draws, in order (matplotlib's Axes.text recorded)."""
    import matplotlib.axes
    labels = []
    original_text = matplotlib.axes.Axes.text

    def text(ax, x, y, label, *args, **kw):
        labels.append(label)
        return original_text(ax, x, y, label, *args, **kw)
    monkeypatch.setattr(matplotlib.axes.Axes, "text", text)
    return labels


def test_draw_graph_draws_an_arrow_for_every_use_of_a_value(monkeypatch, tmp_path, box_labels):
    """a * a takes a twice: two arrows, bowed apart (one straight arrow would hide the square);
    leaves named as given."""
    import matplotlib.axes
    from autograd import draw_graph
    drawn = []
    original = matplotlib.axes.Axes.annotate

    def annotate(ax, *args, **kw):
        drawn.append(kw["arrowprops"]["connectionstyle"])
        return original(ax, *args, **kw)
    monkeypatch.setattr(matplotlib.axes.Axes, "annotate", annotate)
    labels = box_labels
    a, b = leaf(2), leaf(2)
    t = (a * b).tanh()
    draw_graph((t * t + a).sum(), tmp_path / "graph.png", names={"a": a, "b": b})
    assert sorted(label.split("\n")[0] for label in labels if label.startswith("leaf")) == ["leaf a", "leaf b"]
    assert len(drawn) == 2 + 1 + 2 + 2 + 1              # Mul(a, b), Tanh, Mul(t, t), Add, Sum
    assert sorted(drawn).count("arc3,rad=0.0") == 6 and {"arc3,rad=-0.175", "arc3,rad=0.175"} <= set(drawn)


def test_draw_graph_shows_the_gradient_an_inner_tensor_kept(tmp_path, box_labels):
    """After backward, a box shows its output's gradient where that tensor kept it (retain_grad):
    the values themselves, not only for the leaves; a tensor that kept none shows none."""
    from autograd import draw_graph
    rng = np.random.default_rng(3)
    a, b = Tensor(rng.standard_normal(2), requires_grad=True), Tensor(rng.standard_normal(2), requires_grad=True)
    kept, forgotten = a * b, (a + b)
    kept.retain_grad()
    out = (kept.tanh() - forgotten).sum()
    out.backward()
    draw_graph(out, tmp_path / "graph.png")
    by_op = {label.split("\n")[0]: label for label in box_labels}
    expected = np.array2string(kept.grad, precision=3, suppress_small=True)
    assert by_op["Mul"].endswith(f"grad {expected}") and not np.allclose(kept.grad, 1.0)
    assert "grad" not in by_op["Add"] and "grad" not in by_op["Tanh"]


def test_print_graph_names_parameters_and_keeps_columns_for_long_op_names():
    import nn
    from autograd import print_graph
    layer = nn.Linear(3, 2)
    x = Tensor(np.ones((4, 3), np.float32))
    text = print_graph(layer(x).log_softmax(-1).sum(), names=layer)
    assert "leaf weight (2, 3) float32" in text and "leaf bias (2,) float32" in text
    arrows = [line.index("->") for line in text.splitlines() if "->" in line]
    ops = [line.split("->")[0].strip() for line in text.splitlines() if "->" in line]
    assert "LogSoftmax" in ops and all(line.split("->")[0].endswith(" ") for line in text.splitlines() if "->" in line)
    assert len(set(arrows)) == 1                     # one column, however long the op's name


def test_the_graph_can_be_printed_and_drawn_after_backward(tmp_path):
    from autograd import draw_graph, print_graph
    a, b = leaf(2, 3), leaf(3)
    y = (a * b).tanh().sum()
    y.backward()
    assert "Tanh" in print_graph(y)
    assert draw_graph(y, tmp_path / "graph.png").stat().st_size > 1000


@pytest.mark.parametrize("seed", [0, 1])
def test_the_tours_drawing_writes_every_leafs_gradient(seed):
    """The tour's graph (demos.tour's expression): w's (3, 2) gradient as well as b's, each
    value as backward left it; a leaf too large to print whole gives its range."""
    from autograd.engine import graph_nodes
    from autograd.graph import _boxes
    from demos.tour import expression
    rng = np.random.default_rng(seed)
    x = Tensor(rng.standard_normal((2, 3)))
    w, b = Tensor(rng.standard_normal((3, 2)), requires_grad=True), Tensor(rng.standard_normal(2), requires_grad=True)
    big = Tensor(rng.standard_normal((4, 5)), requires_grad=True)
    loss = expression(x, w, b) + (big * big).sum()
    loss.backward()
    labels = {id(t): label for _, label, _, t in _boxes(graph_nodes(loss._node), {}) if t is not None}     # the leaves
    for tensor in (w, b):
        printed = labels[id(tensor)].split("grad ", 1)[1]
        values = [float(v) for v in printed.replace("[", " ").replace("]", " ").split()]
        np.testing.assert_allclose(values, tensor.grad.ravel(), atol=5e-4)
    assert f"from {big.grad.min():.3g} to {big.grad.max():.3g}" in labels[id(big)]
    assert "grad" not in labels[id(x)]                     # a constant has no gradient
