"""Seeing the graph: a text printer and a matplotlib drawing (no graphviz needed)."""

import numpy as np

from autograd.engine import graph_nodes


def _describe(t):
    grad = "" if t.grad is None else f", grad shape {t.grad.shape}"
    return f"{t.shape} {t.dtype}{grad}"


def print_graph(tensor, file=None, names=None):
    """Print the graph that produced `tensor`, output first, one node per line:

        Mul      -> (2, 3) float64
          Add    -> (2, 3) float64
            leaf w (2, 3) float64, grad shape (2, 3)

    names: a Module (its named_parameters() are used) or a {name: tensor} dict, so that
    leaves show as e.g. `leaf encoder.layers.0.self_attn.q_proj.weight (64, 64) float32`.
    """
    if hasattr(names, "named_parameters"):
        names = dict(names.named_parameters())
    name_of = {id(t): name for name, t in (names or {}).items()}
    rows = []                                       # (indent, label, description)
    stack = [(tensor, 0)]
    seen = set()
    while stack:
        t, depth = stack.pop()
        node = t._node
        if node is None:
            kind = "leaf" if t.requires_grad else "const"
            name = f" {name_of[id(t)]}" if id(t) in name_of else ""
            rows.append(("  " * depth, None, f"{kind}{name} {_describe(t)}"))
            continue
        again = " (shown above)" if node in seen else ""
        rows.append(("  " * depth, node.name, f"{_describe(t)}{again}"))
        if again:
            continue
        seen.add(node)
        stack.extend((x, depth + 1) for x in reversed(node.inputs))
    width = max((len(pad) + len(label) for pad, label, _ in rows if label), default=0) + 1
    lines = [f"{pad}{text}" if label is None else f"{pad + label:<{width}}-> {text}" for pad, label, text in rows]
    text = "\n".join(lines)
    print(text, file=file)
    return text


def draw_graph(tensor, path, title=None, names=None):
    """Draw the graph of a small expression to an image file: leaves at the bottom, the
    output at the top, each box naming its op and shape (and grad, after backward).
    names: as print_graph's, so that a leaf's box says `w`, not just `leaf`."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if tensor._node is None:
        raise ValueError("draw_graph: the tensor is a leaf; there is no graph to draw")
    nodes = graph_nodes(tensor._node)               # inputs before outputs
    if hasattr(names, "named_parameters"):
        names = dict(names.named_parameters())
    boxes = _boxes(nodes, {id(t): name for name, t in (names or {}).items()})
    where, widest, levels = _positions(boxes)
    fig, ax = plt.subplots(figsize=(2 + 1.8 * widest, 1.5 + 1.3 * levels))
    texts = _draw_boxes(ax, boxes, where)
    _draw_arrows(ax, nodes, where, texts)
    xs = [x for x, _ in where.values()]
    ax.set_xlim(min(xs) - 1, max(xs) + 1)
    ax.set_ylim(-0.7, levels - 0.3)
    ax.axis("off")
    ax.set_title(title or "computation graph (inputs at the bottom, output at the top)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _key(t):
    """What a box stands for: a leaf tensor itself, or the node that computed t."""
    return id(t) if t._node is None else id(t._node)


def _boxes(nodes, name_of):
    """(key, label, level, leaf or None) for every leaf and node; a leaf's level is 0, a
    node's one above its highest input.  A leaf's label holds its name (name_of: {id: name})
    and its gradient, once it has one; a node's, its output's gradient where that output
    kept it (Tensor.retain_grad: an inner tensor's gradient is freed once used, as PyTorch's is)."""
    level, boxes = {}, []
    for node in nodes:
        for t in node.inputs:
            if t._node is None and id(t) not in level:
                level[id(t)] = 0
                grad = "" if t.grad is None else f"\ngrad {_values(t.grad)}"
                kind = ("leaf" if t.requires_grad else "const") + (f" {name_of[id(t)]}" if id(t) in name_of else "")
                boxes.append((id(t), f"{kind}\n{t.shape}{grad}", 0, t))
        level[id(node)] = max((level[_key(t)] + 1 for t in node.inputs), default=0)
        kept = (node.retained or {}).get(0)
        grad = None if kept is None or kept() is None else kept().grad
        grad = "" if grad is None else f"\ngrad {_values(grad)}"
        boxes.append((id(node), f"{node.name}\n{node.out_shape}{grad}", level[id(node)], None))
    return boxes


def _positions(boxes):
    """Each box's (x, y): y its level, the boxes of a level centred on x = 0; also the
    widest level's box count and the number of levels (to size the figure)."""
    rows = {}
    for key, _, depth, _ in boxes:
        rows.setdefault(depth, []).append(key)
    where = {key: (i - (len(keys) - 1) / 2, depth) for depth, keys in rows.items() for i, key in enumerate(keys)}
    return where, max(len(keys) for keys in rows.values()), len(rows)


def _draw_arrows(ax, nodes, where, texts):
    """One arrow from each input's box to the box of the node that used it, for every use: a
    value a node takes twice (a * a) sends two arrows, bowed apart so that both show.  Each
    arrow runs from edge to edge of the two boxes (texts: each box's Text), however tall."""
    for node in nodes:
        keys = [_key(t) for t in node.inputs]
        for position, key in enumerate(keys):
            uses, nth = keys.count(key), keys[:position].count(key)
            bend = 0.0 if uses == 1 else 0.35 * (nth - (uses - 1) / 2)
            ax.annotate("", xy=where[id(node)], xytext=where[key],
                        arrowprops=dict(arrowstyle="->", color="gray", shrinkA=2, shrinkB=2,
                                        patchA=texts[key].get_bbox_patch(), patchB=texts[id(node)].get_bbox_patch(),
                                        connectionstyle=f"arc3,rad={bend}"))


def _values(array, most=12):
    """An array as the text of a box: its values (3 decimals) if it has at most `most`, a
    matrix's rows on lines of their own; else its range."""
    if array.size > most:
        return f"{array.shape}, from {array.min():.3g} to {array.max():.3g}"
    return np.array2string(np.asarray(array), precision=3, suppress_small=True)


def _draw_boxes(ax, boxes, where):
    """Ops in blue, leaves in yellow (with their gradients, after backward); {key: its Text}."""
    return {key: ax.text(*where[key], label, ha="center", va="center", fontsize=9,
                         bbox=dict(boxstyle="round", fc="#dbeafe" if leaf is None else "#fef3c7", ec="#555"))
            for key, label, _, leaf in boxes}
