"""Positional encodings, seen: why attention needs them, the naive ones the lecture rules
out, the binary encoding, the sinusoidal one, and why it works.

    python -m demos.positional_encoding [--out runs/positional_encoding]

Writes
- order_blind.png: self-attention without positions on "the dog bit the man" and "the man
  bit the dog" gives each word the same output vector in both sentences (the outputs are
  only permuted), so it cannot tell who bit whom; with sinusoidal positions added it can.
- positional_criteria.png: the lecture's four criteria (unique, deterministic, the same
  distance between neighbours, generalises to longer sentences) measured for the position
  number, one-hot, position scaled to 0-1, binary and sinusoidal codes.
- positional_encoding.png: the binary and sinusoidal tables as heatmaps, and the dot
  products PE[i] . PE[j] between all positions (symmetric, largest on the diagonal,
  decaying with |i - j|).
"""

import json

import numpy as np

from autograd import Tensor, manual_seed, no_grad
from demos._flags import command_line, integer_at_least
from demos._plotting import output_dir, plt, save
from transformer.attention import MultiHeadAttention
from transformer.positional import (binary_table, encoding_criteria, integer_table, one_hot_table, scaled_table,
                                    sinusoidal_table)

SENTENCES = ("the dog bit the man", "the man bit the dog")
NAIVE_SCHEMES = {"position number": integer_table, "one-hot": one_hot_table, "scaled to 0-1": scaled_table,
                 "binary": binary_table, "sinusoidal": sinusoidal_table}


def self_attention_outputs(positions, d_model=8, seed=0):
    """Each sentence's self-attention output (words, d_model) from one random attention
    layer and random word vectors, with `positions` (a table function or None) added."""
    manual_seed(seed)
    attention = MultiHeadAttention(d_model, num_heads=2).eval()
    vocabulary = sorted({w for s in SENTENCES for w in s.split()})
    vectors = dict(zip(vocabulary, np.random.default_rng(seed).standard_normal((len(vocabulary), d_model))))
    outputs = []
    for sentence in SENTENCES:
        x = np.stack([vectors[w] for w in sentence.split()])                      # (T, d_model)
        if positions is not None:
            x = x + positions(len(x), d_model)
        with no_grad():
            h = Tensor(x[None].astype(np.float32))
            outputs.append(attention(h, h, h).data[0])                              # (T, d_model)
    return outputs


def order_blindness(outputs):
    """The largest difference between a word's output in sentence 1 and the same word's in
    sentence 2 ("the dog bit the man" -> "the man bit the dog" swaps positions 1 and 4)."""
    swap = [0, 4, 2, 3, 1]
    return float(np.abs(outputs[0] - outputs[1][swap]).max())


def plot_order_blind(path):
    """Returns {scheme: the largest difference of a word's output between the two sentences}."""
    differences = {}
    fig, axes = plt.subplots(2, 2, figsize=(9, 5.5), layout="constrained")
    for row, (name, positions) in enumerate((("no positions", None), ("sinusoidal positions", sinusoidal_table))):
        outputs = self_attention_outputs(positions)
        for col, (sentence, out) in enumerate(zip(SENTENCES, outputs)):
            image = axes[row, col].imshow(out, cmap="RdBu", vmin=-1.5, vmax=1.5, aspect="auto")
            axes[row, col].set_yticks(range(5), sentence.split())
            axes[row, col].set(title=f"{name}: \"{sentence}\"", xlabel="output dimension", ylabel="word")
        differences[name] = order_blindness(outputs)
        print(f"  {name:<21} largest difference of a word's output between the two sentences: "
              f"{differences[name]:.2e}")
    fig.colorbar(image, ax=axes, shrink=0.7, label="self-attention output")
    fig.suptitle("self-attention sees a set: without positions 'dog' gets the same vector in both sentences")
    save(fig, path)
    return differences


def plot_criteria(path):
    """A grid: scheme x criterion, green where the scheme meets it; returns the results."""
    results = {name: encoding_criteria(table) for name, table in NAIVE_SCHEMES.items()}
    criteria = list(next(iter(results.values())))
    grid = np.array([[results[name][c] for c in criteria] for name in results], dtype=float)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    image = ax.imshow(grid, cmap="RdYlGn", vmin=-0.3, vmax=1.3, aspect="auto")
    fig.colorbar(image, ax=ax, ticks=[0, 1], label="meets the criterion").ax.set_yticklabels(["no", "yes"])
    for i, name in enumerate(results):
        for j, c in enumerate(criteria):
            ax.text(j, i, "yes" if results[name][c] else "no", ha="center", va="center")
        print(f"  {name:<16} " + "  ".join(f"{c}: {'yes' if results[name][c] else 'no'}" for c in criteria))
    ax.set_xticks(range(len(criteria)), [c.replace(" ", "\n", 1) for c in criteria])
    ax.set_yticks(range(len(results)), list(results))
    ax.set(xlabel="criterion", ylabel="encoding")
    ax.set_title("the lecture's criteria, measured on sentences of 8, 16 and 32 words (16-dim codes)", fontsize=10)
    save(fig, path)
    return results


def main(argv=None):
    parser = command_line("demos.positional_encoding", __doc__)
    parser.add_argument("--positions", type=integer_at_least(1), default=64)
    parser.add_argument("--d-model", type=integer_at_least(1), default=64)
    parser.add_argument("--out", default="runs/positional_encoding")
    args = parser.parse_args(argv)
    out = output_dir(args.out)
    print("Self-attention without positions treats a sentence as a set of words:")
    differences = plot_order_blind(f"{out}/order_blind.png")
    print("The naive position codes against the lecture's criteria:")
    criteria = plot_criteria(f"{out}/positional_criteria.png")
    with open(f"{out}/results.json", "w") as f:
        json.dump({"order_blindness": differences, "criteria": criteria}, f, indent=1)
    sinus = sinusoidal_table(args.positions, args.d_model)
    binary = binary_table(args.positions, min(args.d_model, 8))
    dots = sinus @ sinus.T                                            # (positions, positions)

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    im = axes[0].imshow(binary, aspect="auto", cmap="RdBu", interpolation="nearest")
    fig.colorbar(im, ax=axes[0])
    axes[0].set(title="binary encoding: bit i of the position (+1/-1)", xlabel="bit", ylabel="position")
    im = axes[1].imshow(sinus, aspect="auto", cmap="RdBu")
    axes[1].set(title="sinusoidal: sin/cos at falling frequencies", xlabel="dimension", ylabel="position")
    fig.colorbar(im, ax=axes[1])
    im = axes[2].imshow(dots, cmap="viridis")
    axes[2].set(title="PE[i] . PE[j]: symmetric, decays with |i - j|", xlabel="position j", ylabel="position i")
    fig.colorbar(im, ax=axes[2])
    path = save(fig, f"{out}/positional_encoding.png")

    print("The lowest bit of the binary code flips every position, the next every two, ...;")
    print("the sinusoidal code is its smooth version: dimension pair i turns at frequency 1/10000^(2i/d).")
    for distance in (0, 1, 2, 4, 8, 16, 32):
        values = np.diagonal(dots, offset=distance)
        print(f"  PE[i] . PE[i+{distance:2d}] = {values.mean():6.2f} (the same for every i, spread {np.ptp(values):.1e})")
    return path


if __name__ == "__main__":
    main()
