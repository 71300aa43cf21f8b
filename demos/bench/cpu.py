"""Benchmark as another CPU on this one: `--cpu NAME` for demos.bench.kernels, train and generate.

LLVM compiles the kernels for a CPU's *tuning* (which vector width it prefers, how it
schedules) and its *features* (which instructions it may use).  A developer on one vendor's
CPU sees the other's tuning by compiling with NUMBA_CPU_NAME (the tuning) and
NUMBA_CPU_FEATURES (the features), in a Numba cache of its own, so that neither build is
loaded in place of the other.  `ran_in_child(name, ...)` runs the benchmark again, in a
child process, with those set; the child records what it compiled for (`machine_record`).

The targets, each with the instruction set it is compiled for (the host must have it):

- sapphirerapids, icelake-server, znver4: AVX-512, the host's own features (as Intel's
  and AMD's AVX-512 cores differ in tuning, not in the instructions the kernels use);
- znver3, haswell: AVX2 and FMA, no AVX-512 (numpy's OpenBLAS and PyTorch are held to
  AVX2 too: OPENBLAS_CORETYPE=Haswell; ATEN_CPU_CAPABILITY=avx2 for PyTorch's own kernels,
  and MKL_ENABLE_INSTRUCTIONS=AVX2, ONEDNN_MAX_CPU_ISA=AVX2 for the MKL and oneDNN its
  matrix products run on, which choose their instructions themselves: with the capability
  alone, PyTorch's float32 products still ran AVX-512 code on an AVX-512 CPU);
- x86-64-v2: SSE4.2 only (OpenBLAS's Nehalem kernels, PyTorch's default capability, MKL's
  and oneDNN's SSE4 code).
"""

import os
import subprocess
import sys

import llvmlite.binding

AVX2_FEATURES = ("64bit,cmov,cx8,cx16,fxsr,mmx,sahf,popcnt,sse,sse2,sse3,ssse3,sse4.1,sse4.2,avx,avx2,fma,f16c,bmi,"
                 "bmi2,lzcnt,movbe,xsave").split(",")
V2_FEATURES = "64bit,cmov,cx8,cx16,fxsr,mmx,sahf,popcnt,sse,sse2,sse3,ssse3,sse4.1,sse4.2".split(",")
AVX2_BASELINES = {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
                  "ONEDNN_MAX_CPU_ISA": "AVX2"}
V2_BASELINES = {"OPENBLAS_CORETYPE": "Nehalem", "ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
                "ONEDNN_MAX_CPU_ISA": "SSE41"}
# name: (instruction set, features: None for the host's own, baselines' environment)
TARGETS = {
    "sapphirerapids": ("AVX-512", None, {}),
    "icelake-server": ("AVX-512", None, {}),
    "znver4": ("AVX-512", None, {}),
    "znver3": ("AVX2", AVX2_FEATURES, AVX2_BASELINES),
    "haswell": ("AVX2", AVX2_FEATURES, AVX2_BASELINES),
    "x86-64-v2": ("SSE4.2", V2_FEATURES, V2_BASELINES),
}
CHILD = "AUTOGRAD_BENCH_CPU"              # set in the child: it compiles for that CPU already
# (numpy is imported inside the functions: a benchmark fixes BLAS's thread count before numpy starts)


def host_features():
    """The host CPU's features, as a set of LLVM names."""
    return {name[1:] for name in llvmlite.binding.get_host_cpu_features().flatten().split(",") if name.startswith("+")}


