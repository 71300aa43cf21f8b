"""Positional encodings, seen: the binary encoding, the sinusoidal one, and why the
sinusoidal one works: dot products between positions depend on their distance only.

    python -m demos.positional_encoding [--out runs/positional_encoding]

Writes positional_encoding.png: the binary and sinusoidal tables as heatmaps, and the
dot products PE[i] . PE[j] between all positions (symmetric, largest on the diagonal,
decaying with |i - j|).
"""

import argparse

import numpy as np

from demos._plotting import output_dir, plt, save
from transformer.positional import binary_table, sinusoidal_table


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--positions", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--out", default="runs/positional_encoding")
    args = parser.parse_args(argv)
    out = output_dir(args.out)
    sinus = sinusoidal_table(args.positions, args.d_model)
    binary = binary_table(args.positions, min(args.d_model, 8))
    dots = sinus @ sinus.T                                            # (positions, positions)

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    axes[0].imshow(binary, aspect="auto", cmap="RdBu", interpolation="nearest")
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
