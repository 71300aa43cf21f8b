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
# # 6. From GPT-2 to Llama in three changes
#
# The GPT of notebook 5 is GPT-2's block. Llama, Mistral and Qwen changed three of its
# parts: RMSNorm in place of LayerNorm, a SwiGLU feed-forward in place of the GELU MLP, and
# rotary positions (RoPE) inside attention in place of a learned table added to the
# embeddings. Outside the block, Llama's output layer is a matrix of its own (GPT-2 reuses
# the token embedding); neither has biases here (`gpt_config`'s are off by default, as in
# nanoGPT's CPU recipe). Each change here is one op or layer: we check it against its
# formula, look at what it does, then train both blocks for a short while on the same data.

# %%
import matplotlib.pyplot as plt
import numpy as np

import nn
from autograd import Tensor, gradcheck, manual_seed
from nn import functional as F
from transformer.data.text import TextDataset, stdlib_docstrings
from transformer.families.decoder_only import DecoderOnly, gpt_config, llama_config
from transformer.layers import SwiGLU
from transformer.relative_position import rotary_embedding
from transformer.training.lm import LMJob, LMTrainConfig, step_functions, train_lm

rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. RMSNorm: scale by the root mean square, no centring, no shift
#
# LayerNorm computes (x - mean) / std * weight + bias; RMSNorm only x / rms(x) * weight.

# %%
x = rng.standard_normal((3, 8))
ours = nn.RMSNorm(8, eps=1e-6, dtype=np.float64)(Tensor(x)).data
by_hand = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6)
print("largest difference from the formula:", np.abs(ours - by_hand).max())
print("rms of each output row:", np.sqrt((ours ** 2).mean(-1)).round(6))
print("gradcheck:", gradcheck(lambda t: F.rms_norm(t, 8), [Tensor(x, requires_grad=True)]))

# %% [markdown]
# ## 2. SwiGLU: a gated feed-forward
#
# W2 (SiLU(W1 x) * W3 x): the gate SiLU(W1 x) = W1 x sigmoid(W1 x) decides how much of each
# hidden feature W3 x passes. SiLU is smooth and, unlike ReLU, lets a little of the
# negative side through.

# %%
z = np.linspace(-4, 4, 9)
print("z      ", z)
print("SiLU(z)", F.silu(Tensor(z)).data.round(3))
grid = Tensor(np.linspace(-4, 4, 200))
for name, curve in (("ReLU", grid.relu()), ("GELU (GPT-2)", grid.gelu()), ("SiLU (Llama's gate)", F.silu(grid))):
    plt.plot(grid.data, curve.data, label=name)
plt.legend()
plt.title("The activations")
plt.show()
manual_seed(0)
ff = SwiGLU(128)
print("d_ff by the 8/3 rule for d_model 128:", ff.w1.out_features,
      "; weights:", sum(p.data.size for p in ff.parameters()), "against the MLP's", 2 * 128 * 512)

# %% [markdown]
# ## 3. RoPE: turn pairs of dimensions by an angle proportional to the position
#
# After the rotation, a query at position i and a key at position j score q . R(j - i) k:
# only their distance matters. Half pairs (i, i + d/2, Hugging Face) and interleaved pairs
# (2i, 2i + 1, Meta) are one permutation of the dimensions apart.

# %%
q, k = rng.standard_normal((1, 8)), rng.standard_normal((1, 8))
def score(i, j, pairing="half"):
    return float((rotary_embedding(Tensor(q), np.array([i]), pairing=pairing).data
                  @ rotary_embedding(Tensor(k), np.array([j]), pairing=pairing).data.T)[0, 0])
print("positions (5, 2) and (13, 10), the same distance:", round(score(5, 2), 10), round(score(13, 10), 10))
permutation = np.r_[0:8:2, 1:8:2]
interleaved = rotary_embedding(Tensor(q), np.array([3]), pairing="interleaved").data
half = rotary_embedding(Tensor(q[:, permutation]), np.array([3]), pairing="half").data
print("interleaved, permuted == half of the permuted input:", np.allclose(interleaved[:, permutation], half))

# %% [markdown]
# ## Both blocks on the same text, the same recipe, a few hundred iterations
#
# The same batches (the job's seeded generator), the same schedule; only the block differs.
# `python -m demos.gpt --arch llama` is the full run.

# %%
cfg = LMTrainConfig(max_iters=150, eval_every=150, eval_iters=5, log_every=50, warmup=20)
data = TextDataset(stdlib_docstrings()[:200_000], cfg.block_size)
results = {}
for name, make in (("gpt2", gpt_config), ("llama", llama_config)):
    manual_seed(cfg.seed)
    model = DecoderOnly(make(len(data.vocab), cfg.block_size, n_layer=2, n_embd=64))
    step, evaluate, _ = step_functions(model, cfg)
    history = train_lm(LMJob(data, step, evaluate, cfg), log=lambda line: None)
    results[name] = history["evals"][-1]["val"]
    print(f"{name}: {sum(p.data.size for p in model.parameters()):,} parameters, "
          f"validation loss after {cfg.max_iters} iterations {results[name]:.3f} nats a character")
