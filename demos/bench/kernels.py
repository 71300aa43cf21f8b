"""Benchmark the Numba kernels against numpy (and PyTorch CPU, when installed) in one process.

    python -m demos.bench.kernels [--threads 1] [--json out.json] [--quick] [--sizes S M L] [--cpu NAME] [--clock cpu]

Prints matmul GFLOP/s against numpy's BLAS (and PyTorch); every matmul shape one training
step of the benchmark Transformer makes at each size of demos.bench.train (operand
layouts included: C row-major, T a transposed view, S strided rows), ours and PyTorch's
against numpy on the very operands the step passed; softmax and log-softmax forward and backward in
microseconds against the numpy twins (and PyTorch); compile time of each kernel with an
empty cache, and start-up with the cache warm.  Ours and each baseline alternate in short
rounds (medians; each ratio the median of the rounds' ratios), so that a change in the
shared machine's load falls on both.
Thread counts are fixed before numpy is imported, so BLAS, Numba and PyTorch all use
`--threads` threads.  --cpu NAME compiles the kernels for another CPU's tuning and
features (demos/bench/cpu.py: sapphirerapids, icelake-server, znver4, znver3, haswell,
x86-64-v2), in a Numba cache of its own; every run records the CPU model, its features,
what the kernels were compiled for, how many of the GEMM drivers' vector multiply-adds
use each register width, and the widest register each kernel runs at (widths.py).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

from demos._flags import a_file_to_write, command_line, integer_at_least
from demos._results import write_json
from demos.bench import _clock, need_engine_room, widths
from demos.bench._threads import use_threads
from demos.bench.cpu import TARGETS, machine_record, ran_in_child

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the project


def parse_args(argv=None):
    parser = command_line("demos.bench.kernels", __doc__)
    parser.add_argument("--threads", type=integer_at_least(1), default=1)
    parser.add_argument("--json", type=a_file_to_write, help="also write the figures to this file")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions, no compile-time measurement")
    parser.add_argument("--sizes", nargs="*", choices=["S", "M", "L"], default=["S", "M", "L"],
                        help="training-step sizes for the GEMM-shape table (none: no such table)")
    parser.add_argument("--cpu", choices=sorted(TARGETS), help="compile the kernels for this CPU's tuning and features")
    parser.add_argument("--clock", choices=sorted(_clock.CLOCKS), default="wall",
                        help="time in wall time or in this thread's CPU time (demos/bench/_clock.py; not compile times)")
    return parser.parse_args(argv)


def matmul_cases():
    cases = [(f"square {n} {dt}", (n, n), (n, n), dt) for dt in ("float32", "float64")
             for n in (64, 128, 256, 512, 1024)]
    for dt in ("float32", "float64"):
        cases += [(f"attention 64x(32x16)@(16x32) {dt}", (64, 32, 16), (64, 16, 32), dt),
                  (f"attention 64x(32x32)@(32x16) {dt}", (64, 32, 32), (64, 32, 16), dt),
                  (f"linear (640x64)@(64x256) {dt}", (640, 64), (64, 256), dt),
                  (f"linear (640x64)@(64x64) {dt}", (640, 64), (64, 64), dt)]
    return cases


def bench_matmul(np, engine_room, rounds, torch):
    """Square, attention-sized and layer-sized products: ours against numpy (and PyTorch),
    alternating in short rounds (gemm_calls.interleaved); each ratio is the median of the
    rounds' ratios, so that a change in the shared machine's load falls on both sides."""
    from demos.bench import gemm_calls
    rng = np.random.default_rng(0)
    rows = []
    for name, a_shape, b_shape, dt in matmul_cases():
        a = rng.standard_normal(a_shape).astype(dt)
        b = rng.standard_normal(b_shape).astype(dt)
        flops = 2 * a.size * b_shape[-1]
        t_numba, t_numpy, ratio = gemm_calls.interleaved(lambda: engine_room.matmul(a, b), lambda: np.matmul(a, b), rounds)
        row = {"case": name, "numba_gflops": flops / t_numba / 1e9, "numpy_gflops": flops / t_numpy / 1e9,
               "ratio_vs_numpy": 1 / ratio}
        if torch is not None:
            ta, tb = torch.from_numpy(a), torch.from_numpy(b)
            _, t_torch, _ = gemm_calls.interleaved(lambda: engine_room.matmul(a, b), lambda: torch.matmul(ta, tb), rounds)
            row["torch_gflops"] = flops / t_torch / 1e9
        rows.append(row)
        extra = f"  torch {row['torch_gflops']:6.1f}" if torch is not None else ""
        print(f"  {name:<38} numba {row['numba_gflops']:6.1f}  numpy {row['numpy_gflops']:6.1f} GFLOP/s"
              f"  ratio {row['ratio_vs_numpy']:.2f}x{extra}", flush=True)
    return rows


def bench_step_shapes(np, engine_room, sizes, rounds, torch):
    """Every distinct matmul of one training step at each size: ours against numpy, and
    PyTorch's torch.matmul against numpy on the same operands (strides included) when it is
    installed, each pair interleaved in its own rounds."""
    from demos.bench import train as bench_train, gemm_calls
    rows = []
    for size in sizes:
        calls = gemm_calls.record_matmuls(bench_train.ours(size))
        totals = {"ours": 0.0, "numpy": 0.0, "torch": 0.0}
        for call in sorted(calls, key=lambda c: -c["flops"] * c["count"]):
            a, b = call["a"], call["b"]
            t_ours, t_numpy, ratio = gemm_calls.interleaved(lambda: engine_room.matmul(a, b), lambda: np.matmul(a, b), rounds)
            row = {"size": size, "case": gemm_calls.describe(call), "count": call["count"],
                   "numba_gflops": call["flops"] / t_ours / 1e9, "numpy_gflops": call["flops"] / t_numpy / 1e9,
                   "ratio_vs_numpy": 1 / ratio}
            totals["ours"] += call["count"] * t_ours
            totals["numpy"] += call["count"] * t_numpy
            extra = ""
            if torch is not None:
                ta, tb = torch.from_numpy(a), torch.from_numpy(b)
                t_torch, _, torch_ratio = gemm_calls.interleaved(lambda: torch.matmul(ta, tb), lambda: np.matmul(a, b),
                                                                 rounds)
                row.update(torch_gflops=call["flops"] / t_torch / 1e9, torch_ratio_vs_numpy=1 / torch_ratio)
                totals["torch"] += call["count"] * t_torch
                extra = f"  torch {row['torch_gflops']:6.1f} GFLOP/s  ratio {row['torch_ratio_vs_numpy']:.2f}x"
            rows.append(row)
            print(f"  {size} {row['case']:<44} x{row['count']:<3} numba {row['numba_gflops']:6.1f}  numpy "
                  f"{row['numpy_gflops']:6.1f} GFLOP/s  ratio {row['ratio_vs_numpy']:.2f}x{extra}", flush=True)
        total = {"size": size, "case": "all of one step", "numba_ms": totals["ours"] * 1e3,
                 "numpy_ms": totals["numpy"] * 1e3, "ratio_vs_numpy": totals["numpy"] / totals["ours"]}
        extra = ""
        if torch is not None:
            total.update(torch_ms=totals["torch"] * 1e3, torch_ratio_vs_numpy=totals["numpy"] / totals["torch"])
            extra = f", torch {total['torch_ms']:.1f} ms, ratio {total['torch_ratio_vs_numpy']:.2f}x"
        rows.append(total)
        print(f"  {size} all matmuls of one step: numba {total['numba_ms']:.1f} ms, numpy {total['numpy_ms']:.1f} ms, "
              f"ratio {total['ratio_vs_numpy']:.2f}x{extra}", flush=True)
    return rows


def bench_rowwise(np, engine_room, reference, rounds, torch):
    """softmax, log-softmax and their backwards: ours against the numpy twins (and PyTorch),
    alternating in short rounds as bench_matmul does."""
    from demos.bench import gemm_calls
    rng = np.random.default_rng(1)
    rows = []
    for shape in ((64, 4, 32, 32), (640, 1000)):
        x = (3 * rng.standard_normal(shape)).astype(np.float32)
        dy = rng.standard_normal(shape).astype(np.float32)
        y_soft, y_log = reference.softmax(x), reference.log_softmax(x)
        cases = {
            "softmax": (lambda: engine_room.softmax(x), lambda: reference.softmax(x)),
            "softmax_backward": (lambda: engine_room.softmax_backward(y_soft, dy), lambda: reference.softmax_backward(y_soft, dy)),
            "log_softmax": (lambda: engine_room.log_softmax(x), lambda: reference.log_softmax(x)),
            "log_softmax_backward": (lambda: engine_room.log_softmax_backward(y_log, dy),
                                     lambda: reference.log_softmax_backward(y_log, dy)),
        }
        torch_cases = {}
        if torch is not None:
            tx, tdy = torch.from_numpy(x), torch.from_numpy(dy)
            ty_soft, ty_log = torch.softmax(tx, -1), torch.log_softmax(tx, -1)
            aten = torch.ops.aten
            torch_cases = {
                "softmax": lambda: torch.softmax(tx, -1),
                "softmax_backward": lambda: aten._softmax_backward_data(tdy, ty_soft, -1, tx.dtype),
                "log_softmax": lambda: torch.log_softmax(tx, -1),
                "log_softmax_backward": lambda: aten._log_softmax_backward_data(tdy, ty_log, -1, tx.dtype),
            }
        for name, (numba_fn, numpy_fn) in cases.items():
            t_numba, t_numpy, ratio = gemm_calls.interleaved(numba_fn, numpy_fn, rounds)
            row = {"case": f"{name} {shape} float32", "numba_us": t_numba * 1e6, "numpy_us": t_numpy * 1e6,
                   "ratio_vs_numpy": ratio}
            extra = ""
            if name in torch_cases:
                _, t_torch, ratio = gemm_calls.interleaved(numba_fn, torch_cases[name], rounds)
                row["torch_us"], row["ratio_vs_torch"] = t_torch * 1e6, ratio
                extra = f"  torch {row['torch_us']:8.1f} us  ratio {row['ratio_vs_torch']:.2f}x"
            rows.append(row)
            print(f"  {row['case']:<45} numba {row['numba_us']:8.1f} us  numpy {row['numpy_us']:8.1f} us"
                  f"  ratio {row['ratio_vs_numpy']:.2f}x{extra}", flush=True)
    return rows


COMPILE_SCRIPT = """
import time, json, numpy as np
t0 = time.perf_counter()
from autograd import engine_room
times = {"import": time.perf_counter() - t0}
x = np.zeros((3, 5), np.float32)
for name in ("softmax", "log_softmax"):
    t = time.perf_counter(); getattr(engine_room, name)(x); times[name] = time.perf_counter() - t
