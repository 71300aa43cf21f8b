"""Does a Transformer trained on short sequences handle longer ones?  Sinusoidal against
learned positional encodings.

    python -m demos.length_generalisation [--task copy] [--out runs/length_generalisation]

Trains the same Transformer twice on sequences of 1 to 10 symbols (to 99% held-out exact
match at length 10), once with the fixed sinusoidal encoding and once with a learned one
(positions 11 to 20 of the learned table are never trained), then evaluates both on
lengths 1 to 20.  Writes length_generalisation.png and results.json.
"""

import argparse
import json
import os

from demos._plotting import output_dir, plt, save
from transformer import tasks
from transformer.training import TrainConfig, evaluate, train


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", choices=tasks.TASKS, default="copy")
    parser.add_argument("--train-len", type=int, default=10)
    parser.add_argument("--test-len", type=int, default=20)
    parser.add_argument("--per-length", type=int, default=200, help="held-out sequences per length")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/length_generalisation")
    args = parser.parse_args(argv)
    out = output_dir(args.out)
    lengths = list(range(1, args.test_len + 1))
    results = {}
    for positional in ("sinusoidal", "learned"):
        cfg = TrainConfig(task=args.task, max_len=args.train_len, seed=args.seed, max_steps=3000,
                          out_dir=os.path.join(out, positional))
        model, metrics = train(cfg, log=lambda line: None, positional=positional, max_len=args.test_len + 2)
        print(f"{positional}: trained to {metrics['exact_match']:.1%} at length {args.train_len} "
              f"in {metrics['steps']} steps ({metrics['seconds']:.0f} s)", flush=True)
        results[positional] = {}
        for n in lengths:
            heldout = tasks.heldout_set(args.task, args.per_length, n, cfg.num_symbols, seed=50_000 + n)
            results[positional][n] = evaluate(model, heldout, n + 1)
        row = "  ".join(f"{n}:{results[positional][n]['exact_match']:.0%}" for n in lengths)
        print(f"  exact match by length: {row}")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)

    fig, ax = plt.subplots(figsize=(7, 4))
    for positional, marker in (("sinusoidal", "o"), ("learned", "s")):
        ax.plot(lengths, [results[positional][n]["exact_match"] for n in lengths], marker=marker, label=positional)
    ax.axvspan(0.5, args.train_len + 0.5, color="#e5e7eb", zorder=0, label="lengths seen in training")
    ax.set(xlabel="sequence length", ylabel="held-out exact match", ylim=(-0.02, 1.02),
           title=f"{args.task}: trained on lengths 1-{args.train_len}")
    ax.legend()
    save(fig, f"{out}/length_generalisation.png")
    return results


if __name__ == "__main__":
    main()
