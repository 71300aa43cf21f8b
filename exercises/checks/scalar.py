"""The checks of scalar."""

import math

import numpy as np

from exercises.checks.feedback import Wrong, compare, rng


def check_value_mul():
    from autograd.scalar import Value
    a, b = Value(2.0), Value(-3.0)
    (a * b).backward()
    compare("d(a*b)/da and d(a*b)/db for a=2, b=-3", [a.grad, b.grad], [-3.0, 2.0],
            [([2.0, -3.0], "each factor's gradient is out.grad times the OTHER factor's data")])
    x = Value(3.0)
    (x * x).backward()
    compare("d(x*x)/dx at x=3", x.grad, 6.0, [(3.0, "use += (not =): x is both factors, and both contributions count")])
    return "the product rule, and a Value used twice"


def check_topological_sort():
    from autograd.scalar import Value, topological_order
    a = Value(0.5)
    b, c = a * 2.0, a + 1.0
    d = (b * c).tanh()
    order = topological_order(d)
    if len(order) != len({id(v) for v in order}):
        raise Wrong("topological order: a Value appears more than once (a reached by two paths is listed twice; "
                    "keep a visited set)")
    position = {id(v): i for i, v in enumerate(order)}
    for v in order:
        for p in v.parents:
            if id(p) not in position:
                raise Wrong(f"topological order: {p!r}, a parent of {v!r}, is missing")
            if position[id(p)] > position[id(v)]:
                raise Wrong(f"topological order: {v!r} is listed before its parent {p!r}")
    if order[-1] is not d:
        raise Wrong("topological order: the output must come last")
    d.backward()
    h = 1e-6
    f = lambda x: math.tanh((2 * x) * (x + 1))   # noqa: E731
    compare("dd/da through the diamond a -> (2a, a+1) -> product -> tanh", a.grad, (f(0.5 + h) - f(0.5 - h)) / (2 * h))
    return "a diamond-shaped graph: order and gradient"
