"""The checks of layers."""

import math

import numpy as np

from exercises.checks.feedback import Wrong, compare, rng


def check_linear():
    from autograd import Tensor
    from nn import functional as F
    r = rng()
    x, w, b = r.standard_normal((2, 3, 4)), r.standard_normal((5, 4)), r.standard_normal(5)
    try:
        got = F.linear(Tensor(x), Tensor(w), Tensor(b)).data
        no_bias = F.linear(Tensor(x), Tensor(w)).data
    except ValueError as err:
        raise Wrong(f"linear of x (2, 3, 4) with W (5, 4): {err}; W is (out, in), so y = x W^T") from None
    compare("linear: x (2, 3, 4), W (5, 4), b (5,)", got, x @ w.T + b)
    compare("linear without a bias", no_bias, x @ w.T)
    return "a batch of sequences, with and without a bias"


def check_embedding():
    from autograd import Tensor
    from nn import functional as F
    weight = Tensor(rng().standard_normal((7, 3)), requires_grad=True)
    ids = np.array([[1, 4, 1], [6, 0, 2]])
    out = F.embedding(ids, weight)
    compare("embedding of ids (2, 3) in a (7, 3) table", out.data, weight.data[ids])
    out.sum().backward()
    counts = np.bincount(ids.reshape(-1), minlength=7)[:, None] * np.ones(3)
    compare("the table's gradient (a repeated id accumulates)", weight.grad, counts)
    return "a (2, 3) batch of ids with a repeat, and its gradient"
