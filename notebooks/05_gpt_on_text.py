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
# # 5. A GPT on text: train one, sample from it, and read nanoGPT's checkpoint format
#
# A decoder-only model (GPT) predicts the next token from the ones before it, through
# masked self-attention. We train a small character-level GPT with nanoGPT's CPU recipe
# for a few hundred iterations (about half a minute on 2 cores), sample from it with
# temperature and top-k, then read a checkpoint in nanoGPT's file format and look at its
# weights and attention. `python -m demos.gpt` is the full run (2000 iterations).

# %%
import os

import matplotlib.pyplot as plt
import numpy as np

import transformer
from autograd import manual_seed, no_grad
from transformer.data.text import CharVocab, TextDataset, stdlib_docstrings
from transformer.families.decoder_only import DecoderOnly, gpt_config
from nn import functional as F
from nn.optim import AdamW, clip_grad_norm_
from transformer.training.lm import LMJob, LMTrainConfig, decay_groups, step_functions, train_lm
from transformer.training.nanogpt import load_nanogpt_checkpoint, read_meta, read_torch_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(transformer.__file__)))    # the project's folder

# %% [markdown]
# ## Data: characters of the standard library's docstrings
#
# No download: every Python has this English prose about code. The first 90% trains, the
# last 10% validates.

# %%
text = stdlib_docstrings(limit=300_000)
cfg = LMTrainConfig(max_iters=300, eval_every=100, eval_iters=10, log_every=50)
data = TextDataset(text, cfg.block_size)
print(f"{len(text):,} characters, vocabulary of {len(data.vocab)}:", repr("".join(data.vocab.chars[:40])), "...")

# %% [markdown]
# ## The loop, written out
#
# nanoGPT's `train.py` on one page: each iteration takes a batch of random blocks, sets the
# schedule's learning rate, runs the model forward to the loss, backward, clips the
# gradients' global norm and takes AdamW's step. Here are the first five iterations by
# hand, the shapes of this run beside each line. `train_lm` below runs exactly these lines
# (`LMJob.step`, then `step_functions`'s step and `nn/recipe.py`'s `optimize`), adding the
# evaluations, the progress lines and the checkpoints: its first five losses are these, bit
# for bit.

# %%
manual_seed(cfg.seed)
model = DecoderOnly(gpt_config(len(data.vocab), cfg.block_size))      # 4 layers, 4 heads, 128 wide
print(f"{sum(p.data.size for p in model.parameters()):,} parameters")
optimizer = AdamW(decay_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, cfg.beta2))
batches = np.random.default_rng(cfg.seed)                # the loop draws its batches from this generator
by_hand = []
for it in range(5):
    x, y = data.batch("train", cfg.batch_size, batches)  # (12, 64) token ids; y is x shifted by one
    for group in optimizer.param_groups:
        group["lr"] = cfg.lr_at(it)                      # warm-up, then cosine decay
    loss = F.cross_entropy(model(x), y)                  # logits (12, 64, vocab) -> one number
    optimizer.zero_grad()
    loss.backward()
    clip_grad_norm_([p for group in optimizer.param_groups for p in group["params"]], cfg.grad_clip)
    optimizer.step()
    by_hand.append(loss.item())
print("losses by hand:", [round(loss, 4) for loss in by_hand])

# %% [markdown]
# ## The same model, trained by the loop

# %%
manual_seed(cfg.seed)
model = DecoderOnly(gpt_config(len(data.vocab), cfg.block_size))      # the same initial weights
step, evaluate, optimizer = step_functions(model, cfg)
history = train_lm(LMJob(data, step, evaluate, cfg, model, optimizer))
assert history["loss"][:5] == by_hand, (history["loss"][:5], by_hand)
print("its first five losses are the ones by hand, bit for bit")

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(history["step"], history["loss"], lw=0.6, label="training batches")
ax.plot([e["step"] for e in history["evals"]], [e["val"] for e in history["evals"]], "o-", label="validation")
ax.set_xlabel("iteration")
ax.set_ylabel("cross-entropy, nats per character")
ax.set_title("a character GPT learning")
ax.legend()
plt.show()

