"""Anomaly detection: find the op where a NaN or an infinity first appears.

    with autograd.detect_anomaly():
        loss = model(x)          # each op's output is checked as it is made
        loss.backward()          # each op's input gradients are checked as they are made

In this mode every node records the stack that created it (which costs time, so it is off
otherwise).  The first op whose forward output, or whose backward's input gradient, holds
a NaN or an infinity raises `AnomalyError`, naming the op, the node's shapes, which pass,
and the line of your code that created the node.  (PyTorch's `detect_anomaly` checks
the backward pass only; checking forward outputs too finds a `log(0)` where it happens.)
Ops whose outputs may be infinite by design (a mask filled with -inf) are listed in
`INFINITE_BY_DESIGN` and checked for NaN only.
"""

import contextlib
import os
import traceback

import numpy as np

_enabled = False
INFINITE_BY_DESIGN = {"MaskedFill", "Where"}
_ENGINE_FOLDERS = (os.path.dirname(os.path.abspath(__file__)),)


class AnomalyError(FloatingPointError):
    """A NaN or infinity appeared; `.node` is the op's node, `.stack` where it was created."""

    def __init__(self, message, node, stack):
        super().__init__(message)
        self.node, self.stack = node, stack


def is_anomaly_enabled():
    return _enabled


@contextlib.contextmanager
def detect_anomaly():
    """Check every op's output and every gradient for NaN and infinity while inside."""
    global _enabled
    previous, _enabled = _enabled, True
    try:
        yield
    finally:
        _enabled = previous


def creation_stack():
    """The stack of the code creating a node, without this module's and the engine's frames."""
    return [frame for frame in traceback.extract_stack()[:-1]
            if not os.path.abspath(frame.filename).startswith(_ENGINE_FOLDERS)]


def _where(stack):
    if not stack:
        return "(no stack recorded: was the node made outside detect_anomaly?)"
    frame = stack[-1]
    line = f": {frame.line}" if frame.line else ""               # no source to quote from stdin or -c
    return f'{frame.filename}, line {frame.lineno}, in {frame.name}{line}'


def _bad(array):
    return np.issubdtype(np.asarray(array).dtype, np.floating) and not np.isfinite(array).all()


def check_forward(node, inputs, out):
    """Raise if the forward output of `node` holds NaN (or inf, for most ops)."""
    out = np.asarray(out)
    if not np.issubdtype(out.dtype, np.floating):
        return
    bad = np.isnan(out).any() if node.name in INFINITE_BY_DESIGN else not np.isfinite(out).all()
    if bad:
        kind = "NaN" if np.isnan(out).any() else "infinity"
        shapes = ", ".join(str(t.shape) for t in inputs)
        already = [i for i, t in enumerate(inputs) if _bad(t.data)]
        cause = f"; its inputs {already} already held NaN or infinity" if already else ""
        stack = getattr(node, "creation_stack", None)
        raise AnomalyError(f"detect_anomaly: the forward pass of {node.name}{node.where} produced {kind} "
                           f"(inputs {shapes} -> output {out.shape}){cause}; created at {_where(stack)}", node, stack)


def check_backward(node, returned):
    """In anomaly mode, raise if a gradient that `node.backward` returned (one array, or a
    tuple of one per input) holds NaN or inf."""
    if not _enabled:
        return
    for i, g in enumerate(returned if isinstance(returned, tuple) else (returned,)):
        if g is not None and _bad(g):
            kind = "NaN" if np.isnan(g).any() else "infinity"
            raise AnomalyError(
                f"detect_anomaly: the backward pass of {node.name} (node {node!r}) returned {kind} in the "
                f"gradient of its input {i} (shape {node.inputs[i].shape}); the node was created at "
                f"{_where(getattr(node, 'creation_stack', None))}", node, getattr(node, "creation_stack", None))
