"""Switching graph recording off: `with no_grad(): ...` builds no graph (as in PyTorch).

Used for evaluation, decoding and optimizer steps: the results have requires_grad=False
and no op saves anything for a backward pass that will never come.
"""

import contextlib

_grad_enabled = True


def is_grad_enabled():
    return _grad_enabled


@contextlib.contextmanager
def _set_grad_enabled(mode):
    global _grad_enabled
    previous, _grad_enabled = _grad_enabled, mode
    try:
        yield
    finally:
        _grad_enabled = previous


def no_grad():
    """Context manager under which ops record no graph."""
    return _set_grad_enabled(False)


def enable_grad():
    """Context manager that turns recording back on inside a `no_grad` block."""
    return _set_grad_enabled(True)
