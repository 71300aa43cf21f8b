"""Vision Transformer: image patches as tokens, on generated pictures of bars.

    python -m demos.vit [--steps 1500] [--out runs/vit]

16x16 images with one faint bar (horizontal, vertical, diagonal or anti-diagonal) under
heavy noise; 4x4 patches make 16 tokens plus the <class> token.  Trains until 95%
held-out accuracy (or --steps), then writes vit.png: a few held-out images with their
predictions, and the <class> token's attention over the patches.
"""

import json
import os
import time

import numpy as np

from autograd import manual_seed, no_grad
from demos._flags import command_line, integer_at_least, number
from demos._plotting import output_dir, plt, save
from nn import functional as F
from nn.recipe import make_optimizer, optimize
from transformer.data.toy_data import ORIENTATIONS, bars
from transformer.families.vit import VisionTransformer, ViTConfig


def accuracy(model, images, labels):
    with no_grad():
        model.eval()
        predicted = model(images).data.argmax(-1)
        model.train()
    return float((predicted == labels).mean()), predicted


def main(argv=None):
    parser = command_line("demos.vit", __doc__)
    parser.add_argument("--steps", type=integer_at_least(1), default=1500, help="at most this many steps (stops at --target)")
    parser.add_argument("--target", type=number(lambda t: 0 < t <= 1, "in (0, 1]"), default=0.95)
    parser.add_argument("--seed", type=integer_at_least(0), default=0)
    parser.add_argument("--out", default="runs/vit")
    args = parser.parse_args(argv)
    out = output_dir(args.out)
    manual_seed(args.seed)
    config = ViTConfig()
    model = VisionTransformer(config)
    test_images, test_labels = bars(1000, config.image_size, np.random.default_rng(10_000 + args.seed))
    optimizer, schedule = make_optimizer(model.parameters(), 3e-3, 50, args.steps)
    rng = np.random.default_rng(args.seed)
    start, acc, step = time.perf_counter(), 0.0, 0
    for step in range(1, args.steps + 1):
        images, labels = bars(64, config.image_size, rng)
        loss = optimize(F.cross_entropy(model(images), labels), optimizer, schedule, 1.0)
        if step % 50 == 0:
            acc, _ = accuracy(model, test_images, test_labels)
            print(f"step {step:4d}  loss {loss:.4f}  held-out accuracy {acc:.1%}  {time.perf_counter() - start:5.1f}s",
                  flush=True)
            if acc >= args.target:
                break
    acc, predicted = accuracy(model, test_images, test_labels)
    print(f"held-out accuracy {acc:.1%} after {step} steps")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"heldout_accuracy": acc, "steps": step, "seconds": time.perf_counter() - start}, f, indent=1)

    shown = 6
    with no_grad():
        model.eval()
        model(test_images[:shown])
    attention = model.cls_attention().mean(axis=1)                       # (shown, N): averaged over heads
    grid = config.image_size // config.patch_size
    fig, axes = plt.subplots(2, shown, figsize=(2.2 * shown + 1, 5.2), layout="constrained")
    for i in range(shown):
        axes[0, i].imshow(test_images[i], cmap="gray")
        ok = "ok" if predicted[i] == test_labels[i] else f"true: {ORIENTATIONS[test_labels[i]]}"
        axes[0, i].set_title(f"{ORIENTATIONS[predicted[i]]}\n{ok}", fontsize=8)
        image = axes[1, i].imshow(attention[i].reshape(grid, grid), cmap="viridis", vmin=0, vmax=attention.max())
        axes[1, i].set_title("<class> attention", fontsize=8)
        for ax in axes[:, i]:
            ax.set_xticks([])
            ax.set_yticks([])
        axes[1, i].set_xlabel("patch column", fontsize=8)
    axes[0, 0].set_ylabel("image", fontsize=8)
    axes[1, 0].set_ylabel("patch row", fontsize=8)
    fig.colorbar(image, ax=axes[1].tolist(), shrink=0.8, label="attention weight")
    fig.suptitle("Vision Transformer on noisy bars: prediction (top), <class> token's attention over patches (bottom)")
    save(fig, f"{out}/vit.png")
    return acc


if __name__ == "__main__":
    main()
