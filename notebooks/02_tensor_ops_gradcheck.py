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
# # 2. Arrays instead of numbers: `Tensor`, ops and `gradcheck`
#
# A `Tensor` is to an array what `Value` was to a number. Each operation is one `Function`
# subclass with `forward` (numpy arrays in, an array out) and `backward` (the gradient of
# the output in, one gradient per input out) side by side. The engine records a node per
# op and, on `backward()`, walks the nodes in reverse.

# %%
import numpy as np

from autograd import Function, GradcheckError, Tensor, gradcheck, print_graph

rng = np.random.default_rng(0)

# %% [markdown]
# ## A small graph, and what it records
#
# $L = \mathrm{mean}(\tanh(x W))$ with $x$ of shape (4, 3) and $W$ of shape (3, 2).

# %%
x = Tensor(rng.standard_normal((4, 3)))
W = Tensor(rng.standard_normal((3, 2)), requires_grad=True)
loss = (x @ W).tanh().mean()
loss.backward()
print_graph(loss)
print("W.grad, shape", W.grad.shape)
print(W.grad)

# %% [markdown]
# ## The gradient by hand
#
# $\partial L/\partial W = x^\top \big( \frac{1}{N}(1 - \tanh^2(xW)) \big)$: the mean sends
# $1/N$ to every element, tanh multiplies by its local derivative, and a matmul's weight
# gradient is the input transposed times the upstream gradient.

# %%
y = np.tanh(x.data @ W.data)
by_hand = x.data.T @ ((1 - y ** 2) / y.size)
np.testing.assert_allclose(W.grad, by_hand, rtol=1e-12)
print("the engine's gradient equals the hand-derived one")

# %% [markdown]
# ## `gradcheck`: every gradient against finite differences
#
# `gradcheck` perturbs each input element by $\pm\epsilon$, measures how the output moves,
# and compares that with what `backward` returns, for a random upstream gradient. It needs
# float64: in float32 the differences drown in rounding.

# %%
a = Tensor(rng.standard_normal((3, 5)), requires_grad=True)
b = Tensor(rng.standard_normal((5, 2)), requires_grad=True)
print("matmul + tanh:", gradcheck(lambda a, b: (a @ b).tanh(), [a, b]))

# %% [markdown]
# ## A deliberately wrong backward, caught
#
# Here is a new op, the cube $a^3$, whose backward forgets the factor 3 of
# $\frac{d}{da} a^3 = 3a^2$. Nothing crashes: training with it would simply go wrong.
# `gradcheck` names the input, the element and both values.


# %%
class CubeWrong(Function):
    """out = a^3; the backward below is wrong on purpose (it should be 3 a^2)."""

    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a ** 3

    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return grad * a ** 2          # the mistake: missing the 3


class Cube(Function):
    """out = a^3;  dout/da = 3 a^2."""

    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a ** 3

    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return grad * 3 * a ** 2


c = Tensor(rng.standard_normal((2, 3)), requires_grad=True)
try:
    gradcheck(CubeWrong.apply, [c])
    raise AssertionError("gradcheck should have caught the wrong backward")
except GradcheckError as err:
    print("caught:", err)

print("the corrected op passes:", gradcheck(Cube.apply, [c]))

# %% [markdown]
# What gradcheck sees, drawn: the slope of $a^3$ measured by finite differences lies on the
# correct backward's curve, and the wrong one is off by a factor of 3.

# %%
import matplotlib.pyplot as plt

grid = np.linspace(-2, 2, 41)
h = 1e-6
measured = ((grid + h) ** 3 - (grid - h) ** 3) / (2 * h)
slopes = {}
for op in (Cube, CubeWrong):
    a = Tensor(grid.copy(), requires_grad=True)
    op.apply(a).sum().backward()
    slopes[op.__name__] = a.grad
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(grid, measured, "k.", label="finite differences")
ax.plot(grid, slopes["Cube"], label="Cube.backward: 3a^2")
ax.plot(grid, slopes["CubeWrong"], "--", label="CubeWrong.backward: a^2")
ax.set_xlabel("a")
ax.set_ylabel("d(a^3)/da")
ax.set_title("a backward checked against the slope it claims")
ax.legend()
plt.show()

# %% [markdown]
# ## Broadcasting: the gradient is summed back to the input's shape
#
# Adding a bias of shape (2,) to a (4, 2) matrix uses the bias in every row, so its
# gradient is the sum over rows (`unbroadcast` in `autograd/engine.py`).

# %%
bias = Tensor(rng.standard_normal(2), requires_grad=True)
out = x @ W.detach() + bias
upstream = rng.standard_normal(out.shape)
out.backward(Tensor(upstream))
np.testing.assert_allclose(bias.grad, upstream.sum(axis=0))
print("bias.grad", bias.grad.shape, "= the upstream gradient summed over the 4 rows")
print("gradcheck of a broadcast add:", gradcheck(lambda m, v: m + v, [Tensor(rng.standard_normal((4, 2)),
                                                                              requires_grad=True), bias]))
