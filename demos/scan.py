"""SCAN (Lake and Baroni, 2018): can a sequence-to-sequence model follow instructions it was
not trained on?

    python -m demos.scan --split simple|length|jump --model transformer|rnn-attention|rnn
                         [--seed 0] [--steps N] [--positional rope] [--out runs/scan]
    python -m demos.scan --all [--seeds 0 1 2] [--jobs 2]   # the grid: 3 splits x 3 models, 2 cells at a time

Trains the chosen encoder-decoder on the split's training commands (progress lines show
the loss and greedy exact match on a fixed sample of *training* commands; the test split
is never looked at during training), then scores greedy exact-sequence match on the whole
test split.  Writes, under OUT/SPLIT-MODEL-seedS: metrics.json, loss.png and, for the
models with attention, cross_attention.png for a composed test command; appends the
result to OUT/results.jsonl and rewrites OUT/results.md (and with --all, OUT/scan.png).
"""

import json
import os
import subprocess
import sys
import time

import numpy as np

from autograd import manual_seed, no_grad
from demos._flags import command_line, integer_at_least, number
from demos._plotting import output_dir, plt, save
from demos.plots import loss_curve
from transformer.data import scan
from transformer.families.rnn import RNNConfig, RNNEncoderDecoder
from transformer.positional import POSITIONAL_KINDS
from transformer.training.seq2seq import TrainConfig, build_model, evaluate, train

MODELS = ("transformer", "rnn-attention", "rnn")
# Lake and Baroni (2018), arXiv:1711.00350: test accuracy of their overall-best network (an LSTM
# chosen across all experiments) and of the best architecture for each split.
PUBLISHED = {"simple": "99.8% (overall-best network)",
             "length": "13.8% (overall-best); 20.8% (best: GRU with attention)",
             "jump": "0.08% (overall-best); 1.2% (best: GRU with attention)"}
OVERALL_BEST = {"simple": 0.998, "length": 0.138, "jump": 0.0008}      # the same, as fractions, for the chart
# Chosen on the simple split's *training* commands (exact match on a sample of them), never on a test split.
STEPS = {"transformer": 3000, "rnn-attention": 1500, "rnn": 2000}
LR = {"transformer": 2e-3, "rnn-attention": 1e-3, "rnn": 1e-3}


def make_model(name, seed, positional="sinusoidal", dropout=0.0):
    """Our encoder-decoders at a size that trains in minutes: a 2+2-layer pre-norm Transformer
    (d_model 128, 4 heads), and GRU encoder-decoders (hidden 128) with additive attention or
    without."""
    manual_seed(seed)
    if name == "transformer":
        return build_model(TrainConfig(), scan.ScanTask, d_model=128, num_heads=4, d_ff=256, dropout=dropout,
                           norm_first=True, positional=positional)
    attention = "additive" if name == "rnn-attention" else None
    return RNNEncoderDecoder(RNNConfig(scan.SRC_VOCAB, scan.TGT_VOCAB, embed_dim=64, hidden_size=128,
                                       attention=attention))


