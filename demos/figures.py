"""Regenerate the README's figures from the demos, and keep the README in step with them.

    python -m demos.figures                      # run every demo behind the README (about 2 h on 2 cores)
    python -m demos.figures --only scan vit      # some groups
    python -m demos.figures --collect            # no training: re-read the demos' outputs under runs/

Each group runs its demos (seeded) into runs/, then reads what they wrote (metrics.json,
results.json, images) and turns it into *claims*: the exact README lines that state those
numbers.  The claims and the images' sources are recorded in docs/figures.json; a claim
whose numbers changed replaces its old text in README.md, and each image is copied to
docs/images/.  tests/test_readme_figures.py fails when a recorded claim is missing from the
README (a number edited by hand, or a re-run whose README update was not committed) or an
image the README shows is missing.
"""

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

from demos.bench import train as bench_train

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURES = os.path.join(ROOT, "docs", "figures.json")
README = os.path.join(ROOT, "README.md")


def pct(x):
    """0.994 -> '99.4%', 1.0 -> '100%' (the README's style)."""
    return "100%" if x >= 0.9995 else f"{x:.1%}"


def load(path):
    with open(os.path.join(ROOT, path)) as f:
        return json.load(f)


def exists(path):
    return os.path.exists(os.path.join(ROOT, path))


# ----- the groups: the commands that produce the figures, and how to read them -----

def collect_train(runs):
    claims = {}
    for task, seeds in (("reverse", range(5)), ("copy", range(3))):
        for seed in seeds:
            m = load(f"{runs}/{task}-{seed}/metrics.json")
            b = m["beam_vs_greedy"]
            claims[f"{task}-{seed}"] = (f"| {task} | {seed} | {m['steps']} | {m['seconds']:.1f} | {pct(m['exact_match'])} | "
                                        f"{pct(b['greedy_exact_match'])} / {pct(b['beam_exact_match'])} |")
    ls, do = load(f"{runs}/reverse-ls/metrics.json"), load(f"{runs}/reverse-do/metrics.json")
    claims["options"] = (f"`--label-smoothing 0.1` reached {pct(ls['exact_match'])} in {ls['steps']} steps "
                         f"({ls['seconds']:.1f} s), and `--dropout 0.1` reached\n{pct(do['exact_match'])} in "
                         f"{do['steps']} steps ({do['seconds']:.1f} s)")
    for task in ("reverse", "copy"):
        m = load(f"{runs}/avg-{task}/metrics.json")
        a = m["averaged"]
        claims[f"average-{task}"] = (f"| {task} | {m['steps']} | {a['steps'][0]}-{a['steps'][-1]} | "
                                     f"{pct(a['final_exact_match'])} | {pct(a['averaged_exact_match'])} |")
    main = load(f"{runs}/reverse/metrics.json")          # the main demo's log excerpt in the README
    for which, entry in (("first", main["history"]["evals"][0]), ("last", main["history"]["evals"][-1])):
        losses = main["history"]["loss"][entry["step"] - 100:entry["step"]]
        claims[f"log {which} step"] = f"step {entry['step']:5d}  loss {np.mean(losses):.4f}  lr {entry['lr']:.2e}  "
        claims[f"log {which} accuracy"] = (f"exact {entry['exact_match']:.1%}  tokens {entry['token_accuracy']:.1%}  "
                                           f"{entry['seconds']:5.1f}s")
    claims["log result"] = (f"reached 99% exact match: {main['exact_match']:.1%} after {main['steps']} steps, "
                            f"{main['seconds']:.1f} s")
    for i, line in enumerate(main["sample_decodes"]):
        claims[f"log sample {i}"] = line
    b = main["beam_vs_greedy"]
    claims["log beam"] = (f"on {b['examples']} other held-out sequences: greedy exact match {b['greedy_exact_match']:.1%}, "
                          f"beam search (beam {b['beam_size']}) {b['beam_exact_match']:.1%}")
    images = {"reverse_cross_attention.png": f"{runs}/reverse/attention_decoder_cross_attn.png",
              "reverse_loss.png": f"{runs}/reverse/loss.png"}
    return claims, images


