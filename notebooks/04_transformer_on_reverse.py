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
# # 4. The Transformer learns to reverse, and its cross-attention finds the anti-diagonal
#
# An encoder-decoder Transformer (2 + 2 layers, d_model 64, 4 heads) reads a sequence of
# symbols and writes it backwards. Nothing tells it *where* to look: the cross-attention
# (queries from the decoder, keys and values from the encoder) must learn that output
# position $t$ needs source position $n - t$. We take snapshots of that attention as
# training goes on. This is `python -m demos.train --task reverse`, step by step (about
# half a minute on 2 cores).

# %%
import matplotlib.pyplot as plt
import numpy as np

from autograd import manual_seed, no_grad
from transformer.data import tasks
from transformer.data.registry import make_task
from transformer.training.loop import train_loop
from transformer.training.seq2seq import ToyTaskJob, TrainConfig, build_model, sample_decodes

cfg = TrainConfig(task="reverse", out_dir=None)
data = make_task(cfg)
manual_seed(cfg.seed)
model = build_model(cfg, data)
job = ToyTaskJob(model, data, cfg)
example = data.heldout(1, seed=7)                  # one held-out sequence of length 10
source = [data.src_label(t) for t in example.src[0] if t != tasks.PAD]
print("source:", " ".join(source))


# %%
def cross_attention():
    """The last decoder layer's cross-attention on the example, averaged over heads:
    (tokens written, source tokens)."""
    with no_grad():
        model.eval()
        model(example.src, example.tgt_in)
        model.train()
    maps = model.attention_maps()
    last = sorted(name for name in maps if name.startswith("decoder.") and name.endswith("cross_attn"))[-1]
    length = len(source)
    return maps[last][0, :, :length + 1, :length].mean(axis=0)      # (written, source)


snapshots = {0: cross_attention()}
history = None
for until in (200, 400):
    history = train_loop(job, until, cfg.eval_every, history=history)
    snapshots[until] = cross_attention()

# %% [markdown]
# Now train on until 99% of 1000 held-out sequences are reversed exactly (or 4000 steps).

# %%
history = train_loop(job, cfg.max_steps, cfg.eval_every, history=history)
snapshots[len(history["step"])] = cross_attention()

# %%
written = [data.tgt_label(t) for t in example.tgt_out[0, :len(source) + 1]]
fig, axes = plt.subplots(1, len(snapshots), figsize=(3.6 * len(snapshots), 3.6), layout="constrained")
for ax, (step, weights) in zip(axes, snapshots.items()):
    image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(source)), source)
    ax.set_yticks(range(len(written)), written)
    ax.set_xlabel("key: source token")
    ax.set_title(f"step {step}")
axes[0].set_ylabel("query: the token being written")
fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight (mean of heads)")
fig.suptitle("cross-attention, last decoder layer: the anti-diagonal forms")
plt.show()

# %%
final = snapshots[len(history["step"])]
anti_diagonal = final[np.arange(len(source)), len(source) - 1 - np.arange(len(source))]
print(f"weight on the mirrored source position, mean over the written tokens: {anti_diagonal.mean():.2f}")
print("held-out exact match:", f"{history['evals'][-1]['exact_match']:.1%}", "after", len(history["step"]), "steps")
for src, want, got in sample_decodes(model, data, count=4):
    print(" ".join(map(data.src_label, src)), "->", " ".join(map(data.tgt_label, got)),
          "ok" if list(got) == list(want) else "WRONG")

# %%
fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
ax.plot(history["step"], history["loss"], lw=0.6, label="training loss")
ax.set_yscale("log")
ax.set_xlabel("step")
ax.set_ylabel("cross-entropy (log scale)")
ax2 = ax.twinx()
ax2.plot([e["step"] for e in history["evals"]], [e["exact_match"] for e in history["evals"]], "o-", color="C1",
         label="held-out exact match")
ax2.set_ylabel("held-out exact match")
ax.set_title("reverse: training loss and held-out exact match")
fig.legend(loc="outside lower center", ncols=2)     # below the axes: it covers no curve and no label
plt.show()
