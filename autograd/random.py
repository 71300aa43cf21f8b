"""One place where randomness comes from: seed it and every run repeats exactly.

`manual_seed(seed)` resets the default generator; parameter init and dropout draw from
`default_generator()` unless they are handed a `numpy.random.Generator` of their own.
"""

import numpy as np

_generator = np.random.default_rng(0)


def manual_seed(seed):
    """Reset the default generator to `seed` and return it."""
    global _generator
    _generator = np.random.default_rng(seed)
    return _generator


def default_generator():
    return _generator