def train_commands(runs):
    commands = [["demos.train", "--task", "reverse", "--out", f"{runs}/reverse"]]
    commands += [["demos.train", "--task", "reverse", "--seed", str(s), "--out", f"{runs}/reverse-{s}"] for s in range(5)]
    commands += [["demos.train", "--task", "copy", "--seed", str(s), "--out", f"{runs}/copy-{s}"] for s in range(3)]
    commands += [["demos.train", "--task", "reverse", "--label-smoothing", "0.1", "--out", f"{runs}/reverse-ls"],
                 ["demos.train", "--task", "reverse", "--dropout", "0.1", "--out", f"{runs}/reverse-do"]]
    commands += [["demos.train", "--task", t, "--save-every", "100", "--average-last", "5", "--out", f"{runs}/avg-{t}"]
                 for t in ("reverse", "copy")]
    return commands


def collect_bottleneck(runs):
    results = load(f"{runs}/bottleneck/results.json")["results"]
    names = {"RNN": "RNN (decoder sees only the encoder's last state)", "RNN + attention": "RNN + additive attention",
             "Transformer": "Transformer"}
    claims = {name: f"| {label} | " + " | ".join(pct(results[name][n]["exact_match"]) for n in sorted(results[name], key=int))
              + " |" for name, label in names.items()}
    return claims, {"bottleneck.png": f"{runs}/bottleneck/bottleneck.png",
                    "rnn_attention.png": f"{runs}/bottleneck/rnn_attention.png"}


def collect_length_generalisation(runs):
    results = load(f"{runs}/length_generalisation/results.json")
    claims = {}
    for scheme, by_seed in results.items():
        seeds = sorted(by_seed, key=int)
        mean = {n: np.mean([by_seed[s][n]["exact_match"] for s in seeds]) for n in by_seed[seeds[0]]}
        claims[scheme] = (f"| {scheme} | " + " | ".join(pct(mean[str(n)]) for n in (10, 11, 12, 15, 20)) + " | "
                          + ", ".join(pct(by_seed[s]["11"]["exact_match"]) for s in seeds) + " |")
    return claims, {"length_generalisation.png": f"{runs}/length_generalisation/length_generalisation.png"}


def collect_families(runs):
    enc, dec, vit = (load(f"{runs}/{name}/results.json") for name in ("encoder_only", "decoder_only", "vit"))
    mlm = enc["mlm_accuracy"]
    claims = {
        "encoder_only": (f"masked-token accuracy after pre-training was {100 * min(mlm):.0f}-{max(mlm):.0%}.\n"
                         f"On three seeds, with 256 labelled examples, the classifier scored "
                         f"{np.mean(enc['scratch']):.1%} from scratch and {np.mean(enc['pretrained']):.1%}"),
        "decoder_only": (f"{pct(dec['heldout_exact_match'])} exact match on all 145 held-out sort\nsequences. The key/value "
                         f"cache made generation {dec['generation']['sort (6 tokens)']['speedup']:.1f}x faster for the "
                         f"6-token answers and {dec['generation']['128 tokens']['speedup']:.1f}x\nfaster for 128 tokens"),
        "vit": f"ViT: {pct(vit['heldout_accuracy'])} held-out accuracy after {vit['steps']} steps",
    }
    return claims, {"vit.png": f"{runs}/vit/vit.png"}


def collect_gpt(runs):
    m = load(f"{runs}/gpt/metrics.json")
    wall = load(f"{runs}/wall_seconds.json")[f"demos.gpt --out {runs}/gpt"]
    with open(os.path.join(ROOT, runs, "gpt", "sample.txt")) as f:
        first_line = f.readline().rstrip("\n")
    claims = {"result": (f"validation loss of **{m['val_loss']:.3f} nats per character**\n(train {m['train_loss']:.3f}) "
                         f"after {m['iterations']} iterations: {m['seconds']:.0f} s of training, "
                         f"{int(wall // 60)} min {wall % 60:.0f} s of wall time from the"),
              "sample": f"```\n{first_line}\n"}
    return claims, {"gpt_loss.png": f"{runs}/gpt/loss.png"}


