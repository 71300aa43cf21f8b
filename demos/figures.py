"""Regenerate the results document, docs/RESULTS.md, from seeded runs of the demos.

    python -m demos.figures                      # run every demo behind the results (about 2 h on 2 cores)
    python -m demos.figures --only scan vit      # some groups
    python -m demos.figures --collect            # no training: re-read the demos' outputs under runs/
    python -m demos.figures --render             # neither: rewrite the documents from docs/figures.json alone

Each group runs its demos (seeded) into runs/, then reads what they wrote (metrics.json,
results.json, images) and turns it into tables, logs and images, each with the command
that produced it. Those are recorded in docs/figures.json with the machine and the date,
and docs/RESULTS.md is rendered from that record alone (demos/_report.py), together with
the README's two generated blocks (the headline table and the main demo's log with the
machine it ran on); `--render` re-renders them after a change to the rendering, measuring
nothing.
tests/test_readme_figures.py checks that RESULTS.md and those blocks are what the record
renders, so a figure is never typed by hand.
"""

import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from demos import _report
from demos._flags import command_line
from demos._report import code, image, table
from demos.bench import train as bench_train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURES = os.path.join(ROOT, "docs", "figures.json")
RESULTS = os.path.join(ROOT, "docs", "RESULTS.md")
README = os.path.join(ROOT, "README.md")


def pct(x):
    """0.994 -> '99.4%', 1.0 -> '100%'."""
    return "100%" if x >= 0.9995 else f"{x:.1%}"


def load(path):
    with open(os.path.join(ROOT, path)) as f:
        return json.load(f)


def exists(path):
    return os.path.exists(os.path.join(ROOT, path))


def group(items, images=None, headline=(), **extra):
    """What a collector returns: the items of its section, images to copy into docs/images/
    ({name: source}), headline rows ((result, figure, command)), and anything else to record."""
    return {"items": items, "images": images or {}, "headline": [list(row) for row in headline], **extra}


# ----- the groups: the commands that produce the figures, and how to read them -----

def train_commands(runs):
    commands = [["demos.train", "--task", "reverse", "--out", f"{runs}/reverse"]]
    commands += [["demos.train", "--task", "reverse", "--seed", str(s), "--out", f"{runs}/reverse-{s}"] for s in range(5)]
    commands += [["demos.train", "--task", "copy", "--seed", str(s), "--out", f"{runs}/copy-{s}"] for s in range(3)]
    commands += [["demos.train", "--task", "reverse", "--label-smoothing", "0.1", "--out", f"{runs}/reverse-ls"],
                 ["demos.train", "--task", "reverse", "--dropout", "0.1", "--out", f"{runs}/reverse-do"]]
    commands += [["demos.train", "--task", t, "--save-every", "100", "--average-last", "5", "--out", f"{runs}/avg-{t}"]
                 for t in ("reverse", "copy")]
    return commands


def main_log(metrics):
    """The main demo's progress lines, first and last evaluation, as it prints them."""
    history = metrics["history"]
    lines = []
    for entry in (history["evals"][0], history["evals"][-1]):
        loss = np.mean(history["loss"][entry["step"] - 100:entry["step"]])
        lines.append(f"step {entry['step']:5d}  loss {loss:.4f}  lr {entry['lr']:.2e}  exact {entry['exact_match']:.1%}  "
                     f"tokens {entry['token_accuracy']:.1%}  {entry['seconds']:5.1f}s")
    b = metrics["beam_vs_greedy"]
    return "\n".join([lines[0], "...", lines[1],
                      f"reached 99% exact match: {metrics['exact_match']:.1%} after {metrics['steps']} steps, "
                      f"{metrics['seconds']:.1f} s", "sample decodes (source -> greedy output):",
                      *metrics["sample_decodes"],
                      f"on {b['examples']} other held-out sequences: greedy exact match {b['greedy_exact_match']:.1%}, "
                      f"beam search (beam {b['beam_size']}) {b['beam_exact_match']:.1%}"])


def collect_train(runs):
    runs_of = {task: [load(f"{runs}/{task}-{seed}/metrics.json") for seed in seeds]
               for task, seeds in (("reverse", range(5)), ("copy", range(3)))}
    rows = [[task, seed, m["steps"], f"{m['seconds']:.1f}", pct(m["exact_match"]),
             f"{pct(m['beam_vs_greedy']['greedy_exact_match'])} / {pct(m['beam_vs_greedy']['beam_exact_match'])}"]
            for task, ms in runs_of.items() for seed, m in enumerate(ms)]
    ls, do = load(f"{runs}/reverse-ls/metrics.json"), load(f"{runs}/reverse-do/metrics.json")
    averaged = []
    for task in ("reverse", "copy"):
        m = load(f"{runs}/avg-{task}/metrics.json")
        a = m["averaged"]
        averaged.append([task, m["steps"], f"{a['steps'][0]}-{a['steps'][-1]}", pct(a["final_exact_match"]),
                         pct(a["averaged_exact_match"])])
    main = load(f"{runs}/reverse/metrics.json")
    items = [
        table("Reverse and copy: every run stops at 99% held-out exact match",
              ["task", "seed", "steps", "training seconds", "held-out exact match (1000)",
               "greedy / beam 4 (200 other sequences)"], rows, "python -m demos.train --task reverse|copy --seed N"),
        table("Training options (reverse, seed 0)", ["option", "steps", "training seconds", "held-out exact match"],
              [[flag, m["steps"], f"{m['seconds']:.1f}", pct(m["exact_match"])]
               for flag, m in (("--label-smoothing 0.1", ls), ("--dropout 0.1", do))],
              "python -m demos.train --task reverse --label-smoothing 0.1 | --dropout 0.1"),
        table("Checkpoint averaging (seed 0, checkpoints every 100 steps)",
              ["task", "steps", "averaged steps", "final model", "average of the last 5"], averaged,
              "python -m demos.train --task reverse|copy --save-every 100 --average-last 5"),
        code("The main demo's log", main_log(main), "python -m demos.train --task reverse"),
        image("Cross-attention of the reverse task", "reverse_cross_attention.png"),
        image("Training loss and held-out exact match", "reverse_loss.png"),
    ]
    def span(values, form):
        """'800-1000', or '800' when every run gave the same."""
        low, high = form(min(values)), form(max(values))
        return low if low == high else f"{low}-{high}"

    headline = [(f"Transformer learns to {task} ({len(ms)} seeds)",
                 f"{span([m['exact_match'] for m in ms], pct)} exact match in {span([m['steps'] for m in ms], str)} "
                 f"steps, {span([m['seconds'] for m in ms], lambda x: f'{x:.0f}')} s of training",
                 f"python -m demos.train --task {task}") for task, ms in runs_of.items()]
    images = {"reverse_cross_attention.png": f"{runs}/reverse/attention_decoder_cross_attn.png",
              "reverse_loss.png": f"{runs}/reverse/loss.png"}
    return group(items, images, headline, readme_log=main_log(main))


