"""What a check says when an answer is wrong."""

import numpy as np


class Wrong(Exception):
    """The learner's answer is wrong; the message says how."""


def compare(what, got, expected, known_mistakes=(), atol=1e-6, rtol=1e-5):
    """Raise Wrong unless got equals expected; name a known mistake (value, message) it matches."""
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    for value, message in known_mistakes:
        value = np.asarray(value, dtype=float)
        if got.shape == value.shape and np.allclose(got, value, atol=atol, rtol=rtol, equal_nan=True) \
                and not np.allclose(value, expected, atol=atol, rtol=rtol):
            raise Wrong(f"{what}: {message}")
    if got.shape != expected.shape:
        raise Wrong(f"{what}: shape {got.shape}, expected {expected.shape}")
    close = np.isclose(got, expected, atol=atol, rtol=rtol, equal_nan=True)
    if not close.all():
        errors = np.where(np.isnan(got) != np.isnan(expected), np.inf, np.abs(np.nan_to_num(got - expected)))
        worst = np.unravel_index(np.argmax(errors), got.shape)
        raise Wrong(f"{what}: {int((~close).sum())} of {got.size} elements differ; the worst, at {tuple(map(int, worst))}: "
                    f"expected {expected[worst]:.6g}, got {got[worst]:.6g}")


def rng():
    return np.random.default_rng(0)
