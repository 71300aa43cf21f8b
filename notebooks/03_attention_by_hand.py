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
# # 3. Attention by hand: queries, keys, values, the mask, the heads
#
# Attention is a soft dictionary lookup. Each token asks a **query**; every token offers a
# **key** and a **value**. The query's dot product with each key, scaled by
# $1/\sqrt{d_k}$, becomes a weight through softmax, and the output is the weighted sum of
# the values:
#
# $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right) V$$
#
# We compute it with numpy, one step at a time, then check the project's
# `scaled_dot_product_attention` and `MultiHeadAttention` give the same numbers.

# %%
import matplotlib.pyplot as plt
import numpy as np

from autograd import Tensor, manual_seed
from transformer.attention import MultiHeadAttention, scaled_dot_product_attention
from transformer.masks import causal_mask

rng = np.random.default_rng(0)
tokens = ["the", "dog", "bit", "the", "man"]
T, d_model, d_k = len(tokens), 8, 4
x = rng.standard_normal((T, d_model))                 # one embedding per token: (T, d_model)
W_q, W_k, W_v = (rng.standard_normal((d_model, d_k)) for _ in range(3))


def heatmap(weights, title, ax=None):
    ax = ax or plt.subplots(figsize=(4, 3.5))[1]
    image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(T), tokens)
    ax.set_yticks(range(T), tokens)
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_title(title, fontsize=9)
    plt.colorbar(image, ax=ax, label="weight")
    return ax


# %% [markdown]
# ## Queries, keys, values, and the scores

# %%
Q, K, V = x @ W_q, x @ W_k, x @ W_v                   # (T, d_k) each
scores = Q @ K.T / np.sqrt(d_k)                       # (T, T): query i against key j
print(np.round(scores, 2))

# %% [markdown]
# ## Softmax: each row becomes weights that sum to 1
#
# Subtracting each row's maximum first changes nothing mathematically
# ($e^{s - m} / \sum e^{s - m} = e^s / \sum e^s$) but keeps `exp` from overflowing.


# %%
def softmax(s):
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


weights = softmax(scores)
assert np.allclose(weights.sum(axis=-1), 1)
out = weights @ V                                     # (T, d_k): each row a mix of the values
heatmap(weights, "self-attention weights")
plt.show()

# %% [markdown]
# ## The causal mask: a decoder may not look ahead
#
# In masked self-attention query $t$ may see keys $0..t$ only. Masked scores become
# $-\infty$, so softmax gives them weight 0 exactly.

# %%
mask = causal_mask(T)                                  # (T, T), True = may attend
masked = np.where(mask, scores, -np.inf)
causal_weights = softmax(masked)
heatmap(causal_weights, "masked (causal) self-attention")
plt.show()
print("upper triangle all zero:", np.all(causal_weights[~mask] == 0))

# %% [markdown]
# ## The project's function gives the same numbers

# %%
ours, ours_weights = scaled_dot_product_attention(Tensor(Q[None]), Tensor(K[None]), Tensor(V[None]), mask)
np.testing.assert_allclose(ours_weights.data[0], causal_weights, atol=1e-12)
np.testing.assert_allclose(ours.data[0], causal_weights @ V, atol=1e-12)
print("scaled_dot_product_attention matches the hand computation")

# %% [markdown]
# ## Why divide by $\sqrt{d_k}$?
#
# A dot product of two random $d_k$-dimensional vectors has variance $d_k$. Without the
# scaling, large $d_k$ pushes softmax towards one-hot weights, where its gradient vanishes.

# %%
for dk in (4, 64, 1024):                              # 500 random queries against T random keys each
    q, k = rng.standard_normal((500, 1, dk)), rng.standard_normal((500, T, dk))
    dots = (k * q).sum(axis=-1)                         # (500, T)
    unscaled, scaled = softmax(dots).max(axis=-1).mean(), softmax(dots / np.sqrt(dk)).max(axis=-1).mean()
    print(f"d_k {dk:5d}: largest of {T} weights, on average: unscaled {unscaled:.3f}, scaled {scaled:.3f}")

# %% [markdown]
# ## Multi-head attention: split, attend, concatenate, project
#
# With $H$ heads, the $d_{model}$ columns of the projected queries, keys and values are cut
# into $H$ slices of $d_{model}/H$; each head attends on its own slice, and the heads'
# outputs are concatenated back and projected by $W_o$.

# %%
H = 2
manual_seed(0)
mha = MultiHeadAttention(d_model, H, bias=False).to("float64")      # our x is float64
result = mha(Tensor(x[None]), Tensor(x[None]), Tensor(x[None]), mask=mask)     # (1, T, d_model)

d_head = d_model // H
Wq, Wk, Wv, Wo = (m.weight.data.T for m in (mha.q_proj, mha.k_proj, mha.v_proj, mha.out_proj))   # (in, out)
heads = []
for h in range(H):
    cols = slice(h * d_head, (h + 1) * d_head)                            # this head's slice
    q_h, k_h, v_h = x @ Wq[:, cols], x @ Wk[:, cols], x @ Wv[:, cols]     # (T, d_head)
    w_h = softmax(np.where(mask, q_h @ k_h.T / np.sqrt(d_head), -np.inf))
    np.testing.assert_allclose(mha.attn_weights[0, h], w_h, atol=1e-5)
    heads.append(w_h @ v_h)
by_hand = np.concatenate(heads, axis=-1) @ Wo                              # (T, d_model)
np.testing.assert_allclose(result.data[0], by_hand, atol=1e-5)
print("MultiHeadAttention = split, attend per head, concatenate, project")

fig, axes = plt.subplots(1, H, figsize=(8, 3.5))
for h in range(H):
    heatmap(mha.attn_weights[0, h], f"head {h}", axes[h])
fig.suptitle("each head learns (here: starts with) its own pattern")
plt.show()