def collect_bottleneck(runs):
    results = load(f"{runs}/bottleneck/results.json")["results"]
    names = {"RNN": "RNN (decoder sees only the encoder's last state)", "RNN + attention": "RNN + additive attention",
             "Transformer": "Transformer"}
    lengths = sorted(results["RNN"], key=int)
    rows = [[label, *(pct(results[name][n]["exact_match"]) for n in lengths)] for name, label in names.items()]
    return group([table("The bottleneck: exact match on reverse after 600 steps, by source length",
                         ["model", *lengths], rows),
                  image("Exact match by source length", "bottleneck.png"),
                  image("The RNN's additive attention on reverse", "rnn_attention.png")],
                 {"bottleneck.png": f"{runs}/bottleneck/bottleneck.png",
                  "rnn_attention.png": f"{runs}/bottleneck/rnn_attention.png"},
                 [("RNN without / with attention, reverse of length 10",
                   f"{rows[0][2]} / {rows[1][2]} exact match", "python -m demos.bottleneck")])


def collect_length_generalisation(runs):
    results = load(f"{runs}/length_generalisation/results.json")
    rows = []
    for scheme, by_seed in results.items():
        seeds = sorted(by_seed, key=int)
        mean = {n: np.mean([by_seed[s][n]["exact_match"] for s in seeds]) for n in by_seed[seeds[0]]}
        rows.append([scheme, *(pct(mean[str(n)]) for n in (10, 11, 12, 15, 20)),
                     ", ".join(pct(by_seed[s]["11"]["exact_match"]) for s in seeds)])
    return group([table("Copy trained on lengths 1-10, tested longer: exact match, mean of seeds 0-2",
                        ["positions", "length 10", "11", "12", "15", "20", "length 11, each seed"], rows),
                  image("Exact match by length and positional scheme", "length_generalisation.png")],
                 {"length_generalisation.png": f"{runs}/length_generalisation/length_generalisation.png"})


def collect_families(runs):
    enc, dec, vit = (load(f"{runs}/{name}/results.json") for name in ("encoder_only", "decoder_only", "vit"))
    mlm, gen = enc["mlm_accuracy"], dec["generation"]
    rows = [["encoder-only (BERT-style)", f"masked-token accuracy after pre-training, lowest-highest of {len(mlm)} seeds",
             f"{min(mlm):.1%}-{max(mlm):.1%}", "python -m demos.encoder_only"],
            ["encoder-only (BERT-style)", f"classifier on 256 labelled examples, from scratch / pre-trained, mean of "
             f"{len(enc['scratch'])} seeds",
             f"{np.mean(enc['scratch']):.1%} / {np.mean(enc['pretrained']):.1%}", "python -m demos.encoder_only"],
            ["decoder-only (GPT-style)", "exact match on the 145 held-out sort sequences",
             pct(dec["heldout_exact_match"]), "python -m demos.decoder_only"],
            *[["decoder-only (GPT-style)", f"generation with the key/value cache, {what}: speed-up",
               f"{gen[what]['speedup']:.1f}x", "python -m demos.decoder_only"] for what in gen],
            ["ViT", f"held-out accuracy after {vit['steps']} steps", pct(vit["heldout_accuracy"]), "python -m demos.vit"]]
    return group([table("The other families", ["model", "measured", "figure", "command"], rows),
                  image("ViT predictions and the class token's attention", "vit.png")],
                 {"vit.png": f"{runs}/vit/vit.png"})


def collect_gpt(runs):
    m = load(f"{runs}/gpt/metrics.json")
    wall = load(f"{runs}/wall_seconds.json")[f"demos.gpt --out {runs}/gpt"]
    with open(os.path.join(ROOT, runs, "gpt", "sample.txt")) as f:
        sample = "".join(f.readlines()[:8])
    rows = [[m["iterations"], f"{m['train_loss']:.3f}", f"{m['val_loss']:.3f}", f"{m['seconds']:.0f}",
             f"{int(wall // 60)} min {wall % 60:.0f} s"]]
    return group([table("A character-level GPT with nanoGPT's CPU recipe, on the standard library's docstrings",
                        ["iterations", "train loss (nats/char)", "validation loss", "training seconds",
                         "wall time from the shell"], rows, "python -m demos.gpt"),
                  code("Its sample (temperature 0.8, top-k 200)", sample),
                  image("Training and validation loss", "gpt_loss.png")],
                 {"gpt_loss.png": f"{runs}/gpt/loss.png"},
                 [("Character GPT, 2000 iterations of nanoGPT's CPU recipe",
                   f"validation loss {m['val_loss']:.3f} nats/char", "python -m demos.gpt")])


def collect_gpt_recipe(runs):
    recipe = load(f"{runs}/bench/gpt-recipe.json")["recipe"]
    ours, torch = recipe["ours"], recipe["pytorch"]
    rows = [[a["step"], f"{a['val']:.8f}", f"{b['val']:.8f}", f"{abs(a['val'] - b['val']):.0e}"]
            for a, b in zip(ours["evals"], torch["evals"])]
    return group([table("The same GPT in PyTorch, from our initial weights, on the same batches: validation loss",
                        ["iteration", "ours", "PyTorch", "difference"], rows)],
                 headline=[("GPT trained here and in PyTorch, same weights and batches",
                            f"validation loss {ours['val_loss']:.8f} vs {torch['val_loss']:.8f}",
                            "python -m demos.bench.train --model gpt --recipe")])


