"""Parameter initialisation, drawing from `autograd.default_generator()` unless given a
numpy Generator: the same seed gives the same parameters, bit for bit."""

import numpy as np

from autograd.random import default_generator


def uniform(shape, bound, generator=None, dtype=np.float32):
    rng = generator or default_generator()
    return rng.uniform(-bound, bound, size=shape).astype(dtype)


def normal(shape, std=1.0, generator=None, dtype=np.float32):
    rng = generator or default_generator()
    return (std * rng.standard_normal(size=shape)).astype(dtype)


def xavier_uniform(shape, gain=1.0, generator=None, dtype=np.float32):
    """U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio)."""
    fan_out, fan_in = shape[0], shape[1]
    return uniform(shape, gain * np.sqrt(6.0 / (fan_in + fan_out)), generator, dtype)
