"""A scalar Value's computation graph as an SVG drawing: each node a box with its name or
operation, its data and its gradient, arrows from parents to what they made.

Layout, left to right: the output in the last column, every other node one column left of
the nearest of the nodes it feeds (so a leaf sits next to the operation that uses it, as in
micrograd's drawing), and in each column the nodes ordered by the mean height at which
their arrows arrive, so that arrows seldom cross.  Arrows are drawn first and boxes on top,
and no arrow crosses a box: between neighbouring columns an arrow runs straight through the
gap between them; a longer one leaves its box into that gap, runs along the free band
between two rows of boxes, and comes down the gap before its target.  Where a node has
several parents, their arrows end at different heights of its left border.
"""

import html

from autograd.scalar import topological_order

BOX_W, BOX_H, GAP_X, GAP_Y = 150, 46, 70, 22
MARGIN = 10                                          # left of the first column


def columns(order):
    """{id: column}: the output (order's last) in the last column, any other node one left of
    the nearest node it feeds."""
    depth = {}
    for node in order:                               # parents first: the longest path from a leaf
        depth[id(node)] = 1 + max((depth[id(p)] for p in node.parents), default=-1)
    column = {id(order[-1]): depth[id(order[-1])]}
    children = {}
    for node in order:
        for parent in node.parents:
            children.setdefault(id(parent), []).append(node)
    for node in reversed(order[:-1]):                # what a node feeds comes after it in order
        column[id(node)] = min(column[id(child)] for child in children[id(node)]) - 1
    return column, children


def layout(root):
    """({id: (column, row)}, the Values in topological order)."""
    order = topological_order(root)
    column, children = columns(order)
    where = {}
    for c in sorted(set(column.values()), reverse=True):         # the output's column first
        nodes = [node for node in order if column[id(node)] == c]
        for row, node in enumerate(sorted(nodes, key=lambda n: mean_arrival(n, children, where))):
            where[id(node)] = (c, row)
    return where, order


def mean_arrival(node, children, where):
    """The mean height, in rows, at which the node's arrows reach what it feeds (a child's row,
    plus where on its border: a first parent's arrow arrives above a second's)."""
    heights = [where[id(child)][1] + (k + 1) / (len(child.parents) + 1)
               for child in children.get(id(node), ()) for k, parent in enumerate(child.parents) if parent is node]
    return sum(heights) / max(1, len(heights))


def corner(place):
    """The top-left corner of the box at (column, row)."""
    c, r = place
    return MARGIN + c * (BOX_W + GAP_X), GAP_Y + r * (BOX_H + GAP_Y)


def route(parent_place, child_place, end_y):
    """The points of an arrow from the parent's right border to the child's left border at end_y."""
    px, py = corner(parent_place)
    cx, cy = corner(child_place)
    start = (px + BOX_W, py + BOX_H / 2)
    if child_place[0] - parent_place[0] == 1:
        return [start, (cx, end_y)]
    out_x, in_x = px + BOX_W + GAP_X / 2, cx - GAP_X / 2       # the gaps after the parent and before the child
    band = cy - GAP_Y / 2                                      # the free band above the child's row
    return [start, (out_x, start[1]), (out_x, band), (in_x, band), (in_x, end_y), (cx, end_y)]


def svg(root, names):
    """The drawing; names: {id(Value): its name} for the leaves that have one."""
    where, order = layout(root)
    width = MARGIN + (1 + max(c for c, _ in where.values())) * (BOX_W + GAP_X)
    height = (1 + max(r for _, r in where.values())) * (BOX_H + GAP_Y) + GAP_Y
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#667"/></marker></defs>']
    for node in order:                               # the arrows first, so that the boxes lie on top
        _, top = corner(where[id(node)])
        for k, parent in enumerate(node.parents):
            end_y = top + BOX_H * (k + 1) / (len(node.parents) + 1)
            points = " ".join(f"{x:g},{y:g}" for x, y in route(where[id(parent)], where[id(node)], end_y))
            parts.append(f'<polyline points="{points}" fill="none" stroke="#667" marker-end="url(#arrow)"/>')
    for node in order:
        x, y = corner(where[id(node)])
        label = html.escape(names.get(id(node), node.op or "leaf"))
        parts.append(f'<g><title>{label}: data {node.data:.6g}, grad {node.grad:.6g}</title>'
                     f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="#eef3fb" stroke="#3b6fb6"/>'
                     f'<text x="{x + 8}" y="{y + 16}" font-weight="bold">{label}</text>'
                     f'<text x="{x + 8}" y="{y + 30}">data {node.data:.4g}</text>'
                     f'<text x="{x + 8}" y="{y + 42}" fill="#b3261e">grad {node.grad:.4g}</text></g>')
    return "\n".join(parts + ["</svg>"]) + "\n"
