"""The scalar engine: its rules, and random graphs agreeing with the tensor engine."""

import math

import numpy as np
import pytest

from autograd import Tensor, Value


def test_value_gradients_of_a_small_expression():
    a, b = Value(2.0), Value(-3.0)
    c = a * b + b ** 2 / a - a.exp().log()   # c = ab + b^2/a - a
    c.backward()
    assert a.grad == pytest.approx(b.data - b.data ** 2 / a.data ** 2 - 1)
    assert b.grad == pytest.approx(a.data + 2 * b.data / a.data)


def test_value_reflected_operators_and_accumulation():
    a = Value(3.0)
    y = 1 - 2 / a + 4 * a - (-a)
    y.backward()
    assert y.data == pytest.approx(1 - 2 / 3 + 12 + 3)
    assert a.grad == pytest.approx(2 / 9 + 5)
    y.backward()
    assert a.grad == pytest.approx(2 * (2 / 9 + 5))   # accumulates, as in PyTorch


def test_value_activations():
    for x in (-1.3, 0.7):
        for name, f, df in [("tanh", math.tanh, lambda v: 1 - math.tanh(v) ** 2),
                            ("sigmoid", lambda v: 1 / (1 + math.exp(-v)),
                             lambda v: math.exp(-v) / (1 + math.exp(-v)) ** 2),
                            ("relu", lambda v: max(v, 0.0), lambda v: float(v > 0))]:
            a = Value(x)
            y = getattr(a, name)()
            y.backward()
            assert y.data == pytest.approx(f(x)) and a.grad == pytest.approx(df(x))


def test_value_long_chain():
    a = Value(1.0)
    x = a
    for _ in range(50_000):
        x = x * 1.0
    x.backward()
    assert a.grad == 1.0


def test_value_log_of_non_positive_is_an_error():
    with pytest.raises(ValueError, match="positive"):
        Value(-1.0).log()


UNARY = ["exp", "tanh", "sigmoid", "relu", "log"]
BINARY = ["+", "-", "*", "/"]


def _random_graph(rng, leaves, make_const, steps=25):
    """The same random expression, built from whatever leaf type is handed in."""
    nodes = list(leaves)
    for _ in range(steps):
        kind = rng.integers(3)
        a = nodes[rng.integers(len(nodes))]
        if kind == 0:
            op = UNARY[rng.integers(len(UNARY))]
            if op == "log":
                nodes.append((a * a + make_const(1.0)).log())
            elif op == "exp":
                nodes.append((a.tanh()).exp())
            else:
                nodes.append(getattr(a, op)())
        elif kind == 1:
            b = nodes[rng.integers(len(nodes))]
            op = BINARY[rng.integers(len(BINARY))]
            if op == "/":
                nodes.append(a / (b * b + make_const(0.5)))
            else:
                nodes.append({"+": a + b, "-": a - b, "*": a * b}[op])
        else:
            nodes.append(a ** 2 * make_const(0.3))
    out = nodes[-1]
    for n in nodes[len(leaves):-1]:   # every node feeds the output
        out = out + n * make_const(0.1)
    return out


@pytest.mark.parametrize("seed", range(10))
def test_value_and_tensor_agree_on_random_graphs(seed):
    x = np.random.default_rng(100 + seed).standard_normal(4)
    values = [Value(v) for v in x]
    tensors = [Tensor(np.array(v), requires_grad=True) for v in x]
    out_v = _random_graph(np.random.default_rng(seed), values, Value)
    out_t = _random_graph(np.random.default_rng(seed), tensors, lambda c: Tensor(np.array(c)))
    out_v.backward()
    out_t.backward()
    assert out_v.data == pytest.approx(out_t.item(), abs=1e-12, rel=1e-12)
    for v, t in zip(values, tensors):
        tg = 0.0 if t.grad is None else float(t.grad)
        assert v.grad == pytest.approx(tg, abs=1e-12, rel=1e-12)
