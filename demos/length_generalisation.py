"""Does a Transformer trained on short sequences handle longer ones?  Five ways to give it
positions.

    python -m demos.length_generalisation [--task copy] [--seeds 0 1 2]
                                          [--positional sinusoidal learned rope alibi relative]

Trains the same Transformer on sequences of 1 to 10 symbols (to 99% held-out exact match at
length 10) once per positional scheme and seed: the fixed sinusoidal encoding, a learned
one (positions 11 to 20 of its table are never trained), and the three that most recent
models use instead, which put the distance between query and key into every attention
layer (RoPE, ALiBi, a learned relative bias; transformer/relative_position.py).  Each is
evaluated on lengths 1 to 20.  Writes length_generalisation.png (mean over seeds, with
each seed's line faint) and results.json.
"""

import json
import os

import numpy as np

from demos._flags import command_line, integer_at_least
from demos._plotting import output_dir, plt, save
from transformer.data import tasks
from transformer.positional import POSITIONAL_KINDS
from transformer.training.seq2seq import TrainConfig, evaluate, train


def main(argv=None):
    parser = command_line("demos.length_generalisation", __doc__)
    parser.add_argument("--task", choices=sorted(tasks.ANSWERS), default="copy")
    parser.add_argument("--train-len", type=integer_at_least(1), default=10)
    parser.add_argument("--test-len", type=integer_at_least(1), default=20)
    parser.add_argument("--per-length", type=integer_at_least(1), default=200, help="held-out sequences per length")
    parser.add_argument("--seeds", type=integer_at_least(0), nargs="+", default=[0])
    parser.add_argument("--positional", nargs="+", default=["sinusoidal", "learned", "rope", "alibi", "relative"],
                        choices=POSITIONAL_KINDS)
    parser.add_argument("--out", default="runs/length_generalisation")
    args = parser.parse_args(argv)
    out = output_dir(args.out)
    lengths = list(range(1, args.test_len + 1))
    results = {}
    for positional in args.positional:
        results[positional] = {}
        for seed in args.seeds:
            cfg = TrainConfig(task=args.task, max_len=args.train_len, seed=seed, max_steps=3000,
                              out_dir=os.path.join(out, f"{positional}-seed{seed}"))
            model, metrics = train(cfg, log=lambda line: None, positional=positional, max_len=args.test_len + 2)
            print(f"{positional}, seed {seed}: trained to {metrics['exact_match']:.1%} at length {args.train_len} "
                  f"in {metrics['steps']} steps ({metrics['seconds']:.0f} s)", flush=True)
            scores = {}
            for n in lengths:
                heldout = tasks.heldout_set(args.task, args.per_length, n, cfg.num_symbols, seed=50_000 + n)
                scores[n] = evaluate(model, heldout, n + 1)
            results[positional][seed] = scores
            row = "  ".join(f"{n}:{scores[n]['exact_match']:.0%}" for n in lengths)
            print(f"  exact match by length: {row}", flush=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for i, positional in enumerate(results):
        curves = np.array([[results[positional][seed][n]["exact_match"] for n in lengths] for seed in args.seeds])
        for curve in curves if len(curves) > 1 else []:
            ax.plot(lengths, curve, color=f"C{i}", lw=0.6, alpha=0.35)
        ax.plot(lengths, curves.mean(0), marker="os^vD"[i % 5], color=f"C{i}", label=positional)
    ax.axvspan(0.5, args.train_len + 0.5, color="#e5e7eb", zorder=0, label="lengths seen in training")
    ax.set(xlabel="sequence length", ylabel="held-out exact match", ylim=(-0.02, 1.02),
           title=f"{args.task}: trained on lengths 1-{args.train_len} "
                 f"({'mean of seeds ' + ', '.join(map(str, args.seeds)) if len(args.seeds) > 1 else f'seed {args.seeds[0]}'})")
    ax.legend()
    save(fig, f"{out}/length_generalisation.png")
    return results


if __name__ == "__main__":
    main()
