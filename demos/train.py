"""Train the encoder-decoder Transformer on a toy task and show what it learned.

    python -m demos.train --task reverse          # or --task copy
    python -m demos.train --task reverse --seed 3 --out runs/reverse-3

Prints progress and sample decodes, compares greedy decoding with beam search, and
writes to --out: loss.png (training loss and held-out accuracy), attention_*.png (one
panel per head for encoder self-attention, decoder masked self-attention and
encoder-decoder cross-attention; for reverse, cross-attention shows the anti-diagonal),
metrics.json and checkpoint.npz.
"""

import argparse
import json
import os

import numpy as np

from transformer import tasks
from transformer.decoding import beam_search, greedy_decode
from transformer.training import TrainConfig, sample_decodes, train


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = TrainConfig()
    p.add_argument("--task", choices=tasks.TASKS, default=d.task)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--out", default=None, help="output folder (default runs/<task>)")
    p.add_argument("--steps", type=int, default=d.max_steps, help="at most this many steps (stops at --target)")
    p.add_argument("--target", type=float, default=d.target_accuracy, help="stop at this held-out exact match")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (warm-up, then cosine decay)")
    p.add_argument("--warmup", type=int, default=d.warmup)
    p.add_argument("--decay-steps", type=int, default=d.decay_steps, help="cosine decay to lr/10 over this many steps")
    p.add_argument("--label-smoothing", type=float, default=d.label_smoothing)
    p.add_argument("--eval-every", type=int, default=d.eval_every)
    p.add_argument("--symbols", type=int, default=d.num_symbols)
    p.add_argument("--max-len", type=int, default=d.max_len, help="longest training sequence; held-out sequences have this length")
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=128)
    p.add_argument("--layers", type=int, default=2, help="encoder layers and decoder layers (each)")
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--norm-first", action="store_true", help="pre-norm instead of the paper's post-norm")
    p.add_argument("--positional", choices=["sinusoidal", "learned", "binary"], default="sinusoidal")
    p.add_argument("--beam-size", type=int, default=4)
    p.add_argument("--beam-examples", type=int, default=200, help="held-out sequences to compare greedy and beam on")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    out = args.out or os.path.join("runs", args.task)
    cfg = TrainConfig(task=args.task, num_symbols=args.symbols, max_len=args.max_len, batch_size=args.batch_size,
                      max_steps=args.steps, lr=args.lr, warmup=args.warmup, decay_steps=args.decay_steps, label_smoothing=args.label_smoothing,
                      eval_every=args.eval_every, target_accuracy=args.target, seed=args.seed, out_dir=out)
    model_args = dict(d_model=args.d_model, num_heads=args.heads, d_ff=args.d_ff, num_encoder_layers=args.layers,
                      num_decoder_layers=args.layers, dropout=args.dropout, norm_first=args.norm_first,
                      positional=args.positional)
    print(f"training a Transformer ({args.layers}+{args.layers} layers, d_model {args.d_model}, {args.heads} heads) "
          f"to {args.task} sequences of {cfg.min_len}-{cfg.max_len} symbols; held-out: {cfg.eval_size} sequences "
          f"of length {cfg.max_len}")
    model, metrics = train(cfg, **model_args)
    verdict = "reached" if metrics["reached_target"] else "did NOT reach"
    print(f"\n{verdict} {cfg.target_accuracy:.0%} exact match: {metrics['exact_match']:.1%} after "
          f"{metrics['steps']} steps, {metrics['seconds']:.1f} s")

    from demos import plots
    print("\nsample decodes (source -> greedy output):")
    spell = lambda tokens: " ".join(plots.token_label(t) for t in tokens)   # noqa: E731
    for src, want, got in sample_decodes(model, cfg, count=4):
        mark = "ok" if got == want else f"WRONG, expected {spell(want)}"
        print(f"  {spell(src):<20} -> {spell(got):<20} {mark}")

    metrics["beam_vs_greedy"] = compare_beam_and_greedy(model, cfg, args.beam_size, args.beam_examples)
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)

    plots.loss_curve(metrics["history"], os.path.join(out, "loss.png"), title=f"{args.task}: training")
    example = tasks.heldout_set(cfg.task, 1, cfg.max_len, cfg.num_symbols, seed=7)
    plots.attention_heatmaps(model, example, out)
    print(f"wrote {out}/metrics.json and {out}/checkpoint.npz")
    return metrics


def compare_beam_and_greedy(model, cfg, beam_size, count):
    """Exact match of greedy decoding and of beam search on the same held-out sequences."""
    heldout = tasks.heldout_set(cfg.task, count, cfg.max_len, cfg.num_symbols, seed=cfg.seed + 20_000)
    model.eval()
    greedy = greedy_decode(model, heldout.src, cfg.max_len + 1, tasks.BOS, tasks.EOS, tasks.PAD)
    beams = beam_search(model, heldout.src, cfg.max_len + 1, tasks.BOS, tasks.EOS, beam_size=beam_size)
    wanted = [tasks.strip(t) for t in heldout.tgt_out]
    greedy_acc = float(np.mean([tasks.strip(g) == w for g, w in zip(greedy, wanted)]))
    beam_acc = float(np.mean([tasks.strip(b) == w for b, w in zip(beams, wanted)]))
    print(f"\non {count} other held-out sequences: greedy exact match {greedy_acc:.1%}, "
          f"beam search (beam {beam_size}) {beam_acc:.1%}")
    return {"examples": count, "beam_size": beam_size, "greedy_exact_match": greedy_acc, "beam_exact_match": beam_acc}


if __name__ == "__main__":
    main()
