"""Shared matplotlib setup for the demos: a headless backend and an output folder."""

import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def output_dir(path):
    os.makedirs(path, exist_ok=True)
    return path


def missing_parts(fig):
    """What a figure lacks of what every demo figure shows: a title (the figure's, or a plot's),
    axis labels (on some plot: a grid of panels labels its edges), and a
    colorbar when colour carries a value (an image)."""
    colorbars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
    plots = [ax for ax in fig.axes if ax not in colorbars]
    missing = []
    if not fig.get_suptitle() and not any(ax.get_title() for ax in plots):
        missing.append("a title")
    if not any(ax.get_xlabel() for ax in plots) or not any(ax.get_ylabel() for ax in plots):
        missing.append("axis labels")
    if any(ax.get_images() for ax in plots) and not colorbars:
        missing.append("a colorbar for its image's colours")
    return missing


def save(fig, path):
    """Write fig to path (checked first: missing_parts) and close it."""
    missing = missing_parts(fig)
    if missing:
        raise ValueError(f"the figure for {path} lacks {' and '.join(missing)}")
    if fig.get_layout_engine() is None:     # figures made with layout="constrained" lay themselves out
        fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}")
    return path