def collect_gpt_recipe(runs):
    runs_ = load(f"{runs}/bench/gpt-recipe.json")["recipe"]
    ours, torch = runs_["ours"], runs_["pytorch"]
    gap = max(abs(a["val"] - b["val"]) for a, b in zip(ours["evals"], torch["evals"]))
    return {"losses": (f"After {ours['evals'][-1]['step']} iterations the validation losses were {ours['val_loss']:.8f} "
                       f"(ours) and {torch['val_loss']:.8f}\n(PyTorch): {abs(runs_['val_loss_difference']):.0e} nats apart, "
                       f"float32 rounding. At every evaluation the two agreed to {gap:.0e}.")}, {}


def collect_scan(runs):
    with open(os.path.join(ROOT, runs, "scan", "results.md")) as f:
        rows = [line.rstrip("\n") for line in f if line.startswith("| ") and not line.startswith("| split")]
    claims = {" ".join(cell.strip() for cell in row.split("|")[1:3]): row for row in rows}   # "split model": row
    images = {"scan.png": f"{runs}/scan/scan.png"}
    example = f"{runs}/scan/jump-transformer-seed0/cross_attention.png"
    if exists(example):
        images["scan_jump_cross_attention.png"] = example
    return claims, images


def collect_pictures(runs):
    blind = load(f"{runs}/positional_encoding/results.json")["order_blindness"]["no positions"]
    claims = {"order_blind": f'"the man bit the dog": the outputs are only permuted, to {blind:.0e})'}
    return claims, {"scaling.png": f"{runs}/scaling/scaling.png",
                "positional_encoding.png": f"{runs}/positional_encoding/positional_encoding.png",
                "order_blind.png": f"{runs}/positional_encoding/order_blind.png",
                "positional_criteria.png": f"{runs}/positional_encoding/positional_criteria.png",
                "tour_graph.png": f"{runs}/tour/graph.png"}


def _kernel_case(case):
    """bench_kernels' case name as the README writes it: 'square 128 float32' -> 'square 128, float32'."""
    name, dtype = case.rsplit(" ", 1)
    return f"{name.replace('64x(', '64 x (')}, {dtype}"


README_MATMUL_CASES = [f"square {n} float32" for n in (128, 256, 512, 1024)] + [
    "linear (640x64)@(64x256) float32", "linear (640x64)@(64x64) float32", "attention 64x(32x16)@(16x32) float32",
    "attention 64x(32x32)@(32x16) float32", "square 256 float64", "linear (640x64)@(64x256) float64"]