def collect_tokenizer(runs):
    b = load(f"{runs}/bench/bpe.json")
    timings = [["train, incremental (transformer/data/bpe_training.py)", f"{b['train_s']:.2f}"],
               ["train, readable reference (transformer/data/bpe.py), at its time per merge",
                f"{b['reference_per_merge_s'] * b['merges']:.0f}"],
               ["train, Hugging Face tokenizers", "-" if b["tokenizers_train_s"] is None else f"{b['tokenizers_train_s']:.2f}"],
               ["encode, ours (empty cache)", f"{b['encode_s']:.2f}"],
               ["encode, tiktoken with our merges" + (" (the same tokens)" if b["tiktoken_tokens_equal_ours"] else ""),
                "-" if b["tiktoken_encode_s"] is None else f"{b['tiktoken_encode_s']:.2f}"]]
    models = []
    for name in ("gpt", "gpt-bpe"):
        m = load(f"{runs}/{name}/metrics.json")
        models.append([m["tokenizer"], m["vocab"], f"{m['bytes_per_token']['val']:.2f}", m["iterations"],
                       f"{m['seconds']:.0f}", f"{m['val_loss']:.3f}", f"{m['val_bits_per_byte']:.3f}"])
    return group([table(f"Byte-level BPE on {b['bytes']:,} bytes of the default corpus, {b['merges']} merges, one thread "
                        "(seconds, medians of interleaved rounds)", ["what", "seconds"], timings,
                        "python -m demos.bench.bpe"),
                  table("The GPT on characters and on BPE tokens, same recipe and iterations",
                        ["tokens", "vocabulary", "bytes a token (validation)", "iterations", "training seconds",
                         "validation nats a token", "validation bits a byte"], models,
                        "python -m demos.gpt --tokenizer char|bpe")],
                 headline=[(f"BPE, {b['merges']} merges learned from 1 MB, one thread", f"{b['train_s']:.2f} s",
                            "python -m demos.bench.bpe")])


def llama_commands(runs):
    return [["demos.gpt", "--arch", arch, "--out", f"{runs}/gpt-{arch}"] for arch in ("gpt2", "llama")] + [
        ["demos.bench.llama", "--json", f"{runs}/bench/llama.json"]]


def collect_llama(runs):
    rows = []
    for arch in ("gpt2", "llama"):
        m = load(f"{runs}/gpt-{arch}/metrics.json")
        rows.append([arch, f"{m['parameters']:,}", m["iterations"], f"{m['seconds']:.0f}", f"{m['val_loss']:.3f}",
                     f"{m['val_bits_per_byte']:.3f}"])
    b = load(f"{runs}/bench/llama.json")
    steps = [[arch, f"{b['median_ms'][arch]:.1f}"] for arch in ("gpt2", "llama")]
    steps.append(["Llama / GPT-2 (median of the rounds' ratios)", f"{b['llama_over_gpt2']:.2f}"])
    return group([table("GPT-2's block and Llama's (RMSNorm, SwiGLU, RoPE, no biases), nanoGPT's CPU recipe on the "
                        "default corpus", ["--arch", "parameters", "iterations", "training seconds",
                                           "validation nats/char", "validation bits a byte"], rows,
                        "python -m demos.gpt --arch gpt2|llama",
                        "The same iterations, batches and schedule for both, one run after the other on a machine "
                        "shared with other work: the training seconds are no speed comparison (the step table "
                        "below is, its rounds interleaved)."),
                  table(f"Their training steps, {b['threads']} thread, same width (ms, medians of interleaved rounds)",
                        ["--arch", "ms a step"], steps, "python -m demos.bench.llama")])


def scan_commands(runs):
    return ([["demos.scan", "--all", "--seeds", "0", "1", "2", "--out", f"{runs}/scan"]]
            + [["demos.scan", "--split", "length", "--positional", kind, "--out", f"{runs}/scan"]
               for kind in ("rope", "alibi", "relative")])


def collect_scan(runs):
    with open(os.path.join(ROOT, runs, "scan", "results.md")) as f:
        lines = [line.rstrip("\n") for line in f if line.startswith("| ")]
    header, rows = lines[0], [[cell.strip() for cell in line.split("|")[1:-1]] for line in lines[1:]]
    items = [table("SCAN (Lake and Baroni, 2018): greedy exact match on each split's whole test set",
                   [cell.strip() for cell in header.split("|")[1:-1]], rows),
             image("Test exact match by split and model", "scan.png")]
    images = {"scan.png": f"{runs}/scan/scan.png"}
    example = f"{runs}/scan/jump-transformer-seed0/cross_attention.png"
    if exists(example):
        images["scan_jump_cross_attention.png"] = example
        items.append(image("The Transformer's cross-attention on a jump-split test command",
                           "scan_jump_cross_attention.png"))
    cell = {(row[0], row[1]): row for row in rows}
    headline = [(f"SCAN {split} split: Transformer, against Lake & Baroni (2018)",
                 f"{cell[(split, 'transformer')][2]} against {cell[(split, 'transformer')][-1]}", "python -m demos.scan --all --seeds 0 1 2")
                for split in ("simple", "length", "jump") if (split, "transformer") in cell]
    return group(items, images, headline)


def collect_pictures(runs):
    blind = load(f"{runs}/positional_encoding/results.json")["order_blindness"]["no positions"]
    names = {"scaling.png": ("Softmax weights with and without sqrt(d_k)", f"{runs}/scaling/scaling.png"),
             "positional_encoding.png": ("Binary and sinusoidal positional encodings",
                                         f"{runs}/positional_encoding/positional_encoding.png"),
             "order_blind.png": ("Self-attention without positions is order-blind",
                                 f"{runs}/positional_encoding/order_blind.png"),
             "positional_criteria.png": ("The naive positional encodings against the lecture's criteria",
                                         f"{runs}/positional_encoding/positional_criteria.png"),
             "tour_graph.png": ("The tour's graph", f"{runs}/tour/graph.png")}
    rows = [["self-attention without positions, 'the dog bit the man' against 'the man bit the dog'",
             f"outputs equal up to permutation, to {blind:.0e}"]]
    return group([table("Pictures from the lectures", ["measured", "figure"], rows),
                  *(image(title, name) for name, (title, _) in names.items())],
                 {name: source for name, (_, source) in names.items()})


def _kernel_case(case):
    """bench_kernels' case name as the table writes it: 'square 128 float32' -> 'square 128, float32'."""
    name, dtype = case.rsplit(" ", 1)
    return f"{name.replace('64x(', '64 x (')}, {dtype}"


