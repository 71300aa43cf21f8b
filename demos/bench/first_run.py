"""A first run: how long a demo takes to show progress when Numba's cache is empty.

    python -m demos.bench.first_run [--rounds 1] [--json FILE]

Runs `python -m demos.train --task reverse` and `python -m demos.gpt` with an empty Numba
cache (a new NUMBA_CACHE_DIR, as on a fresh clone), on every core and pinned to one core,
and then once more with the cache that run left. For each run: when the kernels' compile
finished (their "compiled in" line on stderr) and when the first progress line came (the
demo's "step ..." or "iter ..." line), in seconds from the start; the run is then stopped.
The first run compiles the kernels in child processes (autograd/engine_room/compile_once.py);
a later run loads them from the cache.
"""

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from demos._results import write_json
from demos.bench import need_engine_room
from demos._flags import a_file_to_write, command_line

DEMOS = {"demos.train --task reverse": ["demos.train", "--task", "reverse"], "demos.gpt": ["demos.gpt"]}


def pin_to_one_core():
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})


def time_to_progress(module_args, cache, out, one_core):
    """(seconds to the end of compiling or None, seconds to the first progress line) of one run."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache)
    start = time.perf_counter()
    run = subprocess.Popen([sys.executable, "-m", *module_args, "--out", out], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, preexec_fn=pin_to_one_core if one_core else None)
    compiled = None
    for line in run.stdout:
        if "compiled in" in line:
            compiled = time.perf_counter() - start
        if line.startswith(("step ", "iter ")):
            first = time.perf_counter() - start
            run.kill()
            run.wait()
            return compiled, first
    run.wait()
    raise SystemExit(f"demos.bench.first_run: {' '.join(module_args)} ended without a progress line "
                     f"(exit status {run.returncode}); run it to see why")


def main(argv=None):
    p = command_line("demos.bench.first_run", __doc__)
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--json", type=a_file_to_write, help="write the figures to this file")
    args = p.parse_args(argv)
    need_engine_room("demos.bench.first_run")
    cores = len(os.sched_getaffinity(0))
    settings = [(name, one_core) for name in DEMOS for one_core in ([False, True] if cores > 1 else [False])]
    figures = {setting: {"compiled_s": [], "first_line_s": [], "warm_first_line_s": []} for setting in settings}
    for _ in range(args.rounds):
        for name, one_core in settings:
            with tempfile.TemporaryDirectory() as scratch:
                cache, out = os.path.join(scratch, "cache"), os.path.join(scratch, "out")
                compiled, first = time_to_progress(DEMOS[name], cache, out, one_core)
                shutil.rmtree(out, ignore_errors=True)
                _, warm = time_to_progress(DEMOS[name], cache, out, one_core)
            entry = figures[name, one_core]
            entry["compiled_s"].append(compiled)
            entry["first_line_s"].append(first)
            entry["warm_first_line_s"].append(warm)
    print(f"seconds from the start, empty Numba cache (warm: the cache that run left); medians of {args.rounds} rounds")
    result = []
    for (name, one_core), entry in figures.items():
        row = {"demo": name, "cores": 1 if one_core else cores,
               **{key: statistics.median(values) for key, values in entry.items()}, "rounds": entry}
        result.append(row)
        print(f"  {name:28s} {row['cores']} core{'s' if row['cores'] > 1 else ' '}  compiled {row['compiled_s']:5.1f}  "
              f"first progress line {row['first_line_s']:5.1f}   warm cache: first progress line "
              f"{row['warm_first_line_s']:5.1f}")
    if args.json:
        write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