def collect_kernels(runs):
    results = load(f"{runs}/bench/kernels.json")
    claims = {}
    by_case = {row["case"]: row for row in results["matmul"]}
    for case in README_MATMUL_CASES:
        row = by_case[case]
        claims[f"matmul {case}"] = (f"| {_kernel_case(case)} | {row['numba_gflops']:.1f} | {row['numpy_gflops']:.1f} | "
                                    f"{row['ratio_vs_numpy']:.2f}x | {row['torch_gflops']:.1f} |")
    for row in results["rowwise"]:
        name, rest = row["case"].split(" ", 1)
        shape = rest.rsplit(" ", 1)[0].replace(" ", "")
        label = f"{name.replace('_backward', ' backward').replace('_', '-')} {shape}"
        claims[f"rowwise {label}"] = (f"| {label} | {row['numba_us']:.0f} | {row['numpy_us']:.0f} | "
                                      f"{row['ratio_vs_numpy']:.2f}x | {row['torch_us']:.0f} | {row['ratio_vs_torch']:.2f}x |")
    shown = {}                  # the README shows each size's 6 heaviest shapes and its slowest one
    slowest = {}
    for row in results["step_shapes"]:
        if row["case"] == "all of one step":
            continue
        if row["size"] not in slowest or row["ratio_vs_numpy"] < slowest[row["size"]]["ratio_vs_numpy"]:
            slowest[row["size"]] = row
    for row in results["step_shapes"]:
        shown[row["size"]] = shown.get(row["size"], 0) + 1
        if row["case"] == "all of one step":
            claims[f"step shapes {row['size']} total"] = (f"| {row['size']} | all matmuls of one step | | "
                                                          f"{row['numba_ms']:.1f} ms | {row['numpy_ms']:.1f} ms | "
                                                          f"{row['ratio_vs_numpy']:.2f}x | {row['torch_ms']:.1f} ms | "
                                                          f"{row['torch_ratio_vs_numpy']:.2f}x |")
        elif shown[row["size"]] <= 6 or row is slowest[row["size"]]:
            claims[f"step shapes {row['size']} {row['case']}"] = (
                f"| {row['size']} | {row['case']} | {row['count']} | {row['numba_gflops']:.1f} | "
                f"{row['numpy_gflops']:.1f} | {row['ratio_vs_numpy']:.2f}x | {row['torch_gflops']:.1f} | "
                f"{row['torch_ratio_vs_numpy']:.2f}x |")
    cold, warm = results["compile"]["cold_s"], results["compile"]["warm_s"]
    drivers = cold["matmul, small-matrix driver"] + cold["matmul, Goto driver"]
    claims["compile"] = (f"Compiling every float32 kernel with an empty cache takes {cold['total']:.1f} s in one process "
                         f"({drivers:.1f} s\nof it the matmul's two drivers); a first run, which compiles them in two "
                         f"child processes\nside by side, waits {results['compile']['first_run_s']:.1f} s for them. "
                         f"The fused attention's two kernels take\n{cold['fused attention']:.1f} s more, when a run "
                         f"first uses them. With the cache warm, import plus the first call\nof every kernel takes "
                         f"{warm['total']:.1f} s.")
    return claims, {}


STEP_SIZES = {"S": 60, "M": 30, "L": 12}      # size: steps timed (3 interleaved rounds)


def collect_steps(runs):
    claims = {}
    for size in STEP_SIZES:
        for threads in (1, 2):
            r = load(f"{runs}/bench/train-{size}-{threads}.json")
            claims[f"transformer {size} {threads}"] = (
                f"| {size} | {threads} | {r['matmul_gflop']:.2f} | {r['ours_ms']:.1f} | {r['pytorch_ms']:.1f} | "
                f"{bench_train.ratio_of_rounds(r):.2f}x | {r['blas_limit_ms']:.1f} |")
    return claims, {}


def collect_threads(runs):
    r = load(f"{runs}/bench/threads.json")
    return {f"threads {size}": (f"| {size} | {x['one_ms']:.1f} | {x['many_ms']:.1f} | {x['ratio']:.2f}x | "
                                f"{x['threaded_calls']} of {x['calls']} |") for size, x in r["sizes"].items()}, {}


def gpt_step_commands(runs):
    return [["demos.bench.train", "--model", "gpt", "--threads", "1", "--attention", "fused", "composed", "--json",
             f"{runs}/bench/gpt-1.json"],
            ["demos.bench.train", "--model", "gpt", "--threads", "2", "--json", f"{runs}/bench/gpt-2.json"]]


def collect_gpt_steps(runs):
    claims = {}
    for threads in (1, 2):
        g = load(f"{runs}/bench/gpt-{threads}.json")
        claims[f"gpt {threads}"] = (f"| {threads} | {g['ours_median_ms']:.1f} | {g['pytorch_median_ms']:.1f} | "
                                    f"{g['ratio_vs_pytorch']:.2f}x | {g['ours_tokens_per_s']:,.0f} |")
    g = load(f"{runs}/bench/gpt-1.json")
    claims["gpt 1 composed"] = (f"| 1, composed attention | {g['composed_median_ms']:.1f} | {g['pytorch_median_ms']:.1f} | "
                                f"{g['composed_ratio_vs_pytorch']:.2f}x | {g['composed_tokens_per_s']:,.0f} |")
    claims["fused vs composed"] = (f"the fused attention made our step {g['ours_vs_composed']:.2f}x as long as the "
                                   f"composed one")
    return claims, {}