def collect_kernels(runs):
    results = load(f"{runs}/bench/kernels.json")
    command = "python -m demos.bench.kernels"
    matmul = [[_kernel_case(row["case"]), f"{row['numba_gflops']:.1f}", f"{row['numpy_gflops']:.1f}",
               f"{row['ratio_vs_numpy']:.2f}x", f"{row['torch_gflops']:.1f}"] for row in results["matmul"]]
    rowwise = []
    for row in results["rowwise"]:
        name, rest = row["case"].split(" ", 1)
        label = f"{name.replace('_backward', ' backward').replace('_', '-')} {rest.rsplit(' ', 1)[0].replace(' ', '')}"
        rowwise.append([label, f"{row['numba_us']:.0f}", f"{row['numpy_us']:.0f}", f"{row['ratio_vs_numpy']:.2f}x",
                        f"{row['torch_us']:.0f}", f"{row['ratio_vs_torch']:.2f}x"])
    shapes = []
    for row in results["step_shapes"]:
        if row["case"] == "all of one step":
            shapes.append([row["size"], "all matmuls of one step", "", f"{row['numba_ms']:.1f} ms",
                           f"{row['numpy_ms']:.1f} ms", f"{row['ratio_vs_numpy']:.2f}x", f"{row['torch_ms']:.1f} ms",
                           f"{row['torch_ratio_vs_numpy']:.2f}x"])
        else:
            shapes.append([row["size"], row["case"], row["count"], f"{row['numba_gflops']:.1f}",
                           f"{row['numpy_gflops']:.1f}", f"{row['ratio_vs_numpy']:.2f}x",
                           f"{row['torch_gflops']:.1f}", f"{row['torch_ratio_vs_numpy']:.2f}x"])
    compile_ = results["compile"]
    names = {"total": "total: the float32 set", "fused attention": "fused attention (apart, when a run first uses it)"}
    compiles = [[names.get(what, what), f"{seconds:.1f}"] for what, seconds in compile_["cold_s"].items()]
    compiles += [["first run: waits for two child processes compiling the float32 set", f"{compile_['first_run_s']:.1f}"],
                 ["warm cache: import plus the first call of every kernel", f"{compile_['warm_s']['total']:.1f}"]]
    return group([
        table("Matmul (one thread)", ["matmul", "ours GFLOP/s", "numpy (BLAS)", "ours / numpy", "PyTorch"], matmul, command),
        table("Every matmul of a training step, on its own operands (C row-major, T transposed view, S strided rows)",
              ["size", "operands", "calls per step", "ours GFLOP/s", "numpy GFLOP/s", "ours / numpy", "PyTorch GFLOP/s",
               "PyTorch / numpy"], shapes, command),
        table("Row-wise kernels, float32 (time: lower is better)",
              ["kernel", "ours us", "numpy us", "ours / numpy", "PyTorch us", "ours / PyTorch"], rowwise, command),
        table("Compiling the kernels from an empty cache", ["what", "seconds"], compiles, command)])


MEDIAN_OF_RATIOS = ("Each ratio is the median of the interleaved rounds' ratios (a round's ratio compares "
                    "two engines timed seconds apart), not the ratio of the two medians shown.")
STEP_SIZES = {"S": 60, "M": 30, "L": 12}      # size: steps timed (3 interleaved rounds)


def collect_steps(runs):
    rows, ratios = [], {}
    for size in STEP_SIZES:
        for threads in (1, 2):
            r = load(f"{runs}/bench/train-{size}-{threads}.json")
            ratios[size, threads] = bench_train.ratio_of_rounds(r)
            rows.append([size, threads, f"{r['matmul_gflop']:.2f}", f"{r['ours_ms']:.1f}", f"{r['pytorch_ms']:.1f}",
                         f"{ratios[size, threads]:.2f}x", f"{r['blas_limit_ms']:.1f}"])
            if "fused_ms" in r:                # the 1-thread runs time our fused attention too
                rows.append([size, f"{threads}, fused attention", "", f"{r['fused_ms']:.1f}", f"{r['pytorch_ms']:.1f}",
                             f"{bench_train.ratio_of_rounds(r, 'fused'):.2f}x", ""])
    return group([table("One training step of the encoder-decoder (reverse task) against the same model in PyTorch",
                         ["size", "threads", "matmul GFLOP", "ours ms/step", "PyTorch ms/step", "ours / PyTorch",
                          "BLAS limit ms"], rows, "python -m demos.bench.train --size S|M|L --threads 1|2",
                         "Sizes (d_model, heads, d_ff, layers per side, batch, length): S 64, 4, 128, 2, 64, 10; "
                         "M 128, 4, 512, 3, 32, 32; L 256, 8, 1024, 4, 32, 64. Ours runs the composed "
                         "attention, as the main demo does, and at one thread also the fused one; PyTorch's "
                         "nn.Transformer runs its fused scaled_dot_product_attention. The BLAS limit is the step's "
                         "matmul FLOPs at numpy's large-product rate in the same run. " + MEDIAN_OF_RATIOS)],
                 headline=[("Encoder-decoder training step, size M, one thread", f"{ratios['M', 1]:.2f}x PyTorch's time",
                            "python -m demos.bench.train --size M --threads 1")])


def collect_threads(runs):
    r = load(f"{runs}/bench/threads.json")
    rows = [[size, f"{x['one_ms']:.1f}", f"{x['many_ms']:.1f}", f"{x['ratio']:.2f}x", f"{x['threaded_calls']} of {x['calls']}"]
            for size, x in r["sizes"].items()]
    return group([table("Our training step on one thread and on two, interleaved in one process",
                         ["size", "1 thread ms", "2 threads ms", "2 / 1", "kernel calls threaded"], rows,
                         "python -m demos.bench.threads")])


def gpt_step_commands(runs):
    return [["demos.bench.train", "--model", "gpt", "--threads", "1", "--attention", "fused", "composed", "--json",
             f"{runs}/bench/gpt-1.json"],
            ["demos.bench.train", "--model", "gpt", "--threads", "2", "--json", f"{runs}/bench/gpt-2.json"]]


def collect_gpt_steps(runs):
    rows = []
    for threads in (1, 2):
        g = load(f"{runs}/bench/gpt-{threads}.json")
        rows.append([threads, f"{g['ours_median_ms']:.1f}", f"{g['pytorch_median_ms']:.1f}",
                     f"{g['ratio_vs_pytorch']:.2f}x", f"{g['ours_tokens_per_s']:,.0f}"])
    g = load(f"{runs}/bench/gpt-1.json")
    rows.append(["1, composed attention", f"{g['composed_median_ms']:.1f}", f"{g['pytorch_median_ms']:.1f}",
                 f"{g['composed_ratio_vs_pytorch']:.2f}x", f"{g['composed_tokens_per_s']:,.0f}"])
    return group([table("The GPT's training step against the same GPT in PyTorch (median of interleaved rounds)",
                         ["threads", "ours ms/step", "PyTorch ms/step", "ours / PyTorch", "ours tokens/s"], rows,
                         "python -m demos.bench.train --model gpt --threads 1|2",
                         f"With the fused attention our step took {g['ours_vs_composed']:.2f}x the composed one's time. "
                         + MEDIAN_OF_RATIOS)],
                 headline=[("GPT training step, one thread", f"{rows[0][3]} PyTorch's time",
                            "python -m demos.bench.train --model gpt --threads 1")])


