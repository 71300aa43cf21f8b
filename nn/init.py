"""Parameter initialisation, drawing from `autograd.default_generator()` unless given a
numpy Generator: the same seed gives the same parameters, bit for bit.

Under `skip_init()` nothing is drawn: a model built there holds uninitialised memory, for
weights about to be read from a file."""

import contextlib

import numpy as np

from autograd.random import default_generator

_skipping = False


@contextlib.contextmanager
def skip_init():
    """Within it, uniform and normal return uninitialised arrays (np.empty) and draw nothing
    from any generator, as PyTorch's torch.nn.utils.skip_init: for a model whose every
    parameter is about to be overwritten (loaded).  Drawing a float64 sample for each weight
    matrix would cost time and, for a large embedding, a transient copy twice its float32
    size; np.empty's pages take memory only once written."""
    global _skipping
    before, _skipping = _skipping, True
    try:
        yield
    finally:
        _skipping = before


def uniform(shape, bound, generator=None, dtype=np.float32):
    if _skipping:
        return np.empty(shape, dtype)
    rng = generator or default_generator()
    return rng.uniform(-bound, bound, size=shape).astype(dtype)


def normal(shape, std=1.0, generator=None, dtype=np.float32):
    if _skipping:
        return np.empty(shape, dtype)
    rng = generator or default_generator()
    return (std * rng.standard_normal(size=shape)).astype(dtype)


def xavier_uniform(shape, gain=1.0, generator=None, dtype=np.float32):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_out, fan_in = shape[0], shape[1]
    return uniform(shape, gain * np.sqrt(6.0 / (fan_in + fan_out)), generator, dtype)
