"""Two trainings on one machine: each one's speed side by side against its speed alone.

    python -m demos.bench.share [--iters 150] [--rounds 2] [--json FILE]

Runs `python -m demos.gpt` (nanoGPT's CPU recipe, --iters iterations, on every core Numba
finds) alone, then two copies at once, with the fast kernels sharing the cores (they give
up threads while another process keeps a core busy: autograd/engine_room/dispatch.py) and
without (AUTOGRAD_SHARE_CORES=0). Each figure is the training's tokens/s from its
metrics.json; the configurations alternate in rounds, and medians are reported. Side by
side, a fair share is half of the solo speed.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile

from demos._results import write_json
from demos.bench import need_engine_room
from demos._flags import a_file_to_write, command_line


def start(folder, iters, share):
    env = {**os.environ, "AUTOGRAD_SHARE_CORES": "1" if share else "0"}
    return subprocess.Popen([sys.executable, "-m", "demos.gpt", "--max-iters", str(iters), "--eval-every", str(iters),
                             "--eval-iters", "2", "--sample-tokens", "1", "--out", folder], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def tokens_per_second(folders, iters, share):
    """Run one training per folder at once; their tokens/s."""
    runs = [start(folder, iters, share) for folder in folders]
    if any(run.wait() for run in runs):
        raise SystemExit("demos.bench.share: a training failed (run python -m demos.gpt to see why)")
    return [json.load(open(os.path.join(folder, "metrics.json")))["tokens_per_second"] for folder in folders]


def main(argv=None):
    p = command_line("demos.bench.share", __doc__)
    p.add_argument("--iters", type=int, default=150)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json", type=a_file_to_write, help="write the figures to this file")
    args = p.parse_args(argv)
    need_engine_room("demos.bench.share")
    figures = {(share, mode): [] for share in (True, False) for mode in ("alone", "side by side")}
    with tempfile.TemporaryDirectory() as scratch:
        tokens_per_second([os.path.join(scratch, "warm")], 2, True)             # compile or load the kernels once
        for _ in range(args.rounds):
            for share in (True, False):
                figures[share, "alone"] += tokens_per_second([os.path.join(scratch, "a")], args.iters, share)
                figures[share, "side by side"] += tokens_per_second(
                    [os.path.join(scratch, "b"), os.path.join(scratch, "c")], args.iters, share)
    result = {}
    print(f"demos.gpt, {args.iters} iterations, {os.cpu_count()} cores; medians of {args.rounds} rounds")
    for share in (True, False):
        alone = statistics.median(figures[share, "alone"])
        pair = statistics.median(figures[share, "side by side"])
        key = "sharing" if share else "not sharing"
        result[key] = {"alone_tokens_per_s": alone, "side_by_side_tokens_per_s": pair, "side_by_side_vs_alone": pair / alone,
                       "rounds": {mode: figures[share, mode] for mode in ("alone", "side by side")}}
        print(f"  {key:12s} alone {alone:8,.0f} tokens/s   side by side, each {pair:8,.0f} tokens/s = "
              f"{pair / alone:.0%} of alone")
    result["alone_sharing_vs_not"] = result["sharing"]["alone_tokens_per_s"] / result["not sharing"]["alone_tokens_per_s"]
    print(f"  alone, sharing against not: {result['alone_sharing_vs_not']:.2f}x the tokens/s")
    if args.json:
        write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
