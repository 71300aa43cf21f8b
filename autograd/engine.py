"""The backward pass: walk the graph from the output to the leaves, calling each op's backward.

`Tensor.backward()` lands here.  `run_backward` is the idea whole: the chain rule, one node
at a time from the output back to the leaves.  PyTorch's bookkeeping stays out of its way,
each piece under its own name: the outputs' hooks and retained gradients
(`Function.output_grads`), anomaly checks, broadcast sums and dtype casts (`input_grads`),
a leaf's hooks and its own memory (`Tensor._accumulate_grad`), freed graphs
(`Function.release`).  Step through `run_backward` in a debugger to watch reverse-mode
differentiation happen one node at a time.
"""

import numpy as np

from autograd import anomaly
from autograd.scalar import topological_order


def graph_nodes(root_node, for_backward=False):
    """Every node reachable from `root_node`, each listed after all nodes it depends on.

    This is the scalar engine's `topological_order` (an exercise) walking the Tensor graph:
    each node is shown to it as a Value is, its `parents` the nodes that made its inputs.
    The walk is depth-first with its stack written out by hand (so a chain of 100,000 ops
    is fine), going into a node's last input first; it fixes the order in which an input
    used several times sums its gradients, so it is the same on every run.  for_backward: a
    node whose saved arrays were freed by an earlier backward stops the walk with an error,
    before any gradient is written.
    """
    seen_as = {}                          # node -> the one _AsValue it is shown as

    def as_value(node):
        if node not in seen_as:
            seen_as[node] = _AsValue(_entered(node, for_backward), as_value)
        return seen_as[node]

    return [walked.node for walked in topological_order(as_value(root_node))]


class _AsValue:
    """A node of the Tensor graph as topological_order sees a Value: `parents`, the nodes
    that made its inputs (leaves have none), each shown through as_value."""

    __slots__ = ("node", "_as_value")

    def __init__(self, node, as_value):
        self.node, self._as_value = node, as_value

    @property
    def parents(self):
        return [self._as_value(t._node) for t in self.node.inputs if t._node is not None]


def _entered(node, for_backward):
    """node, once checked that a backward can still go through it."""
    if for_backward and node.freed:
        raise RuntimeError(
            f"Trying to backward through the graph a second time: the {node.name} node{node.where} "
            f"(output shape {node.out_shape}) already freed its saved arrays. "
            "Call backward(retain_graph=True) the first time if you need to backward twice.")
    return node


def run_backward(root, grad, retain_graph=False):
    """Accumulate d(root)/d(leaf) * grad into the .grad of every leaf that requires it.

    root: a Tensor produced by an op; grad: d(loss)/d(root), same shape as root.
    Each node's backward turns the gradients of its outputs into those of its inputs (the
    chain rule); an input used by several nodes gets the sum of what each sends it.
    In pdb: `n` down to the line that calls node.backward, then `s` enters that op's
    backward (the root's op first).
    """
    order = graph_nodes(root._node, for_backward=True)
    grads = accumulate({}, root, grad)   # node -> [d(root)/d(output) for each of its outputs], accumulated
    for node in reversed(order):         # outputs first, inputs last
        out_grads = node.output_grads(grads.pop(node))         # zeros where none came; hooks, retain_grad
        for t, g in input_grads(node, node.backward(*out_grads)):
            if t._node is None:          # a leaf: into its .grad (after its hooks), as PyTorch does
                t._accumulate_grad(g)
            else:
                accumulate(grads, t, g)
        node.release(retain_graph)       # its saved arrays freed, unless retain_graph


def accumulate(grads, t, g):
    """Add g to the gradient of op output t (output t._output_nr of node t._node) in
    grads, and return grads."""
    slots = grads.setdefault(t._node, [None] * t._node.num_outputs)
    slots[t._output_nr] = g if slots[t._output_nr] is None else slots[t._output_nr] + g
    return grads


def input_grads(node, returned):
    """(input, gradient) for each input of node that needs a gradient, from what
    node.backward returned (one array, or a tuple of one per input, None where an input
    needs none): checked for NaN and inf in anomaly mode, then each fitted to its input,
    all before any gradient is stored."""
    anomaly.check_backward(node, returned)
    needed = zip(node.inputs, node.needs_input_grad, returned if isinstance(returned, tuple) else (returned,))
    return [(t, fitted(node, i, t, g)) for i, (t, needs, g) in enumerate(needed) if needs and g is not None]


def fitted(node, i, t, g):
    """Gradient g of input i, tensor t: summed over the dims broadcasting added or
    stretched (unbroadcast) and cast to t's dtype."""
    fit = unbroadcast(np.asarray(g), t.data.shape) if np.ndim(g) >= t.data.ndim else np.asarray(g)
    return fit.astype(t.data.dtype, copy=False) if fit.shape == t.data.shape else wrong_shape(node, i, t, g)


def wrong_shape(node, i, t, g):
    """Raise the error for a gradient that cannot take its input's shape (a bug in the op),
    naming the op, the input and both shapes."""
    raise ValueError(f"{node.name}.backward{node.where} returned a gradient of shape {np.shape(g)} for its input {i}, "
                     f"of shape {t.data.shape}: a gradient has its input's shape")


def unbroadcast(grad, shape):
    """Sum `grad` over the dimensions that broadcasting added or stretched to reach `shape`.

    If y = x + b with x of shape (3, 4) and b of shape (4,), then b was used 3 times,
    so dL/db is dL/dy summed over the first axis.
    """
    if grad.shape == shape:
        return grad
    # BEGIN EXERCISE unbroadcast
    extra = grad.ndim - len(shape)
    if extra < 0:
        raise ValueError(f"gradient of shape {grad.shape} cannot be reduced to shape {shape}")
    if extra:
        grad = grad.sum(axis=tuple(range(extra)))
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)
    if stretched:
        grad = grad.sum(axis=stretched, keepdims=True)
    # END EXERCISE
    return grad


def run_hooks(hooks, grad):
    """Pass a tensor's finished gradient through its hooks in order; a hook that returns
    an array replaces the gradient (same shape required), one that returns None keeps it."""
    for hook in list(hooks.values()):
        result = hook(grad)
        if result is not None:
            result = np.asarray(result.data if hasattr(result, "data") else result)
            if result.shape != grad.shape:
                raise ValueError(f"a gradient hook returned shape {result.shape}, expected {grad.shape}")
            grad = result.astype(grad.dtype, copy=False)
    return grad