def hf_llama_commands(runs):
    return [["demos.bench.train", "--model", "llama", "--kv-heads", str(kv), "--threads", "1", "--json",
             f"{runs}/bench/llama-hf-{kv}.json"] for kv in (4, 2)]


def collect_hf_llama(runs):
    rows = []
    for kv in (4, 2):
        g = load(f"{runs}/bench/llama-hf-{kv}.json")
        rows.append([kv, f"{g['ours_median_ms']:.1f}", f"{g['pytorch_median_ms']:.1f}", f"{g['ratio_vs_pytorch']:.2f}x",
                     f"{g['logits_max_abs_diff']:.1e}"])
    return group([table("The Llama-style GPT's training step (nanoGPT's CPU recipe size, 4 heads) against transformers' "
                        "LlamaForCausalLM holding the same weights, one thread (median of interleaved rounds)",
                        ["kv heads", "ours ms/step", "transformers ms/step", "ours / transformers",
                         "largest logit difference"], rows,
                        "python -m demos.bench.train --model llama --kv-heads 4|2 --threads 1", MEDIAN_OF_RATIOS)])


def generate_commands(runs):
    return [["demos.bench.generate", "--threads", t, "--json", f"{runs}/bench/generate-{t}.json"] for t in "12"]


def collect_generate(runs):
    rows, parts = [], []
    for threads in (1, 2):
        g = load(f"{runs}/bench/generate-{threads}.json")
        tps = g["median_tokens_per_second"]
        rows.append([threads, f"{tps['ours']:.1f}", f"{tps['transformers']:.1f}", f"{g['ours_over_transformers']:.2f}x",
                     "yes" if g["same_tokens"] else "NO"])
        parts.append([threads] + [f"{ms:.1f}" for ms in g["ours_ms_per_token"].values()])
    load_ = load(f"{runs}/bench/generate-1.json")["load"]
    names = list(load(f"{runs}/bench/generate-1.json")["ours_ms_per_token"])
    return group([table(f"Greedy generation with the key/value cache by a model of SmolLM2-135M's shape (random "
                        f"weights, bf16 file), 32-token prompt, 128 new tokens, ours against transformers' "
                        f"LlamaForCausalLM (median of interleaved rounds)",
                        ["threads", "ours tokens/s", "transformers tokens/s", "ours / transformers", "same tokens"],
                        rows, "python -m demos.bench.generate --threads 1|2",
                        f"Loading it (from_hf) peaked at {load_['peak_bytes'] / 2**20:.0f} MiB over what was resident "
                        f"before, {load_['peak_over_float32_weights']:.2f}x its {load_['weights_bytes'] / 2**20:.0f} MiB "
                        f"of float32 weights. " + MEDIAN_OF_RATIOS),
                  table("Where our time per generated token goes (ms)", ["threads"] + names, parts,
                        "python -m demos.bench.generate --threads 1|2",
                        "The per-token Python is the time per token of the same 30 layers at width 12.")],
                 headline=[("SmolLM2-135M-shaped greedy generation, one thread", f"{rows[0][3]} transformers' tokens/s",
                            "python -m demos.bench.generate --threads 1")])


def collect_share(runs):
    r = load(f"{runs}/bench/share.json")
    rows = [[mode, f"{r[mode]['alone_tokens_per_s']:,.0f}", f"{r[mode]['side_by_side_tokens_per_s']:,.0f}",
             f"{r[mode]['side_by_side_vs_alone']:.0%}"] for mode in ("sharing", "not sharing")]
    return group([table("Two GPT trainings (demos.gpt, 150 iterations) at once on all cores, each against one alone",
                        ["the kernels' threads", "alone, tokens/s", "side by side, each, tokens/s", "each against alone"],
                        rows, "python -m demos.bench.share",
                        "Sharing: the kernels give up a thread for each core another process keeps busy "
                        "(AUTOGRAD_SHARE_CORES=0 turns it off). A fair share is 50%.")],
                 headline=[("Two trainings side by side, each against alone", f"{rows[0][3]} (without sharing: {rows[1][3]})",
                            "python -m demos.bench.share")])


def collect_grading(runs):
    r = load(f"{runs}/bench/grading.json")
    minutes = f"{r['seconds'] / 60:.1f} min"
    rows = [[str(r["students"]), f"{r['checks']:,}", str(r["passed"]), str(r["jobs"]), r["isolation"], minutes,
             f"{r['checks'] / r['seconds']:.1f}"]]
    exercises = r["checks"] // r["students"]
    return group([table("Grading a class: every exercise of every submission, each submission solved (every check runs "
                        "to its end)", ["submissions", "checks", "passed", "jobs", "isolated in", "time", "checks/s"],
                        rows, "python -m demos.bench.grading --students 200",
                        "Each check's student code runs in a child isolated from the judge (exercises/sandbox.py), "
                        "forked from one zygote per job, which is started afresh (docs/TEACHING.md).")],
                 headline=[(f"Grading {r['students']} students, all {exercises} exercises, isolated", minutes,
                            "python -m demos.bench.grading --students 200")])


def collect_first_run(runs):
    rows = [[f"python -m {r['demo']}", str(r["cores"]), f"{r['compiled_s']:.1f}", f"{r['first_line_s']:.1f}",
             f"{r['warm_first_line_s']:.1f}"] for r in load(f"{runs}/bench/first_run.json")]
    return group([table("Seconds from the start to the first progress line, with an empty Numba cache (a fresh clone) "
                        "and with the cache it left", ["command", "cores", "kernels compiled", "first progress line",
                                                        "the same, cache warm"], rows, "python -m demos.bench.first_run",
                        "An empty cache: the kernels compile in child processes, one a core (the GPT's fused attention "
                        "with them), while the demo reads its data; the first progress line comes after 100 training "
                        "steps (the reverse demo's with an evaluation).")])


