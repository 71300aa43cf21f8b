"""Small helpers shared by the tests."""

import numpy as np

from autograd import Tensor

_rng = np.random.default_rng(0)


def leaf(*shape, low=None, seed=None):
    """A float64 leaf tensor that requires grad, with random values (all > low if given)."""
    rng = _rng if seed is None else np.random.default_rng(seed)
    data = rng.standard_normal(shape)
    if low is not None:
        data = low + np.abs(data) + 0.1
    return Tensor(data, requires_grad=True)


def const(*shape, seed=None):
    rng = _rng if seed is None else np.random.default_rng(seed)
    return Tensor(rng.standard_normal(shape))
