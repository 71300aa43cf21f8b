"""Shared matplotlib setup for the demos: a headless backend and an output folder."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def output_dir(path):
    os.makedirs(path, exist_ok=True)
    return path


def save(fig, path):
    if fig.get_layout_engine() is None:     # figures made with layout="constrained" lay themselves out
        fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}")
    return path