LONGER_ATTENTION = (128, 256)             # lengths bench_attention also runs at (besides 64)


def collect_attention(runs):
    results = [load(f"{runs}/bench/attention.json")] + [load(f"{runs}/bench/attention-{n}.json") for n in LONGER_ATTENTION]
    rows = [[r["shape"][2], f"{r['fused']:.1f}", f"{r['composed']:.1f}", f"{r['ratio']:.2f}x",
             f"{r['pytorch_ratio']:.2f}x" if "pytorch_ratio" in r else "-"] for r in results]
    r = results[0]
    products = [["fused op", f"{r['fused_mflop']:.0f}", f"{r['fused_blas_ms']:.2f}", f"{r['fused']:.2f}"],
                ["composed ops", f"{r['composed_mflop']:.0f}", f"{r['composed_blas_ms']:.2f}", f"{r['composed']:.2f}"]]
    return group([table("Fused attention against the composed ops, forward + backward (batch 32, 4 heads, d_head 32, "
                         "causal, one thread)", ["length", "fused ms", "composed ms", "fused / composed",
                                                 "PyTorch's fused / composed"], rows,
                         "python -m demos.bench.attention --length N"),
                  table(f"Their products at numpy's large-matrix rate ({r['blas_gflops']:.0f} GFLOP/s in the same run), "
                        "length 64", ["path", "MFLOP", "products at BLAS rate ms", "measured ms"], products,
                        "python -m demos.bench.attention")])



TUNING_STEPS = {"S": 60, "M": 30, "L": 24, "gpt": 45}     # steps timed per benchmark (the group runs in minutes)
TUNING_GENERATION = ["--new", "32", "--rounds", "3"]      # demos.bench.generate's, at SmolLM2-135M's shape


def tunings():
    """The builds the tunings group measures: "host" (the kernels compiled for this CPU),
    then, through --cpu (demos/bench/cpu.py), the other vendor's AVX-512 tuning
    (sapphirerapids on an AMD CPU, znver4 on an Intel one) where the host has AVX-512, and
    haswell (AVX2) where it has AVX2."""
    from demos.bench.cpu import host_features
    features = host_features()
    other = "sapphirerapids" if cpu_name().startswith("znver") else "znver4"
    return ["host"] + [other] * ("avx512f" in features) + ["haswell"] * ("avx2" in features)


def cpu_name():
    """LLVM's name of this CPU (its tuning): "znver4", "sapphirerapids", ..."""
    import llvmlite.binding
    return llvmlite.binding.get_host_cpu_name()


def instruction_set(features):
    """The widest vector instruction set among LLVM feature names: "AVX-512", "AVX2" or "SSE"."""
    return "AVX-512" if "avx512f" in features else "AVX2" if "avx2" in features else "SSE"


def tuning_commands(runs):
    """demos.bench.kernels (quick), demos.bench.train (S, M, L, GPT) and demos.bench.generate
    (SmolLM2-135M's shape, one model folder built once for all) for each tuning, one
    thread timed in its CPU time (--clock cpu): few steps on a shared machine need it."""
    commands = []
    for tuning in tunings():
        flag, out = ([] if tuning == "host" else ["--cpu", tuning]), f"{runs}/bench/tunings/{tuning}"
        flag += ["--clock", "cpu"]
        commands.append(["demos.bench.kernels", "--quick", "--sizes", *flag, "--json", f"{out}/kernels.json"])
        commands += [["demos.bench.train", "--size", size, "--steps", str(TUNING_STEPS[size]), *flag,
                      "--json", f"{out}/train-{size}.json"] for size in "SML"]
        commands.append(["demos.bench.train", "--model", "gpt", "--steps", str(TUNING_STEPS["gpt"]), *flag,
                         "--json", f"{out}/gpt.json"])
        commands.append(["demos.bench.generate", *TUNING_GENERATION, *flag, "--dir", f"{runs}/bench/smollm2-shaped",
                         "--json", f"{out}/generate.json"])
    return commands


def tuning_rows(runs, tuning):
    """One tuning's rows: the steps against PyTorch (ms), greedy generation against
    transformers (tokens/s), the matmuls against numpy (GFLOP/s) and the row-wise kernels
    against PyTorch (us); then the steps' machine record and the kernels' and generation's."""
    out = f"{runs}/bench/tunings/{tuning}"
    g = load(f"{out}/gpt.json")
    rows = [["GPT step, nanoGPT's CPU recipe size", "ms", f"{g['ours_median_ms']:.1f}", "PyTorch",
             f"{g['pytorch_median_ms']:.1f}", f"{g['ratio_vs_pytorch']:.2f}x"]]
    for size in "SML":
        r = load(f"{out}/train-{size}.json")
        rows.append([f"encoder-decoder step, size {size}", "ms", f"{r['ours_ms']:.1f}", "PyTorch",
                     f"{r['pytorch_ms']:.1f}", f"{bench_train.ratio_of_rounds(r):.2f}x"])
    generation = load(f"{out}/generate.json")
    tps = generation["median_tokens_per_second"]
    rows.append(["greedy generation, SmolLM2-135M's shape", "tokens/s", f"{tps['ours']:.1f}", "transformers",
                 f"{tps['transformers']:.1f}", f"{generation['ours_over_transformers']:.2f}x"])
    k = load(f"{out}/kernels.json")
    rows += [[f"matmul {_kernel_case(m['case'])}", "GFLOP/s", f"{m['numba_gflops']:.1f}", "numpy",
              f"{m['numpy_gflops']:.1f}", f"{m['ratio_vs_numpy']:.2f}x"] for m in k["matmul"] if "float32" in m["case"]]
    rows += [[f"{w['case'].rsplit(' ', 1)[0].replace(' ', '')}, float32", "us", f"{w['numba_us']:.0f}", "PyTorch",
              f"{w['torch_us']:.0f}", f"{w['ratio_vs_torch']:.2f}x"] for w in k["rowwise"]]
    return rows, g["machine"], k["machine"], generation


def kernel_widths(machine):
    """'; the kernels' widest packed registers: zmm (512 bits) gemm, gelu; ymm (256 bits)
    softmax' from a kernels record (demos/bench/widths.py); '' for a record without them."""
    by_width = {}
    for kernel, width in machine.get("kernel_widths", {}).items():
        by_width.setdefault(width, []).append(kernel)
    if not by_width:
        return ""
    bits = {"zmm": 512, "ymm": 256, "xmm": 128, None: "no packed"}
    return ("; the widest register among each kernel's packed float instructions, counted in its machine code "
            "(demos/bench/widths.py; a kernel can mix widths): ") + "; ".join(
        f"{width} ({bits[width]} bits) {', '.join(kernels)}" for width, kernels in by_width.items())


