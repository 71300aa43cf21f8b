"""A scalar Value's computation graph as an SVG drawing: each node a box with its name or
operation, its data and its gradient, arrows from parents to what they made, laid out left
to right by depth (a leaf at depth 0; any other node one column right of its deepest parent)."""

import html

from autograd.scalar import topological_order

BOX_W, BOX_H, GAP_X, GAP_Y = 150, 46, 70, 22


def layout(root):
    """({id: (column, row)}, the Values in topological order)."""
    order = topological_order(root)
    column = {}
    for node in order:                               # parents come first
        column[id(node)] = 1 + max((column[id(p)] for p in node.parents), default=-1)
    rows, where = {}, {}
    for node in order:
        c = column[id(node)]
        where[id(node)] = (c, rows.get(c, 0))
        rows[c] = rows.get(c, 0) + 1
    return where, order


def svg(root, names):
    """The drawing; names: {id(Value): its name} for the leaves that have one."""
    where, order = layout(root)
    columns = 1 + max(c for c, _ in where.values())
    most_rows = 1 + max(r for _, r in where.values())
    width, height = columns * (BOX_W + GAP_X), most_rows * (BOX_H + GAP_Y) + GAP_Y

    def corner(node):
        c, r = where[id(node)]
        return c * (BOX_W + GAP_X) + 10, r * (BOX_H + GAP_Y) + GAP_Y

    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
             'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#667"/></marker></defs>']
    for node in order:
        x, y = corner(node)
        for parent in node.parents:
            px, py = corner(parent)
            parts.append(f'<line x1="{px + BOX_W}" y1="{py + BOX_H / 2}" x2="{x}" y2="{y + BOX_H / 2}" '
                         'stroke="#667" marker-end="url(#arrow)"/>')
    for node in order:
        x, y = corner(node)
        label = html.escape(names.get(id(node), node.op or "leaf"))
        parts.append(f'<g><title>{label}: data {node.data:.6g}, grad {node.grad:.6g}</title>'
                     f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="#eef3fb" stroke="#3b6fb6"/>'
                     f'<text x="{x + 8}" y="{y + 16}" font-weight="bold">{label}</text>'
                     f'<text x="{x + 8}" y="{y + 30}">data {node.data:.4g}</text>'
                     f'<text x="{x + 8}" y="{y + 42}" fill="#b3261e">grad {node.grad:.4g}</text></g>')
    return "\n".join(parts + ["</svg>"]) + "\n"
