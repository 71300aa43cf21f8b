"""Plots shared by the demos: loss curves and attention heatmaps."""

import numpy as np

from autograd import no_grad
from demos._plotting import plt, save
from transformer.data import tasks


def loss_curve(history, path, title="training"):
    """Training loss per step (log scale) and held-out exact match at each evaluation."""
    fig, ax = plt.subplots(figsize=(7, 4))
    steps, losses = np.array(history["step"]), np.array(history["loss"])
    ax.semilogy(steps, losses, color="#9ca3af", lw=0.6, label="loss (each step)")
    window = max(1, len(losses) // 50)
    if len(losses) >= window:
        smooth = np.convolve(losses, np.ones(window) / window, mode="valid")
        ax.semilogy(steps[window - 1:], smooth, color="#1f2937", lw=1.5, label=f"loss (mean of {window})")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy loss")
    if history["evals"]:
        acc = ax.twinx()
        acc.plot([e["step"] for e in history["evals"]], [e["exact_match"] for e in history["evals"]], "o-",
                 color="#2563eb", label="held-out exact match")
        acc.set_ylim(0, 1.02)
        acc.set_ylabel("held-out exact match", color="#2563eb")
    ax.set_title(title)
    ax.legend(loc="lower left")
    return save(fig, path)


def lm_loss_curve(history, path, title="language model", unit="character"):
    """Training loss per iteration (faint, and a running mean) and the train and validation
    loss estimates at each evaluation."""
    fig, ax = plt.subplots(figsize=(7, 4))
    iters, losses = np.array(history["step"]), np.array(history["loss"])
    ax.plot(iters, losses, color="#d1d5db", lw=0.6, label="batch loss")
    evals = history["evals"]
    ax.plot([e["step"] for e in evals], [e["train"] for e in evals], "o-", color="#1f2937", label="train (estimate)")
    ax.plot([e["step"] for e in evals], [e["val"] for e in evals], "o-", color="#2563eb", label="validation (estimate)")
    ax.set_xlabel("iteration")
    ax.set_ylabel(f"cross-entropy (nats per {unit})")
    ax.set_ylim(bottom=max(0.0, min(losses.min(), min(e["val"] for e in evals)) - 0.2),
                top=min(losses.max(), max(e["val"] for e in evals) + 1.5) + 0.1)   # the first steps' loss off the top
    ax.set_title(title)
    ax.legend()
    return save(fig, path)


def attention_heatmaps(model, example, out_dir, src_label=tasks.symbol_label, tgt_label=tasks.symbol_label):
    """Run one example (teacher-forced) and plot every attention map: one figure per kind
    (encoder self-attention, decoder masked self-attention, cross-attention), a row per
    layer and a column per head, with a colorbar.  Rows are queries: in self-attention
    labelled by the query position's token, in cross-attention by the token being written
    (as in the RNN's plot, demos/bottleneck.py); columns are keys.  Returns the paths."""
    with no_grad():
        model.eval()
        model(example.src, example.tgt_in)
    maps = model.attention_maps()
    src_len = int((example.src[0] != tasks.PAD).sum())
    tgt_len = int((example.tgt_in[0] != tasks.PAD).sum())
    src_labels = [src_label(t) for t in example.src[0, :src_len]]
    tgt_in_labels = [tgt_label(t) for t in example.tgt_in[0, :tgt_len]]
    written = [tgt_label(t) for t in example.tgt_out[0, :tgt_len]]
    # (stack, module, title, query labels, key labels, what a row is, what a column is)
    kinds = [("encoder", "self_attn", "encoder self-attention", src_labels, src_labels, "query: source token",
              "key: source token"),
             ("decoder", "self_attn", "decoder masked self-attention", tgt_in_labels, tgt_in_labels,
              "query: target input token", "key: target input token"),
             ("decoder", "cross_attn", "encoder-decoder (cross) attention", written, src_labels,
              "query: the token being written", "key: source token")]
    paths = []
    for stack, module, title, q_labels, k_labels, row_meaning, column_meaning in kinds:
        names = sorted(n for n in maps if n.startswith(stack + ".") and n.endswith(module))
        layers = [(f"layer {name.split('.')[2]}", maps[name][0, :, :len(q_labels), :len(k_labels)]) for name in names]
        paths.append(heatmap_grid(layers, q_labels, k_labels, (row_meaning, column_meaning),
                                  f"{title}: each row, a query's weights over the keys, sums to 1",
                                  f"{out_dir}/attention_{stack}_{module}.png"))
    return paths


def heatmap_grid(layers, q_labels, k_labels, meanings, title, path):
    """One figure of attention maps: a row per (name, weights (H, T_q, T_k)) of `layers`, a
    column per head, queries down (q_labels), keys across (k_labels), one colorbar;
    meanings: what a row and a column of a map are.  Returns the path written."""
    heads = layers[0][1].shape[0]
    fig, axes = plt.subplots(len(layers), heads, figsize=(2.6 * heads + 1, 2.6 * len(layers) + 0.4), squeeze=False,
                             layout="constrained")
    for row, (name, weights) in enumerate(layers):
        for h in range(heads):
            ax = axes[row, h]
            image = ax.imshow(weights[h], cmap="viridis", vmin=0, vmax=1)
            ax.set_xticks(range(len(k_labels)), k_labels, fontsize=7, rotation=90)
            ax.set_yticks(range(len(q_labels)), q_labels, fontsize=7)
            ax.set_title(f"{name}, head {h}", fontsize=8)
        axes[row, 0].set_ylabel(meanings[0], fontsize=8)
    for ax in axes[-1]:
        ax.set_xlabel(meanings[1], fontsize=8)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    fig.suptitle(title, fontsize=10)
    return save(fig, path)


def shared_heads(heads, kv_heads):
    """What a title says of grouped-query attention: which query heads share each key/value
    head ("; heads 0-2, 3-5 share key/value heads 0, 1"), or nothing when none are shared."""
    if kv_heads == heads:
        return ""
    group = heads // kv_heads
    spans = ", ".join(f"{g * group}-{g * group + group - 1}" if group > 1 else str(g) for g in range(kv_heads))
    return f"; heads {spans} share key/value heads {', '.join(map(str, range(kv_heads)))}"


def prompt_attention_heatmaps(model, tokens, labels, out_dir):
    """Run a decoder-only model over one prompt (tokens (1, T), labels: each token as text)
    and plot each layer's causal self-attention, a figure per layer (attention_layer{i}.png)
    with a column per head: row t, the weights position t gives positions 0..t.  Returns the
    paths."""
    with no_grad():
        model.eval()
        model(tokens)
    paths = []
    for i, layer in enumerate(model.blocks.layers):
        weights = layer.self_attn.attn_weights[0]                           # (H, T, T)
        shared = shared_heads(layer.self_attn.num_heads, layer.self_attn.num_kv_heads)
        paths.append(heatmap_grid([(f"layer {i}", weights)], labels, labels, ("query: prompt token", "key: prompt token"),
                                  f"layer {i}'s self-attention over the prompt: each row sums to 1{shared}",
                                  f"{out_dir}/attention_layer{i:02d}.png"))
    return paths