def collect_tunings(runs):
    """A summary of the steps against PyTorch and the generation against transformers for
    each tuning, then one table per tuning naming the CPU, its features and what the kernels
    were compiled for."""
    summary, tables = [], []
    for tuning in tunings():
        rows, machine, kernels_machine, generation = tuning_rows(runs, tuning)
        compiled = f"{machine['compiled_for']}" + (" (this CPU's own)" if tuning == "host" else f" (--cpu {tuning})")
        summary.append([compiled, instruction_set(machine["compiled_vector_features"]), *(r[-1] for r in rows[:5])])
        note = (f"CPU: {machine['cpu_model']} (LLVM: {machine['host_cpu']}), vector features "
                f"{' '.join(machine['host_vector_features'])}. Kernels compiled for {machine['compiled_for']} with "
                f"{' '.join(machine['compiled_vector_features'])}; GEMM tile {machine['gemm_tile_float32']} (float32), "
                f"L2 {machine['l2_bytes'] // 1024} KiB; vector multiply-adds in the GEMM drivers by register width: "
                f"{kernels_machine['gemm_multiply_adds']}{kernel_widths(kernels_machine)}. Baselines: numpy's "
                f"OpenBLAS {machine['openblas_kernel']} "
                f"kernels, PyTorch's CPU capability {machine['aten_cpu_capability']} (its MKL's instructions "
                f"{machine.get('mkl_instructions', '(host)')}, its oneDNN's {machine.get('onednn_isa', '(host)')}). "
                "Generation compiled for "
                f"{generation['machine']['compiled_for']}; the same greedy tokens as transformers': "
                f"{'yes' if generation['same_tokens'] else 'NO'}.")
        flag = ("" if tuning == "host" else f" --cpu {tuning}") + " --clock cpu"
        tables.append(table(f"Compiled for {compiled} (CPU time)", ["what", "unit", "ours", "against", "theirs",
                                                                    "ours / theirs"],
                            rows, f"python -m demos.bench.train --size S (M, L) or --model gpt{flag}; "
                                  f"python -m demos.bench.generate {' '.join(TUNING_GENERATION)}{flag}; "
                                  f"python -m demos.bench.kernels --quick --sizes{flag}", note + " " + MEDIAN_OF_RATIOS))
    new, rounds = TUNING_GENERATION[1], TUNING_GENERATION[3]
    return group([table("Training steps against PyTorch (ours / PyTorch's time) and greedy generation against "
                        "transformers (ours / transformers' tokens per second), by the tuning the kernels were "
                        "compiled for (medians of interleaved rounds)",
                        ["compiled for", "instructions", "GPT", "S", "M", "L", "generation (tokens/s)"],
                        summary, "python -m demos.figures --only tunings",
                        f"Few steps each (--steps: GPT {TUNING_STEPS['gpt']}, that is 9 rounds of "
                        f"{TUNING_STEPS['gpt'] // 3}; S {TUNING_STEPS['S']}, M {TUNING_STEPS['M']} and "
                        f"L {TUNING_STEPS['L']} in 3 rounds) and short generations (SmolLM2-135M's shape, random "
                        f"weights, {new} new tokens after a 32-token prompt, {rounds} rounds: "
                        f"{' '.join(TUNING_GENERATION)}; higher is better there, as it is tokens per second) "
                        "so that the group runs in minutes, one thread, each timed in its "
                        "CPU time (--clock cpu: the time the process waited for a core left out), so these "
                        "figures are not the other sections' wall times and are noisier than them. "
                        "The baselines run on the host's own kernels, except under an AVX2 tuning, where numpy's "
                        "OpenBLAS and PyTorch are held to AVX2 too. --cpu NAME compiles our kernels with LLVM's "
                        "tuning for NAME (its preferred vector width, its scheduling); an AVX-512 target keeps this "
                        "CPU's own instructions, so its row is the other vendor's code generation run on this "
                        "CPU's cores, not the other vendor's CPU (demos/bench/cpu.py)."), *tables])

def collect_reading(runs):
    measures = load(f"{runs}/reading/measures.json")
    rows = [[f"[{name}](reading/{name}.md)", m["functions"], m["one_liners"], m["code_lines"], m["folded_lines"],
             m["shapes"], f"{pct(m['coverage'])} of {m['lines_run']}"] for name, m in measures.items()]
    return group([table("The reading edition", ["page", "functions", "of them one-line (listed at the end)",
                                                "code lines", "folded (not run)", "lines with a shape",
                                                "of the distinct lines the step ran"], rows,
                        note="Pages written to docs/reading/ from a traced step (demos/reading/).")])


