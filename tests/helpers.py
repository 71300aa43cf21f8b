"""Small helpers shared by the tests."""

import importlib.util

import numpy as np

from autograd import Tensor

_rng = np.random.default_rng(0)

# Whether autograd/engine_room/ (the fast tier) is here: the project works without it, on
# the loops tier, and the tests of the engine room itself are skipped for this reason.
ENGINE_ROOM = importlib.util.find_spec("autograd.engine_room") is not None
ENGINE_ROOM_ABSENT = "the engine room (autograd/engine_room/) is absent: the kernels run on the loops tier"


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