# %% [markdown]
# ## Sampling: temperature and top-k
#
# The model gives a distribution over the next character. Temperature divides the logits
# before softmax: below 1 sharpens the distribution (safer, more repetitive), above 1
# flattens it. Top-k samples only among the k most likely characters. Temperature 0 is
# greedy decoding: after 300 iterations its most likely next characters loop ("the the
# the"), as any small model's do; sampling gets out of the loop.

# %%
model.eval()
prompt = data.vocab.encode("Return the ")[None, :]                    # (1, P)
for temperature, top_k in ((0.0, None), (0.8, 200), (1.5, None), (1.0, 5)):
    out = model.generate(prompt, 80, temperature=temperature, top_k=top_k, generator=np.random.default_rng(0))
    print(f"temperature {temperature}, top-k {top_k}:\n  {data.vocab.decode(out[0])!r}")

# %% [markdown]
# ## A model trained elsewhere: nanoGPT's checkpoint, read without PyTorch
#
# `tests/data/nanogpt_tiny.pt` is laid out exactly as nanoGPT's `train.py` writes its
# `ckpt.pt` (`torch.save` of a 2-layer GPT with nanoGPT's module names), but it is the
# tests' small fixture, trained for a few steps on random characters
# (`tests/data/make_nanogpt_fixture.py`): its guesses are noise and its attention nearly
# uniform. What matters here is reading it. The file is a zip of a pickle and raw tensor buffers;
# `read_torch_file` rebuilds every tensor as a numpy array (refusing anything but arrays,
# dicts, numbers and strings), and `load_nanogpt_checkpoint` maps nanoGPT's names onto our
# model (`transformer/training/nanogpt.py`).

# %%
path = os.path.join(ROOT, "tests", "data", "nanogpt_tiny.pt")
raw = read_torch_file(path)
print("entries:", sorted(raw))
print("model_args:", raw["model_args"])
for name, array in list(raw["model"].items())[:8]:
    print(f"  {name:45s} {array.shape}")

# %%
theirs = load_nanogpt_checkpoint(path)
meta = read_meta(os.path.join(ROOT, "tests", "data", "nanogpt_tiny_meta.pkl"))
vocab = CharVocab(meta["itos"][i] for i in range(len(meta["itos"])))
tokens = vocab.encode("hello wo")[None, :]
with no_grad():
    logits = theirs(tokens)                                           # (1, T, vocab)
print("its next-character guess after each prefix:", repr(vocab.decode(logits.data[0].argmax(axis=-1))))

# %% [markdown]
# Its masked self-attention, layer by layer and head by head: every row is a query, and
# nothing lies above the diagonal, since a GPT cannot look ahead.

# %%
layers = theirs.blocks.layers
heads = layers[0].self_attn.num_heads
fig, axes = plt.subplots(len(layers), heads, figsize=(3.2 * heads, 3 * len(layers)), squeeze=False,
                         layout="constrained")
labels = list("hello wo")
for i, layer in enumerate(layers):
    weights = layer.self_attn.attn_weights[0]                        # (H, T, T)
    for h in range(heads):
        image = axes[i, h].imshow(weights[h], cmap="viridis", vmin=0, vmax=1)
        axes[i, h].set_xticks(range(len(labels)), labels)
        axes[i, h].set_yticks(range(len(labels)), labels)
        axes[i, h].set_title(f"layer {i}, head {h}", fontsize=9)
        axes[i, h].set_xlabel("key")
        axes[i, h].set_ylabel("query")
fig.colorbar(image, ax=axes, shrink=0.7, label="attention weight")
fig.suptitle("nanoGPT's model, read here: masked self-attention")
plt.show()
