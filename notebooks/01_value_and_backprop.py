# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 1. One number at a time: `Value` and backpropagation by hand
#
# A `Value` holds one number, the `Value`s it was computed from, and a small `_backward`
# function that knows the *local* derivative of the operation that made it. Backpropagation
# is the chain rule applied from the output back to the inputs, in reverse topological
# order. We do it by hand first, then let `backward()` do it, and check the two agree.
#
# (Read `autograd/scalar.py` beside this notebook: it is short enough to read in one sitting.)

# %%
import matplotlib.pyplot as plt

from autograd.scalar import Value

# %% [markdown]
# A tiny neuron: $o = \tanh(x_1 w_1 + x_2 w_2 + b)$.

# %%
x1, x2 = Value(2.0), Value(0.0)
w1, w2 = Value(-3.0), Value(1.0)
b = Value(6.8813735870195432)
x1w1 = x1 * w1
x2w2 = x2 * w2
n = x1w1 + x2w2 + b
o = n.tanh()
print("o =", o.data)

# %% [markdown]
# ## By hand, from the output back
#
# $\partial o / \partial o = 1$. Through tanh: $\partial o/\partial n = 1 - \tanh(n)^2 = 1 - o^2$.
# A sum passes its gradient to each term unchanged. A product sends each factor the
# gradient times the *other* factor.

# %%
do = 1.0
dn = do * (1 - o.data ** 2)
db, dx1w1, dx2w2 = dn, dn, dn
dx1, dw1 = dx1w1 * w1.data, dx1w1 * x1.data
dx2, dw2 = dx2w2 * w2.data, dx2w2 * x2.data
by_hand = {"x1": dx1, "w1": dw1, "x2": dx2, "w2": dw2, "b": db}
by_hand

# %% [markdown]
# ## The same, by `backward()`

# %%
o.backward()
by_engine = {"x1": x1.grad, "w1": w1.grad, "x2": x2.grad, "w2": w2.grad, "b": b.grad}
for name in by_hand:
    assert abs(by_hand[name] - by_engine[name]) < 1e-12, name
by_engine

# %% [markdown]
# ## The graph
#
# Each box is a `Value`: the name this notebook gave it, the operation that made it (none
# for a leaf), its number and its gradient. Arrows point from inputs to the value computed
# from them; backpropagation walks them the other way.


# %%
def graph_of(root):
    """Every Value reachable from root, and the (parent, child) edges."""
    nodes, edges, stack = [], [], [root]
    while stack:
        v = stack.pop()
        if v in nodes:
            continue
        nodes.append(v)
        for parent in v.parents:
            edges.append((parent, v))
            stack.append(parent)
    return nodes, edges


def depth(v):
    return 0 if not v.parents else 1 + max(depth(p) for p in v.parents)


names = {x1: "x1", x2: "x2", w1: "w1", w2: "w2", b: "b", x1w1: "x1w1", x2w2: "x2w2", n: "n", o: "o"}


def label(v):
    """A box's first line: the Value's name and the op that made it ('x1 (leaf)', 'n (+)'); a Value
    the code left unnamed shows as the expression of its parents ('x1w1 + x2w2')."""
    if v not in names:
        return f" {v.op} ".join(names.get(p, "?") for p in v.parents)
    return f"{names[v]} ({v.op or 'leaf'})"


nodes, edges = graph_of(o)
levels = {}
for v in nodes:
    levels.setdefault(depth(v), []).append(v)
where = {v: (d, i - (len(vs) - 1) / 2) for d, vs in levels.items() for i, v in enumerate(vs)}
half_height = max(len(vs) for vs in levels.values()) / 2      # room for the tallest column of boxes
fig, ax = plt.subplots(figsize=(10, 1.2 * half_height + 2))
for parent, child in edges:
    ax.annotate("", xy=where[child], xytext=where[parent],
                arrowprops=dict(arrowstyle="->", color="gray", shrinkA=25, shrinkB=25))
for v, (x, y) in where.items():
    ax.text(x, y, f"{label(v)}\ndata {v.data:.3f}\ngrad {v.grad:.3f}", ha="center", va="center", fontsize=8,
            bbox=dict(boxstyle="round", facecolor="#fef3c7" if v.op else "#dbeafe"))
ax.set_xlim(-0.6, max(levels) + 0.6)
ax.set_ylim(-half_height, half_height)
ax.set_title("o = tanh(x1 w1 + x2 w2 + b), after o.backward()")
ax.set_xlabel("depth: leaves on the left, the output on the right")
ax.set_yticks([])
plt.show()

# %% [markdown]
# ## Check against finite differences
#
# The definition of a derivative, $\big(f(w + h) - f(w - h)\big) / 2h$, needs no chain rule:
# it is what `gradcheck` uses for every op of the `Tensor` engine (next notebook).


# %%
def neuron(w1_value):
    return (Value(2.0) * Value(w1_value) + Value(0.0) * Value(1.0) + Value(6.8813735870195432)).tanh().data


h = 1e-6
numeric = (neuron(-3.0 + h) - neuron(-3.0 - h)) / (2 * h)
print(f"dw1: backprop {w1.grad:.8f}, finite differences {numeric:.8f}")
assert abs(numeric - w1.grad) < 1e-6
