"""Encoder-only (BERT-style): pre-train by masked-language modelling, then fine-tune a
classifier on the <class> token, and compare with the same classifier trained from scratch.

    python -m demos.encoder_only [--pretrain-steps 600] [--labelled 256] [--out runs/encoder_only]

Sequences are arithmetic progressions modulo 10 (8 symbols).  Pre-training hides 15% of
the symbols (80% <mask>, 10% random, 10% kept) and predicts them.  The downstream task:
is the progression intact, or was one symbol replaced?  Only `--labelled` labelled
examples are available for it, which is where pre-training pays.
"""

import json
import os

import numpy as np

from autograd import manual_seed, no_grad
from demos._flags import command_line, integer_at_least
from demos._plotting import output_dir, plt, save
from nn import functional as F
from nn.recipe import make_optimizer, optimize
from transformer.data import tasks
from transformer.data.toy_data import corruption_task, mask_for_mlm, progressions, with_cls
from transformer.families.encoder_only import EncoderOnly, EncoderOnlyConfig

SYMBOLS, LENGTH = 10, 8


def new_model(seed):
    manual_seed(seed)
    return EncoderOnly(EncoderOnlyConfig(vocab=3 + SYMBOLS, max_len=LENGTH + 1))


def pretrain(model, steps, rng):
    """Masked-language modelling on fresh progressions; returns the MLM accuracy on new ones."""
    optimizer, schedule = make_optimizer(model.parameters(), 3e-3, 50, steps)
    for _ in range(steps):
        inputs, targets = mask_for_mlm(with_cls(progressions(64, LENGTH, SYMBOLS, rng)), SYMBOLS, rng)
        optimize(F.cross_entropy(model.mlm_logits(inputs), targets), optimizer, schedule, 1.0)
    inputs, targets = mask_for_mlm(with_cls(progressions(2000, LENGTH, SYMBOLS, rng)), SYMBOLS, rng)
    with no_grad():
        predicted = model.mlm_logits(inputs).data.argmax(-1)
    chosen = targets != -100
    return float((predicted[chosen] == targets[chosen]).mean())


def finetune(model, labelled, steps, seed):
    x, y = corruption_task(labelled, LENGTH, SYMBOLS, np.random.default_rng(100 + seed))
    optimizer, schedule = make_optimizer(model.parameters(), 1e-3, 20, steps)
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        idx = rng.integers(0, labelled, 32)
        optimize(F.cross_entropy(model.classify(x[idx]), y[idx]), optimizer, schedule, 1.0)
    x_test, y_test = corruption_task(2000, LENGTH, SYMBOLS, np.random.default_rng(999))
    with no_grad():
        return float((model.classify(x_test).data.argmax(-1) == y_test).mean())


def main(argv=None):
    parser = command_line("demos.encoder_only", __doc__)
    parser.add_argument("--pretrain-steps", type=integer_at_least(1), default=600)
    parser.add_argument("--finetune-steps", type=integer_at_least(1), default=200)
    parser.add_argument("--labelled", type=integer_at_least(1), default=256)
    parser.add_argument("--seeds", type=integer_at_least(0), nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default="runs/encoder_only")
    args = parser.parse_args(argv)
    out = output_dir(args.out)
    results = {"scratch": [], "pretrained": [], "mlm_accuracy": []}
    for seed in args.seeds:
        scratch = finetune(new_model(seed), args.labelled, args.finetune_steps, seed)
        model = new_model(seed)
        mlm = pretrain(model, args.pretrain_steps, np.random.default_rng(seed))
        pretrained = finetune(model, args.labelled, args.finetune_steps, seed)
        for key, value in (("scratch", scratch), ("pretrained", pretrained), ("mlm_accuracy", mlm)):
            results[key].append(value)
        print(f"seed {seed}: masked-token accuracy after pre-training {mlm:.1%};  classifier accuracy "
              f"from scratch {scratch:.1%}, after pre-training {pretrained:.1%}", flush=True)
    print(f"mean over seeds: from scratch {np.mean(results['scratch']):.1%}, "
          f"pre-trained {np.mean(results['pretrained']):.1%}")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)

    x, y = corruption_task(1, LENGTH, SYMBOLS, np.random.default_rng(5))
    with no_grad():
        model.classify(x)
    weights = model.cls_attention()[0]                                   # (H, T)
    fig, ax = plt.subplots(figsize=(7, 2.8))
    image = ax.imshow(weights, cmap="viridis", vmin=0)
    fig.colorbar(image, ax=ax, label="attention weight")
    ax.set_xticks(range(x.shape[1]), ["<cls>"] + [tasks.symbol_label(t) for t in x[0, 1:]])
    ax.set(xlabel="key: the class token, then the sequence's tokens", ylabel="head", title=f"<class> token's attention, last layer ({'intact' if y[0] else 'corrupted'} input)")
    save(fig, f"{out}/cls_attention.png")
    return results


if __name__ == "__main__":
    main()