for name in ("softmax_backward", "log_softmax_backward"):
    t = time.perf_counter(); getattr(engine_room, name)(x, x); times[name] = time.perf_counter() - t
t = time.perf_counter(); engine_room.matmul(np.zeros((3, 4), np.float32), np.zeros((4, 5), np.float32))
engine_room.matmul(np.zeros((3, 4), np.float32), np.zeros((4, 50), np.float32))
times["matmul, small-matrix driver"] = time.perf_counter() - t
t = time.perf_counter(); engine_room.matmul(np.zeros((20, 300), np.float32), np.zeros((300, 100), np.float32))
times["matmul, Goto driver"] = time.perf_counter() - t
t = time.perf_counter(); engine_room.gelu(x, "none"); engine_room.gelu_backward(x, x, "none"); times["gelu and backward"] = time.perf_counter() - t
t = time.perf_counter(); out, xhat, rstd = engine_room.layer_norm(x, x[0], x[0], 1e-5)
engine_room.layer_norm_backward(x, xhat, rstd, x[0]); times["layer_norm and backward"] = time.perf_counter() - t
t = time.perf_counter(); engine_room.relu_backward(engine_room.relu(x), x); times["relu and backward"] = time.perf_counter() - t
t = time.perf_counter(); engine_room.masked_fill(x, x > 0, 0.0); times["masked_fill"] = time.perf_counter() - t
times["total"] = time.perf_counter() - t0
from autograd.engine_room import attention
t = time.perf_counter(); attention._kernels_for(np.float32); times["fused attention"] = time.perf_counter() - t
print(json.dumps(times))
"""

FIRST_RUN_SCRIPT = "from autograd import kernels; kernels.prepare()"


def bench_compile():
    """Each float32 kernel's first call in a fresh process: once with an empty cache
    (compilation, in that process: AUTOGRAD_COMPILE_IN_PROCESS), once with the cache that
    run left (loading); and what a first run waits for, with an empty cache: the float32
    kernels compiled in compile_once's child processes, side by side."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, NUMBA_NUM_THREADS="1", AUTOGRAD_COMPILE_IN_PROCESS="1")
        runs = [json.loads(subprocess.run([sys.executable, "-c", COMPILE_SCRIPT], env=env, cwd=ROOT, check=True,
                                          capture_output=True, text=True).stdout) for _ in range(2)]
    cold, warm = runs
    for name in cold:
        print(f"  {name:<40} cold {cold[name]:7.2f} s   warm cache {warm[name]:6.3f} s")
    with tempfile.TemporaryDirectory() as cache:
        env = {name: value for name, value in os.environ.items() if name != "AUTOGRAD_COMPILE_IN_PROCESS"}
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", FIRST_RUN_SCRIPT], env=dict(env, NUMBA_CACHE_DIR=cache), cwd=ROOT,
                       check=True, capture_output=True)
        first_run = time.perf_counter() - start
    print(f"  a first run's wait for the float32 kernels (child processes): {first_run:.1f} s")
    return {"cold_s": cold, "warm_s": warm, "first_run_s": first_run}