LONGER_ATTENTION = (128, 256)             # lengths bench_attention also runs at (besides 64)


def collect_attention(runs):
    longer = [load(f"{runs}/bench/attention-{length}.json") for length in LONGER_ATTENTION]
    lengths = " and ".join(f"{r['ratio']:.2f}x at length {r['shape'][2]}" for r in longer)
    theirs = " and ".join(f"{r['pytorch_ratio']:.2f}x" for r in longer)
    r = load(f"{runs}/bench/attention.json")
    pytorch = {} if "pytorch_ratio" not in r else {
        "pytorch fused vs composed": (f"PyTorch's own fused op took {r['pytorch_ratio']:.2f}x its composed ops' time "
                                      f"({r['pytorch_fused']:.1f} ms against {r['pytorch_composed']:.1f} ms), and "
                                      f"ours {r['fused_vs_pytorch_fused']:.2f}x its fused op's")}
    composed_rounds, half, products = r["rounds"]["composed"], r["composed"] / 2, r["fused_blas_ms"]
    return {**pytorch,
            "longer attention": (f"the fused op took {lengths} of the composed path's time (PyTorch's: {theirs})"),
            "fused vs composed": (f"measured the fused op at {r['ratio']:.2f}x the composed path's time "
                                  f"({r['fused']:.1f} ms against {r['composed']:.1f} ms), the median of "
                                  f"{len(composed_rounds)} interleaved rounds' ratios (the composed rounds took "
                                  f"{min(composed_rounds):.1f}-{max(composed_rounds):.1f} ms"),
            "attention rest": (f"here the rest took {r['fused'] - products:.1f} ms ({r['fused']:.2f} - "
                               f"{products:.2f}) against the {half - products:.1f} ms ({half:.2f} - {products:.2f}) "
                               f"that would leave"),
            "attention products": (f"at numpy's large-matrix rate in the same run ({r['blas_gflops']:.0f} GFLOP/s), "
                                   f"the fused op's products alone would take {r['fused_blas_ms']:.2f} ms "
                                   f"({r['fused_mflop']:.0f} MFLOP), the composed path's {r['composed_blas_ms']:.2f} ms "
                                   f"({r['composed_mflop']:.0f} MFLOP), and half the composed path's time is "
                                   f"{r['composed'] / 2:.2f} ms")}, {}


GROUPS = {
    "train": (train_commands, collect_train),
    "bottleneck": (lambda runs: [["demos.bottleneck", "--out", f"{runs}/bottleneck"]], collect_bottleneck),
    "length_generalisation": (lambda runs: [["demos.length_generalisation", "--seeds", "0", "1", "2",
                                             "--out", f"{runs}/length_generalisation"]], collect_length_generalisation),
    "families": (lambda runs: [["demos.encoder_only", "--out", f"{runs}/encoder_only"],
                               ["demos.decoder_only", "--out", f"{runs}/decoder_only"],
                               ["demos.vit", "--out", f"{runs}/vit"]], collect_families),
    "gpt": (lambda runs: [["demos.gpt", "--out", f"{runs}/gpt"]], collect_gpt),
    "gpt_recipe": (lambda runs: [["demos.bench.train", "--model", "gpt", "--recipe", "--json",
                                  f"{runs}/bench/gpt-recipe.json"]], collect_gpt_recipe),
    "scan": (lambda runs: [["demos.scan", "--all", "--seeds", "0", "1", "2", "--out", f"{runs}/scan"]]
             + [["demos.scan", "--split", "length", "--positional", kind, "--out", f"{runs}/scan"]
                for kind in ("rope", "alibi", "relative")], collect_scan),
    "kernels": (lambda runs: [["demos.bench.kernels", "--json", f"{runs}/bench/kernels.json"]], collect_kernels),
    "steps": (lambda runs: [["demos.bench.train", "--size", size, "--steps", str(steps), "--threads", t,
                             "--json", f"{runs}/bench/train-{size}-{t}.json"] for size, steps in STEP_SIZES.items()
                            for t in "12"], collect_steps),
    "gpt_steps": (gpt_step_commands, collect_gpt_steps),
    "threads": (lambda runs: [["demos.bench.threads", "--json", f"{runs}/bench/threads.json"]], collect_threads),
    "attention": (lambda runs: [["demos.bench.attention", "--json", f"{runs}/bench/attention.json"]]
                  + [["demos.bench.attention", "--length", str(length), "--json", f"{runs}/bench/attention-{length}.json"]
                     for length in LONGER_ATTENTION], collect_attention),

    "pictures": (lambda runs: [["demos.scaling", "--out", f"{runs}/scaling"],
                               ["demos.positional_encoding", "--out", f"{runs}/positional_encoding"],
                               ["demos.tour", "--out", f"{runs}/tour"]], collect_pictures),
}