def feature_string(name):
    """NUMBA_CPU_FEATURES for target `name`: its features on, and every other vector
    extension the host has off (LLVM adds a named CPU's own features to the string)."""
    instructions, features, _ = TARGETS[name]
    host = host_features()
    if features is None:
        if instructions == "AVX-512" and "avx512f" not in host:
            raise SystemExit(f"--cpu {name}: this CPU lacks avx512f, which code compiled for {name} uses")
        return ",".join(f"+{f}" for f in sorted(host))
    missing = sorted(set(features) - host)
    if missing:
        raise SystemExit(f"--cpu {name}: this CPU lacks {', '.join(missing)}, which code compiled for {name} uses")
    off = sorted(f for f in host - set(features) if f.startswith(("avx", "amx", "fma", "f16c", "vaes", "vpclmul", "gfni")))
    return ",".join([f"+{f}" for f in features] + [f"-{f}" for f in off])


def cache_dir(name):
    """The Numba cache of the kernels compiled for target `name` (one per target)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "autograd-numba", name)


def target_environment(name):
    """The environment a child benchmarking as `name` runs in."""
    if name not in TARGETS:
        raise SystemExit(f"--cpu {name}: unknown target; choose one of {', '.join(TARGETS)}")
    _, _, baselines = TARGETS[name]
    env = dict(os.environ, NUMBA_CPU_NAME=name, NUMBA_CPU_FEATURES=feature_string(name),
               NUMBA_CACHE_DIR=cache_dir(name), **{CHILD: name}, **baselines)
    if not baselines:                     # the baselines on the host's own kernels
        for variable in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", *AVX2_BASELINES):
            env.pop(variable, None)
    return env


def ran_in_child(name, module, argv=None):
    """`--cpu NAME`: run `python -m module argv` (argv None: this process's own arguments)
    compiled for target `name` in a child process; True once it succeeded (a failure exits
    with the child's status).  False, running nothing, when there is no target (name None)
    or this process is that child: the caller then benchmarks here."""
    if name is None or os.environ.get(CHILD) == name:
        return False
    env = target_environment(name)
    print(f"benchmarking as {name} ({TARGETS[name][0]}): NUMBA_CPU_NAME={name}, cache {env['NUMBA_CACHE_DIR']}",
          flush=True)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    argv = sys.argv[1:] if argv is None else list(argv)
    if code := subprocess.run([sys.executable, "-m", module] + argv, env=env, cwd=root).returncode:
        raise SystemExit(code)
    return True


def cpu_model():
    """The CPU's model name (/proc/cpuinfo), else platform's guess."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()


def machine_record():
    """What a benchmark ran on and compiled for: the CPU model, its vector features, the
    tuning and vector features the kernels were compiled with, and the register width and
    caches the engine room sized its tiles and blocks from."""
    import numpy as np
    from autograd.engine_room import gemm, target
    vector = lambda names: sorted(f for f in names if f.startswith(("avx", "sse", "fma", "neon", "amx")))   # noqa: E731
    return {"cpu_model": cpu_model(), "host_cpu": llvmlite.binding.get_host_cpu_name(),
            "host_vector_features": vector(host_features()), "compiled_for": target.compile_cpu_name(),
            "compiled_vector_features": vector(target.compile_features()),
            "vector_bytes": gemm.VECTOR_BYTES, "gemm_tile_float32": f"{gemm.MR} x {gemm.NR[np.float32]}",
            "l1d_bytes": target.cache_bytes(1), "l2_bytes": target.cache_bytes(2),
            "openblas_kernel": openblas_kernel(),
            "aten_cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY", "(host)"),
            "mkl_instructions": os.environ.get("MKL_ENABLE_INSTRUCTIONS", "(host)"),
            "onednn_isa": os.environ.get("ONEDNN_MAX_CPU_ISA", "(host)")}


def openblas_kernel():
    """The kernel set numpy's OpenBLAS chose ("SkylakeX", "Haswell", ...), as threadpoolctl
    reports it; None when numpy links another BLAS."""
    import ctypes
    import glob
    import numpy as np
    folder = os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs")
    for library in glob.glob(os.path.join(folder, "*openblas*")):
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename", "openblas_get_corename"):
            function = getattr(ctypes.CDLL(library), name, None)
            if function is not None:
                function.restype = ctypes.c_char_p
                return function().decode()
    return None
