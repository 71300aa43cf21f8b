"""The numpy definitions of the scalar and tensor engines' exercises the checks compare with
(the product rule's gradients, unbroadcast, MatMul's gradients, the loop matmul), and what each
classic wrong answer gives (teacher-only, as numeric.py)."""

import numpy as np


# ----- the scalar engine -----

def scalar_grads(leaves, program, variant):
    """d(last value)/d(each leaf) of a program of ("mul" | "add", i, j) and ("tanh", i) steps
    over the values leaves + results so far, with Value.__mul__'s backward as `variant` does it."""
    values, grads = list(leaves), [0.0] * (len(leaves) + len(program))
    for op, *args in program:
        values.append(values[args[0]] * values[args[1]] if op == "mul" else values[args[0]] + values[args[1]]
                      if op == "add" else np.tanh(values[args[0]]))
    grads[-1] = 1.0
    for index in range(len(values) - 1, len(leaves) - 1, -1):
        op, *args = program[index - len(leaves)]
        g = grads[index]
        if op == "add":
            grads[args[0]] += g
            grads[args[1]] += g
        elif op == "tanh":
            grads[args[0]] += (1 - values[index] ** 2) * g
        else:
            _mul_backward(values, grads, args[0], args[1], g, variant)
    return np.array(grads[: len(leaves)])


def _mul_backward(values, grads, a, b, g, variant):
    if variant == "grad_not_data":                        # self.grad += other.grad * g; other.grad += self.grad * g
        grads[a] += grads[b] * g
        grads[b] += grads[a] * g
        return
    if variant == "out_data":                             # out.data where out.grad belongs
        g = values[a] * values[b]
    if variant == "same_once" and a == b:
        grads[a] += values[b] * g
        return
    own = {"no_upstream": (values[b], values[a]), "own_factor": (values[a] * g, values[b] * g),
           "one_factor": (values[b] * g, 0.0), "other_factor_only": (0.0, values[a] * g)}.get(variant,
                                                                                            (values[b] * g, values[a] * g))
    grads[a] = own[0] if variant in ("assign", "assign_first") else grads[a] + own[0]
    grads[b] = own[1] if variant in ("assign", "assign_second") else grads[b] + own[1]


# ----- tensors -----

# ----- the topological order: the orders classic wrong walks give -----

def walk_order(leaves, program, walk, reverse):
    """The indices of the program's values reachable from the last one, in the order a classic
    wrong walk lists them, each value's parents (as Value keeps them) taken in order or
    reversed: "breadth_first" reversed, "marked_at_push" (a value marked visited when pushed,
    not when expanded), "preorder" reversed, or "first_reached" (the preorder itself)."""
    parents = [()] * len(leaves) + [tuple(args) for _, *args in program]
    parents = [p[::-1] if reverse else p for p in parents]
    walks = {"breadth_first": _reversed_breadth_first, "marked_at_push": _marked_at_push,
             "preorder": lambda parents, root: _preorder(parents, root)[::-1], "first_reached": _preorder}
    return np.array(walks[walk](parents, len(parents) - 1), dtype=int)


def _reversed_breadth_first(parents, root):
    """A breadth-first walk from the root, reversed: can list a value before a parent reached by a longer path."""
    seen, queue, order = {root}, [root], []
    while queue:
        node = queue.pop(0)
        order.append(node)
        for p in parents[node]:
            if p not in seen:
                seen.add(p)
                queue.append(p)
    return order[::-1]