def run(split, model_name, seed, out, steps=None, positional="sinusoidal", lr=None, dropout=0.0, log=print):
    """Train one cell, score the whole test split; returns the result dict."""
    started = time.perf_counter()
    tag = model_name if positional == "sinusoidal" or model_name != "transformer" else f"transformer-{positional}"
    run_dir = output_dir(os.path.join(out, f"{split}-{tag}-seed{seed}"))
    data = scan.ScanTask(split, seed)
    steps, lr = steps or STEPS[model_name], lr or LR[model_name]
    cfg = TrainConfig(task=f"scan-{split}", batch_size=64, max_steps=steps, lr=lr, warmup=200, decay_steps=steps,
                      eval_every=max(steps // 10, 1), eval_size=500, target_accuracy=1.0, seed=seed, out_dir=run_dir)
    model, metrics = train(cfg, model=make_model(model_name, seed, positional, dropout), data=data,
                           log=lambda line: log(f"[{split} {tag} seed {seed}] {line}"))
    test = evaluate(model, data.test_batch(), scan.MAX_ACTIONS + 1)
    result = {"split": split, "model": tag, "seed": seed, "steps": metrics["steps"],
              "train_sample_exact_match": metrics["exact_match"], "test_exact_match": test["exact_match"],
              "test_token_accuracy": test["token_accuracy"], "train_size": len(data.train_pairs),
              "test_size": len(data.test_pairs), "seconds": time.perf_counter() - started}
    log(f"[{split} {tag} seed {seed}] test exact match {test['exact_match']:.2%} on {len(data.test_pairs)} "
        f"commands ({result['seconds']:.0f} s)")
    metrics.update(test=test, result=result)
    with open(os.path.join(run_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    loss_curve(metrics["history"], os.path.join(run_dir, "loss.png"),
               title=f"SCAN {split} split, {tag} (exact match on training commands)")
    if model_name != "rnn":
        plot_cross_attention(model, data, os.path.join(run_dir, "cross_attention.png"), title=f"{tag}, {split} split")
    with open(os.path.join(out, "results.jsonl"), "a") as f:
        f.write(json.dumps(result) + "\n")
    write_table(out)
    return result


def composed_example(data):
    """A test command with a conjunction and a repetition (e.g. "jump twice after walk left")."""
    for command, actions in data.test_pairs:
        words = command.split()
        if ("after" in words or "and" in words) and ("twice" in words or "thrice" in words) and len(actions) <= 16:
            return command, actions
    return data.test_pairs[0]


def plot_cross_attention(model, data, path, title):
    """Where the decoder looks in the command while writing each action (teacher-forced on
    the correct actions): the last layer's heads for the Transformer, the one map of the RNN."""
    batch = scan.to_batch([composed_example(data)])
    with no_grad():
        model.eval()
        model(batch.src, batch.tgt_in)
    if isinstance(model, RNNEncoderDecoder):
        maps, names = model.attn_weights[0][None], ["additive attention"]          # (1, T, S)
    else:
        last = max(n for n in model.attention_maps() if n.endswith("cross_attn"))
        maps = model.attention_maps()[last][0]                                     # (H, T, S)
        names = [f"{last.split('.')[0]} layer {last.split('.')[2]}, head {h}" for h in range(len(maps))]
    src_labels = [scan.command_label(t) for t in batch.src[0]]
    tgt_labels = [scan.action_label(t) for t in batch.tgt_out[0]]
    fig, axes = plt.subplots(1, len(maps), figsize=(2.2 + 2.0 * len(maps), 0.3 * len(tgt_labels) + 2),
                             squeeze=False, layout="constrained")
    for ax, weights, name in zip(axes[0], maps, names):
        image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1, aspect="auto")
        ax.set_xticks(range(len(src_labels)), src_labels, rotation=90, fontsize=8)
        ax.set_yticks(range(len(tgt_labels)), tgt_labels, fontsize=7)
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("key: command word", fontsize=8)
    axes[0, 0].set_ylabel("query: the action being written", fontsize=8)
    fig.colorbar(image, ax=axes[0].tolist(), shrink=0.8, label="attention weight")
    fig.suptitle(f"cross-attention, {title}", fontsize=9)
    save(fig, path)


def read_results(out):
    path = os.path.join(out, "results.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        latest = {}
        for line in f:
            if line.strip():
                result = json.loads(line)
                latest[(result["split"], result["model"], result["seed"])] = result   # a re-run replaces its cell
        return list(latest.values())


def write_table(out):
    """results.md: test exact match per split and model (mean and each seed), with seconds,
    beside Lake and Baroni's figures."""
    results = read_results(out)
    models = sorted({r["model"] for r in results}, key=lambda m: (m not in MODELS, MODELS.index(m) if m in MODELS else m))
    lines = ["| split | model | test exact match, mean | per seed | seconds per run | Lake & Baroni (2018) |",
             "|---|---|---|---|---|---|"]
    for split in scan.SPLITS:
        for model in models:
            runs = sorted((r for r in results if r["split"] == split and r["model"] == model), key=lambda r: r["seed"])
            if not runs:
                continue
            mean = np.mean([r["test_exact_match"] for r in runs])
            per_seed = ", ".join(f"{r['test_exact_match']:.2%} (seed {r['seed']})" for r in runs)
            seconds = ", ".join(f"{r['seconds']:.0f}" for r in runs)
            lines.append(f"| {split} | {model} | {mean:.2%} | {per_seed} | {seconds} | {PUBLISHED[split]} |")
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def grid_chart(out, path):
    """Grouped bars: one group per split, one bar per model (mean over seeds, seeds as dots)."""
    results = read_results(out)
    models = [m for m in MODELS if any(r["model"] == m for r in results)]
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.8 / max(len(models), 1)
    for i, model in enumerate(models):
        for j, split in enumerate(scan.SPLITS):
            values = [r["test_exact_match"] for r in results if r["model"] == model and r["split"] == split]
            if values:
                x = j + (i - (len(models) - 1) / 2) * width
                ax.bar(x, np.mean(values), width, color=f"C{i}", label=model if j == 0 else None)
                ax.plot([x] * len(values), values, "k.", ms=4)
    for j, split in enumerate(scan.SPLITS):
        ax.plot([j - 0.45, j + 0.45], [OVERALL_BEST[split]] * 2, "k--", lw=1,
                label="Lake & Baroni 2018, overall-best network" if j == 0 else None)
    ax.set_xticks(range(len(scan.SPLITS)), [f"{s} split" for s in scan.SPLITS])
    ax.set(xlabel="SCAN split", ylabel="test exact match", ylim=(0, 1.02),
           title="SCAN: our models (bars: mean over seeds, dots: seeds)")
    ax.legend()
    save(fig, path)


def cell_command(split, model, seed, out, options=()):
    return [sys.executable, "-m", "demos.scan", "--split", split, "--model", model, "--seed", str(seed), "--out", out,
            *options]


def run_grid(seeds, out, jobs, options=()):
    """Every split with every model, `jobs` cells at a time, each in its own process with one
    thread (on 2 cores, two one-thread runs finish sooner than one two-thread run after
    another).  Returns the seconds of wall time."""
    started = time.perf_counter()
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    pending = [cell_command(split, model, seed, out, options)
               for seed in seeds for split in scan.SPLITS for model in MODELS]
    running = []
    while pending or running:
        while pending and len(running) < jobs:
            running.append(subprocess.Popen(pending.pop(0), env=env))
        running[0].wait()
        if running[0].returncode:
            raise SystemExit(f"demos.scan: {' '.join(running[0].args[1:])} failed")
        running = [p for p in running if p.poll() is None]
    return time.perf_counter() - started


def main(argv=None):
    parser = command_line("demos.scan", __doc__)
    parser.add_argument("--split", choices=scan.SPLITS, default="simple")
    parser.add_argument("--model", choices=MODELS, default="transformer")
    parser.add_argument("--positional", default="sinusoidal", choices=POSITIONAL_KINDS,
                        help="the Transformer's positional scheme")
    parser.add_argument("--seed", type=integer_at_least(0), default=0)
    parser.add_argument("--seeds", type=integer_at_least(0), nargs="+", help="with --all: the seeds of each cell (default: --seed)")
    parser.add_argument("--steps", type=integer_at_least(1), help=f"training steps (default per model: {STEPS})")
    parser.add_argument("--lr", type=number(lambda lr: lr > 0, "> 0"), help=f"peak learning rate, warm-up then cosine decay (default per model: {LR})")
    parser.add_argument("--dropout", type=number(lambda p: 0 <= p < 1, "in [0, 1)"), default=0.0, help="the Transformer's dropout")
    parser.add_argument("--all", action="store_true", help="the grid: every split with every model")
    parser.add_argument("--jobs", type=integer_at_least(1), default=2, help="with --all: cells run at a time, one thread each")
    parser.add_argument("--out", default="runs/scan")
    args = parser.parse_args(argv)
    out = output_dir(args.out)
    if not args.all:
        return run(args.split, args.model, args.seed, out, args.steps, args.positional, args.lr, args.dropout)
    options = [f"--{name}={value}" for name, value in (("steps", args.steps), ("lr", args.lr)) if value is not None]
    seconds = run_grid(args.seeds or [args.seed], out, args.jobs, options + [f"--dropout={args.dropout}"])
    grid_chart(out, os.path.join(out, "scan.png"))
    print(open(os.path.join(out, "results.md")).read())
    print(f"the grid took {seconds / 60:.0f} min of wall time, {args.jobs} cells at a time")
    return read_results(out)


if __name__ == "__main__":
    main()