def main(argv=None):
    args = parse_args(argv)
    need_engine_room("demos.bench.kernels")
    if ran_in_child(args.cpu, "demos.bench.kernels", argv):
        return None
    _clock.use(args.clock, args.threads)
    torch = use_threads(args.threads)
    import numpy as np
    from autograd import engine_room, kernels
    from autograd.engine_room.warmup import warmup
    from autograd.kernels import reference
    rounds = 11 if args.quick else 31
    machine = dict(machine_record(), cores=os.cpu_count(), threads=args.threads, clock=args.clock, numpy=np.__version__,
                   torch=getattr(torch, "__version__", None))
    print(f"machine: {machine}")
    registers = widths.register_widths()
    machine["gemm_multiply_adds"] = {"goto": registers["gemm"]["fma"], "small": registers["small gemm"]["fma"]}
    machine["kernel_widths"] = {name: widths.widest(counts) for name, counts in registers.items()}
    print(f"vector multiply-adds in the GEMM drivers' code, by register width: {machine['gemm_multiply_adds']}")
    print(f"the widest register each kernel's packed instructions use: {machine['kernel_widths']}")
    kernels.prepare()
    warmup()
    print("matmul (GFLOP/s, higher is better):")
    results = {"machine": machine, "matmul": bench_matmul(np, engine_room, rounds, torch)}
    if args.sizes:
        print("every matmul of one training step (time-rate against numpy on the same operands; higher is better):")
        results["step_shapes"] = bench_step_shapes(np, engine_room, args.sizes, rounds, torch)
    print("row-wise kernels (microseconds, lower is better):")
    results["rowwise"] = bench_rowwise(np, engine_room, reference, rounds, torch)
    if not args.quick:
        print("compile time (float32 serial kernels):")
        results["compile"] = bench_compile()
    if args.json:
        write_json(args.json, results)
        print(f"wrote {args.json}")
    return results


if __name__ == "__main__":
    main()
