"""Seeing the graph: a text printer and a matplotlib drawing (no graphviz needed)."""

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


def draw_graph(tensor, path, title=None):
    """Draw the graph of a small expression to an image file: leaves at the bottom, the
    output at the top, each box naming its op and shape (and grad, after backward)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if tensor._node is None:
        raise ValueError("draw_graph: the tensor is a leaf; there is no graph to draw")
    nodes = graph_nodes(tensor._node)               # inputs before outputs
    level = {}
    boxes = []                                      # (key, label, level)
    for node in nodes:
        depth = 0
        for t in node.inputs:
            if t._node is None:
                key = id(t)
                if key not in level:
                    level[key] = 0
                    boxes.append((key, f"{'leaf' if t.requires_grad else 'const'}\n{t.shape}", 0, t))
            depth = max(depth, level[id(t) if t._node is None else id(t._node)] + 1)
        level[id(node)] = depth
        boxes.append((id(node), f"{node.name}\n{node.out_shape}", depth, None))
    rows = {}
    for key, _, depth, _ in boxes:
        rows.setdefault(depth, []).append(key)
    where = {key: (i - (len(keys) - 1) / 2, depth) for depth, keys in rows.items() for i, key in enumerate(keys)}
    fig, ax = plt.subplots(figsize=(2 + 1.8 * max(len(k) for k in rows.values()), 1.5 + 1.3 * len(rows)))
    for node in nodes:
        for t in node.inputs:
            src = where[id(t) if t._node is None else id(t._node)]
            ax.annotate("", xy=where[id(node)], xytext=src,
                        arrowprops=dict(arrowstyle="->", color="gray", shrinkA=18, shrinkB=18))
    for key, label, _, leaf in boxes:
        if leaf is not None and leaf.grad is not None and leaf.grad.size <= 4:
            label += f"\ngrad {leaf.grad.round(3).tolist()}"
        ax.text(*where[key], label, ha="center", va="center", fontsize=9,
                bbox=dict(boxstyle="round", fc="#dbeafe" if leaf is None else "#fef3c7", ec="#555"))
    xs = [x for x, _ in where.values()]
    ax.set_xlim(min(xs) - 1, max(xs) + 1)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.axis("off")
    ax.set_title(title or "computation graph (inputs at the bottom, output at the top)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
