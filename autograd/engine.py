"""The backward pass: walk the graph from the output to the leaves, calling each op's backward.

`Tensor.backward()` lands here.  Step through `run_backward` in a debugger to watch
reverse-mode differentiation happen one node at a time.
"""

import numpy as np

from autograd import anomaly


def graph_nodes(root_node, for_backward=False):
    """Every node reachable from `root_node`, each listed after all nodes it depends on.

    Kahn's algorithm, with explicit lists (no recursion, so a chain of 100,000 ops is
    fine): first count, for each reachable node, how many reachable nodes take its output
    as an input; then list nodes from the root down, a node once all its consumers are
    listed; reversed, that puts every input before the ops that use it.  (The scalar
    engine's topological_order, an exercise, gets such an order by a depth-first walk.)
    for_backward: a node whose saved arrays were freed by an earlier backward stops the
    search with an error, before any gradient is written.
    """
    consumers, stack = {root_node: 0}, [root_node]
    while stack:
        node = stack.pop()
        if for_backward and node.freed:
            raise RuntimeError(
                f"Trying to backward through the graph a second time: the {node.name} node "
                f"(output shape {node.out_shape}) already freed its saved arrays. "
                "Call backward(retain_graph=True) the first time if you need to backward twice.")
        for t in node.inputs:
            if t._node is not None:
                if t._node not in consumers:
                    consumers[t._node] = 0
                    stack.append(t._node)
                consumers[t._node] += 1
    outputs_first, ready = [], [root_node]
    while ready:
        node = ready.pop()
        outputs_first.append(node)
        for t in node.inputs:
            if t._node is not None:
                consumers[t._node] -= 1
                if consumers[t._node] == 0:
                    ready.append(t._node)
    return outputs_first[::-1]


def held_by(node, saved):
    """The arrays a node holds: those it saved for backward and any other it keeps as an attribute."""
    return [*saved, *(value for value in vars(node).values() if isinstance(value, np.ndarray))]


def _unshared(g, others):
    """Whether g can become a leaf's .grad as it is: C-contiguous, and sharing memory with
    none of `others` (the node's upstream gradients, its other inputs' gradients and the
    arrays it holds), so that nothing else sees it change when an optimizer scales or zeroes
    .grad in place.  Add's backward, for one, hands its upstream gradient to both inputs:
    then both leaves get copies.  (np.may_share_memory compares the arrays' address ranges
    only: an overlap it cannot rule out costs a copy, never a wrong gradient.)"""
    return g.flags.c_contiguous and not any(isinstance(other, np.ndarray) and np.may_share_memory(g, other)
                                            for other in others)


def run_backward(root, grad, retain_graph=False):
    """Accumulate d(root)/d(leaf) * grad into the .grad of every leaf that requires it.

    root: a Tensor produced by an op; grad: d(loss)/d(root), same shape as root.
    (In pdb, `next` over the graph_nodes line, then `step` into node.backward.)
    """
    order = graph_nodes(root._node, for_backward=True)
    grads = accumulate({}, root, grad)   # node -> [d(root)/d(output) for each of its outputs], accumulated
    for node in reversed(order):     # outputs first, inputs last
        out_grads = output_grads(node, grads.pop(node))
        input_grads = node.backward(*out_grads)
        saved = node.saved_tensors
        if not retain_graph:
            node.saved_tensors = None
            node.freed = True
        if not isinstance(input_grads, tuple):
            input_grads = (input_grads,)
        if anomaly.is_anomaly_enabled():
            anomaly.check_backward(node, input_grads)
        input_grads = checked_shapes(node, input_grads)
        for i, (t, needs, g) in enumerate(zip(node.inputs, node.needs_input_grad, input_grads)):
            if not needs or g is None:
                continue
            if g.dtype != t.data.dtype:
                g = g.astype(t.data.dtype)
            if t._node is None:            # a leaf: accumulate into .grad, as PyTorch does
                if t._hooks:
                    g = run_hooks(t._hooks, g).copy()      # a hook may have kept the array
                if t.grad is not None:
                    t.grad = t.grad + g
                elif _unshared(g, (*out_grads, *input_grads[:i], *input_grads[i + 1:], *held_by(node, saved))):
                    t.grad = g                 # this node's own fresh array: kept, not copied
                else:
                    t.grad = g.copy()          # shared with something else: .grad gets its own memory
            else:
                accumulate(grads, t, g)


def checked_shapes(node, input_grads):
    """Each needed gradient summed to its input's shape (unbroadcast); a backward whose
    gradient cannot be (a bug in the op) is an error naming the op, the input and both
    shapes, raised before any gradient is stored."""
    reduced = []
    for i, (t, needs, g) in enumerate(zip(node.inputs, node.needs_input_grad, input_grads)):
        if needs and g is not None:
            g = np.asarray(g)
            try:
                g = unbroadcast(g, t.data.shape)
            except ValueError:
                pass                                         # the shape test below names the problem
            if g.shape != t.data.shape:
                raise ValueError(f"{node.name}.backward returned a gradient of shape {np.shape(input_grads[i])} "
                                 f"for its input {i}, of shape {t.data.shape}: a gradient has its input's shape")
        reduced.append(g)
    return tuple(reduced)


def accumulate(grads, t, g):
    """Add g to the gradient of op output t (output t._output_nr of node t._node) in
    grads, and return grads."""
    slots = grads.get(t._node)
    if slots is None:
        slots = grads[t._node] = [None] * t._node.num_outputs
    i = t._output_nr
    slots[i] = g if slots[i] is None else slots[i] + g
    return grads


def output_grads(node, slots):
    """The gradients of node's outputs, ready for node.backward: zeros for an output that
    no gradient reached (one piece of a split that the loss never used), then each output's
    hooks (Tensor.register_hook) and retained .grad (Tensor.retain_grad)."""
    for i, g in enumerate(slots):
        if g is None:
            several = node.num_outputs > 1
            slots[i] = np.zeros(node.out_shape[i] if several else node.out_shape,
                                node.out_dtype[i] if several else node.out_dtype)
    for i, hooks in (node.hooks or {}).items():
        slots[i] = run_hooks(hooks, slots[i])
    for i, kept in (node.retained or {}).items():
        kept = kept()
        if kept is not None:
            kept.grad = slots[i].copy() if kept.grad is None else kept.grad + slots[i]
    return slots


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