def _marked_at_push(parents, root):
    """A depth-first walk marking a value visited when pushed: a value reached again by another path
    is not pushed again, so it can be listed before a parent still on the stack."""
    order, marked, stack = [], {root}, [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if expanded:
            order.append(node)
            continue
        stack.append((node, True))
        for p in parents[node]:
            if p not in marked:
                marked.add(p)
                stack.append((p, False))
    return order


def _preorder(parents, root):
    """Each value listed when first popped (the output first); reversed, a topological order on trees only."""
    order, seen, stack = [], set(), [root]
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            order.append(node)
            stack.extend(parents[node])
    return order


def unbroadcast(grad, shape, variant):
    """grad summed back to shape (variant "right"), or as a classic wrong answer does it."""
    lead = tuple(range(grad.ndim - len(shape)))
    if variant == "leading_only":
        return grad.sum(axis=lead)
    if variant == "from_the_left":                        # shape's size-1 dims taken as grad's first dims
        grad = grad.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)
        return grad.sum(axis=tuple(range(grad.ndim - len(shape))))
    reduced = grad.sum(axis=tuple(range(len(shape), grad.ndim)) if variant == "trailing" else lead)
    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and reduced.shape[i] != 1)
    if variant == "mean":
        return grad.mean(axis=lead).mean(axis=stretched, keepdims=True) if lead else reduced.mean(axis=stretched,
                                                                                                keepdims=True)
    return reduced.sum(axis=stretched, keepdims=variant != "no_keepdims")


def _sum_to(x, shape):
    """x summed over the dims broadcasting added or stretched, back to shape."""
    x = x.sum(axis=tuple(range(x.ndim - len(shape))))
    return x.sum(axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True)


def _swap(x, variant):
    """The transpose of a (batch of) matrices, as the variant writes it."""
    return x.T if variant == "whole_transpose" else np.swapaxes(x, 0, 1) if variant == "axes_0_1" else \
        np.swapaxes(x, -1, -2)


def matmul_grads(a, b, g, variant):
    """[dL/dA, dL/dB] flattened and joined, for a, b of 2 dims or more and upstream g."""
    bt, at = _swap(b, variant), _swap(a, variant)
    da = g @ b if variant in ("b_not_transposed", "neither_transposed") else bt @ g if variant == "order_swapped" \
        else g @ bt
    db = a @ g if variant in ("a_not_transposed", "neither_transposed") else g @ at if variant == "order_swapped" \
        else at @ g
    if variant == "fold_reshaped" and a.ndim > 2 and b.ndim == 2:
        db = a.reshape(b.shape[0], -1) @ g.reshape(-1, b.shape[1])
    if variant == "db_transposed":
        db = np.swapaxes(db, -1, -2)
    return np.concatenate([np.ravel(_sum_to(da, a.shape)), np.ravel(_sum_to(db, b.shape))])


def matmul_vector_grads(a, b, g, first_batch_only=False):
    """[dL/dA, dL/dB] flattened and joined, where a or b is a vector: a 1-D a is a row (1, K)
    and a 1-D b a column (K, 1) for the product, that dim dropped again from the gradients;
    first_batch_only: dL/dA of a 1-D a from b's first matrix alone (a classic mistake)."""
    a2 = a[None, :] if a.ndim == 1 else a
    b2 = b[:, None] if b.ndim == 1 else b
    g2 = g[..., None] if b.ndim == 1 else g
    g2 = g2[..., None, :] if a.ndim == 1 else g2
    da = _sum_to(g2 @ np.swapaxes(b2, -1, -2), a2.shape).reshape(a.shape)
    db = _sum_to(np.swapaxes(a2, -1, -2) @ g2, b2.shape).reshape(b.shape)
    if first_batch_only:
        da = b.reshape((-1,) + b.shape[-2:])[0] @ g.reshape(-1, b.shape[-1])[0]
    return np.concatenate([np.ravel(da), np.ravel(db)])


def matmul_loops(a, b, variant):
    """a @ b for (T, M, K) and (T, K, N) as the loop kernel computes it, right or wrong."""
    if variant == "assign":
        return a[:, :, -1:] * b[:, -1:, :]
    if variant == "b_transposed":
        return a @ np.swapaxes(b, 1, 2)
    if variant == "k_short":
        return a[:, :, :-1] @ b[:, :-1, :]
    if variant == "batch_index_lost":                     # t stays 0: batch 0 summed once per batch
        out = np.zeros((a.shape[0], a.shape[1], b.shape[2]))
        out[0] = a.shape[0] * (a[0] @ b[0]) if a.shape[0] else 0
        return out
    if variant == "one_batch":
        return np.broadcast_to(a[:1] @ b[:1], (a.shape[0], a.shape[1], b.shape[2])) * \
            (np.arange(a.shape[0]) == 0)[:, None, None]
    return a @ b
