"""`gradcheck`: prove a backward pass right by comparing it with finite differences.

For f: inputs -> output, the analytic Jacobian comes from backward passes (one per output
element, with a one-hot upstream gradient) and the numeric one from central differences
    dJ[i, j] ~ (f(x + eps e_j)[i] - f(x - eps e_j)[i]) / (2 eps).
Both must agree within |analytic - numeric| <= atol + rtol |numeric| everywhere, and one
more backward pass with a random upstream gradient v must give v^T J (numeric).
In float32 the rounding error of f swamps eps, so float64 inputs are required.
"""

import numpy as np

from autograd.grad_mode import enable_grad
from autograd.tensor import Tensor


class GradcheckError(AssertionError):
    """The analytic and numeric Jacobians disagree."""


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True):
    """True if fn's backward matches central differences for every input that requires grad.

    fn: called as fn(*inputs), returns one Tensor, or a tuple of them (an op with several
    outputs: their elements are checked as one output, the flattened outputs in order, each
    one-hot row seeding the backward of its own output only).  inputs: Tensors (those with
    requires_grad are checked; they must be float64) or other values passed through.
    Inputs are perturbed in place, so fn may also read them through a closure (how a
    layer's parameters are checked).  On a mismatch raises GradcheckError naming the input,
    the element, and both values (or returns False if raise_exception=False).
    """
    inputs = tuple(inputs)
    checked = _checked_inputs(inputs)
    with enable_grad():
        outs = _outputs(fn(*inputs))
        leaves = [inputs[i] for i in checked]
        analytic = [np.concatenate(rows) for rows in zip(*[_analytic_jacobians(out, leaves) for out in outs])]
        upstream = np.random.default_rng(1234).standard_normal(sum(out.numel() for out in outs))
        vjp = _backward_with(outs, leaves, upstream)
    for k, i in enumerate(checked):
        numeric = _numeric_jacobian(fn, inputs, inputs[i], eps)
        expected_vjp = upstream.reshape(-1) @ numeric
        for analytic_value, numeric_value, what in ((analytic[k], numeric, "Jacobian"),
                                                    (vjp[k][None, :], expected_vjp[None, :], "random-upstream VJP")):
            message = _mismatch(analytic_value, numeric_value, atol, rtol, f"{what} mismatch for input {i}",
                                inputs[i].shape)
            if message and raise_exception:
                raise GradcheckError(message)
            if message:              # raise_exception=False: report the mismatch as False
                return False
    return True


def _checked_inputs(inputs):
    """The positions of the inputs that require grad; each must be float64."""
    checked = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input requires grad")
    for i in checked:
        if inputs[i].dtype != np.float64:
            raise TypeError(f"gradcheck: input {i} has dtype {inputs[i].dtype}; "
                            "finite differences need float64 inputs")
    return checked


def _mismatch(analytic, numeric, atol, rtol, what, shape):
    """None if |analytic - numeric| <= atol + rtol |numeric| everywhere (both of shape
    (outputs, input elements)), else a message naming the first element that is not."""
    bad = np.abs(analytic - numeric) > atol + rtol * np.abs(numeric)
    if not bad.any():
        return None
    out_idx, in_flat = np.argwhere(bad)[0]
    element = np.unravel_index(in_flat, shape)
    return (f"gradcheck: {what} (shape {shape}) at element {tuple(int(e) for e in element)}, output element "
            f"{int(out_idx)}: analytic {analytic[out_idx, in_flat]:.8g} vs numeric {numeric[out_idx, in_flat]:.8g}")


def _outputs(out):
    """fn's result as a tuple of Tensors."""
    outs = out if isinstance(out, tuple) else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(f"gradcheck: fn must return a Tensor or a tuple of Tensors, got {type(o).__name__}")
    return outs


def _backward_with(outs, leaves, upstream):
    """v^T J for each leaf: a backward pass with upstream gradient v (one per output; the
    leaves' .grad add them up)."""
    saved = [x.grad for x in leaves]
    for x in leaves:
        x.grad = None
    start = 0
    for out in outs:
        v = upstream[start:start + out.numel()].reshape(out.shape)
        start += out.numel()
        if out.requires_grad:
            out.backward(v.astype(out.dtype), retain_graph=True)
    result = [np.zeros(x.numel()) if x.grad is None else x.grad.reshape(-1) for x in leaves]
    for x, g in zip(leaves, saved):
        x.grad = g
    return result


def _analytic_jacobians(out, leaves):
    """J[k] of shape (out.size, leaf_k.size), one backward pass per output element."""
    jacobians = [np.zeros((out.numel(), x.numel())) for x in leaves]
    if not out.requires_grad:   # the output does not depend on any checked input
        return jacobians
    saved = [x.grad for x in leaves]
    for row in range(out.numel()):
        for x in leaves:
            x.grad = None
        one_hot = np.zeros(out.numel(), dtype=out.dtype)
        one_hot[row] = 1
        out.backward(one_hot.reshape(out.shape), retain_graph=True)
        for J, x in zip(jacobians, leaves):
            if x.grad is not None:
                J[row] = x.grad.reshape(-1)
    for x, g in zip(leaves, saved):
        x.grad = g
    return jacobians


def _numeric_jacobian(fn, inputs, x, eps):
    """Central differences, perturbing x.data in place one element at a time."""
    flat = x.data.reshape(-1)   # a view when x.data is contiguous
    if not np.shares_memory(flat, x.data):
        raise ValueError("gradcheck: input data must be contiguous to be perturbed in place")
    columns = []
    for j in range(flat.size):
        original = flat[j]
        flat[j] = original + eps
        plus = _evaluate(fn, inputs)
        flat[j] = original - eps
        minus = _evaluate(fn, inputs)
        flat[j] = original
        columns.append((plus - minus) / (2 * eps))
    size = _evaluate(fn, inputs).size
    return np.stack(columns, axis=1) if columns else np.zeros((size, 0))


def _evaluate(fn, inputs):
    from autograd.grad_mode import no_grad
    with no_grad():
        return np.concatenate([np.array(out.data, dtype=np.float64).reshape(-1)   # a copy, never a view of x
                               for out in _outputs(fn(*inputs))])