GROUPS = {
    "train": (train_commands, collect_train),
    "bottleneck": (lambda runs: [["demos.bottleneck", "--out", f"{runs}/bottleneck"]], collect_bottleneck),
    "length_generalisation": (lambda runs: [["demos.length_generalisation", "--seeds", "0", "1", "2",
                                             "--out", f"{runs}/length_generalisation"]], collect_length_generalisation),
    "families": (lambda runs: [["demos.encoder_only", "--out", f"{runs}/encoder_only"],
                               ["demos.decoder_only", "--out", f"{runs}/decoder_only"],
                               ["demos.vit", "--out", f"{runs}/vit"]], collect_families),
    "gpt": (lambda runs: [["demos.gpt", "--out", f"{runs}/gpt"]], collect_gpt),
    "tokenizer": (lambda runs: [["demos.bench.bpe", "--json", f"{runs}/bench/bpe.json"],
                                ["demos.gpt", "--tokenizer", "bpe", "--out", f"{runs}/gpt-bpe"]], collect_tokenizer),
    "gpt_recipe": (lambda runs: [["demos.bench.train", "--model", "gpt", "--recipe", "--json",
                                  f"{runs}/bench/gpt-recipe.json"]], collect_gpt_recipe),
    "gpt_steps": (gpt_step_commands, collect_gpt_steps),
    "llama": (llama_commands, collect_llama),
    "scan": (scan_commands, collect_scan),
    "pictures": (lambda runs: [["demos.scaling", "--out", f"{runs}/scaling"],
                               ["demos.positional_encoding", "--out", f"{runs}/positional_encoding"],
                               ["demos.tour", "--out", f"{runs}/tour"]], collect_pictures),
    "steps": (lambda runs: [["demos.bench.train", "--size", size, "--steps", str(steps), "--threads", t,
                             *(["--attention", "composed", "fused"] if t == "1" else []),
                             "--json", f"{runs}/bench/train-{size}-{t}.json"] for size, steps in STEP_SIZES.items()
                            for t in "12"], collect_steps),
    "share": (lambda runs: [["demos.bench.share", "--json", f"{runs}/bench/share.json"]], collect_share),
    "hf_llama": (hf_llama_commands, collect_hf_llama),
    "generate": (generate_commands, collect_generate),
    "grading": (lambda runs: [["demos.bench.grading", "--students", "200", "--json", f"{runs}/bench/grading.json"]],
                collect_grading),
    "first_run": (lambda runs: [["demos.bench.first_run", "--json", f"{runs}/bench/first_run.json"]], collect_first_run),
    "threads": (lambda runs: [["demos.bench.threads", "--json", f"{runs}/bench/threads.json"]], collect_threads),
    "kernels": (lambda runs: [["demos.bench.kernels", "--json", f"{runs}/bench/kernels.json"]], collect_kernels),
    "attention": (lambda runs: [["demos.bench.attention", "--json", f"{runs}/bench/attention.json"]]
                  + [["demos.bench.attention", "--length", str(length), "--json", f"{runs}/bench/attention-{length}.json"]
                     for length in LONGER_ATTENTION], collect_attention),
    "tunings": (tuning_commands, collect_tunings),
    "reading": (lambda runs: [["demos.reading", "--out", "docs/reading", "--json", f"{runs}/reading/measures.json"]],
                collect_reading),
}

TITLES = {"train": "The main demo: reverse and copy", "bottleneck": "The RNN bottleneck",
          "length_generalisation": "Length generalisation and positional schemes", "families": "The model families",
          "gpt": "A GPT on real text", "tokenizer": "BPE: a tokenizer learned here", "gpt_recipe": "The GPT learns as PyTorch's does",
          "gpt_steps": "GPT training speed against PyTorch",
          "llama": "From GPT-2 to Llama on the same engine", "scan": "SCAN against the paper",
          "pictures": "Pictures", "steps": "Training step against PyTorch", "threads": "One thread and two",
          "share": "Two trainings on one machine", "first_run": "A first run", "grading": "Grading a class",
          "hf_llama": "Llama's training step against transformers", "generate": "Generating with a small open model's shape",
          "kernels": "Kernels", "attention": "Fused attention",
          "tunings": "One table per CPU tuning", "reading": "The reading edition"}
ORDER = ["train", "bottleneck", "length_generalisation", "families", "gpt", "llama", "gpt_recipe", "gpt_steps", "hf_llama", "generate",
         "steps", "share", "first_run", "grading", "tokenizer", "scan", "pictures", "threads", "kernels", "attention",
         "tunings", "reading"]     # the results document's sections


# ----- recording and rendering -----

def remember(runs, file, key, value):
    """Set key to value in the JSON dictionary runs/file: the seconds each command took from
    the shell (wall_seconds.json), the machine and date each group ran on (machine.json)."""
    path = os.path.join(ROOT, runs, file)
    entries = json.load(open(path)) if os.path.exists(path) else {}
    entries[key] = value
    with open(path, "w") as f:
        json.dump(entries, f, indent=1, sort_keys=True)


def ran_on(runs, name):
    """(machine, date) of the group's last run; this machine and today when it was not recorded."""
    path = os.path.join(ROOT, runs, "machine.json")
    stamp = json.load(open(path)).get(name) if os.path.exists(path) else None
    return stamp or (_report.machine(), _report.today())


def copy_images(name_group, images):
    """Copy each image into docs/images/; returns the problems (an image a demo did not write)."""
    problems = []
    for name, source in images.items():
        if not exists(source):
            problems.append(f"{name_group}: image {source} was not written")
        else:
            shutil.copyfile(os.path.join(ROOT, source), os.path.join(ROOT, "docs", "images", name))
    return problems


def write_documents(record):
    """docs/RESULTS.md and the README's generated blocks, from the record alone."""
    with open(RESULTS, "w") as f:
        f.write(_report.render(record, ORDER, TITLES))
    with open(README) as f:
        readme = f.read()
    for name, body in _report.readme_blocks(record, ORDER).items():
        readme = _report.splice(readme, name, body)
    with open(README, "w") as f:
        f.write(readme)


def main(argv=None):
    parser = command_line("demos.figures", __doc__)
    parser.add_argument("--only", nargs="+", choices=sorted(GROUPS), help="these groups only")
    parser.add_argument("--collect", action="store_true", help="do not run the demos; read their existing outputs")
    parser.add_argument("--runs", default="runs", help="where the demos write (relative to the repository)")
    parser.add_argument("--render", action="store_true",
                        help="run and read nothing: rewrite RESULTS.md and the README's blocks from docs/figures.json")
    args = parser.parse_args(argv)
    record = json.load(open(FIGURES)) if os.path.exists(FIGURES) else {"groups": {}}
    if args.render:
        write_documents(record)
        print(f"{os.path.relpath(RESULTS, ROOT)} and README.md's generated blocks rendered from "
              f"{os.path.relpath(FIGURES, ROOT)}")
        return
    problems = []
    for name in args.only or ORDER:
        commands, collect = GROUPS[name]
        if not args.collect:
            for command in commands(args.runs):
                print("$ python -m " + " ".join(command), flush=True)
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", *command], cwd=ROOT, check=True)
                remember(args.runs, "wall_seconds.json", " ".join(command), time.perf_counter() - started)
            remember(args.runs, "machine.json", name, (_report.machine(), _report.today()))
        machine, date = ran_on(args.runs, name)
        collected = collect(args.runs)
        problems += copy_images(name, collected.pop("images"))
        record["groups"][name] = {"commands": [" ".join(["python -m", *c]) for c in commands("runs")],
                                  "machine": machine, "collected": date, **collected}
    with open(FIGURES, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
    write_documents(record)
    for problem in problems:
        print(problem)
    if problems:
        raise SystemExit(f"{len(problems)} image(s) missing (see above)")
    print(f"{os.path.relpath(RESULTS, ROOT)}, README.md's generated blocks and {os.path.relpath(FIGURES, ROOT)} "
          "are in step with the demos' outputs")


if __name__ == "__main__":
    main()