# ----- recording the claims and updating the README -----

def record_wall_time(runs, command, seconds):
    """Seconds a command took from the shell (start-up and compilation included), kept in
    runs/wall_seconds.json for the claims that quote a wall time."""
    path = os.path.join(ROOT, runs, "wall_seconds.json")
    times = json.load(open(path)) if os.path.exists(path) else {}
    times[command] = seconds
    with open(path, "w") as f:
        json.dump(times, f, indent=1, sort_keys=True)


def update(group, claims, images, readme, record):
    """Replace each claim's recorded text by the new one in `readme`; returns (readme, problems)."""
    old = record.get("groups", {}).get(group, {}).get("claims", {})
    problems = []
    for key, text in claims.items():
        if key in old and old[key] in readme:
            readme = readme.replace(old[key], text)
        elif text not in readme:
            problems.append(f"{group}/{key}: the README does not state\n    {text}")
    for name, source in images.items():
        if not exists(source):
            problems.append(f"{group}: image {source} was not written")
        else:
            shutil.copyfile(os.path.join(ROOT, source), os.path.join(ROOT, "docs", "images", name))
    return readme, problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=sorted(GROUPS), help="these groups only")
    parser.add_argument("--collect", action="store_true", help="do not run the demos; read their existing outputs")
    parser.add_argument("--runs", default="runs", help="where the demos write (relative to the repository)")
    args = parser.parse_args(argv)
    record = json.load(open(FIGURES)) if os.path.exists(FIGURES) else {"groups": {}}
    with open(README) as f:
        readme = f.read()
    all_problems = []
    for group in args.only or sorted(GROUPS):
        commands, collect = GROUPS[group]
        if not args.collect:
            for command in commands(args.runs):
                print("$ python -m " + " ".join(command), flush=True)
                started = time.perf_counter()
                subprocess.run([sys.executable, "-m", *command], cwd=ROOT, check=True)
                record_wall_time(args.runs, " ".join(command), time.perf_counter() - started)
        claims, images = collect(args.runs)
        readme, problems = update(group, claims, images, readme, record)
        all_problems += problems
        record["groups"][group] = {"commands": [" ".join(["python -m", *c]) for c in commands("runs")],
                                   "claims": claims, "images": images,
                                   "collected": datetime.date.today().isoformat()}
    with open(README, "w") as f:
        f.write(readme)
    with open(FIGURES, "w") as f:
        json.dump(record, f, indent=1, sort_keys=True)
    for problem in all_problems:
        print(problem)
    if all_problems:
        raise SystemExit(f"{len(all_problems)} figure(s) need a place in README.md (see above)")
    print(f"README.md and {os.path.relpath(FIGURES, ROOT)} are in step with the demos' outputs")


if __name__ == "__main__":
    main()
