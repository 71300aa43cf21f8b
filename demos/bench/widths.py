"""The register width each fast kernel's machine code runs at, for the CPU the kernels are
compiled for: packed floating-point instructions (v...ps, v...pd) counted by register,
zmm (512 bits), ymm (256) and xmm (128), and the GEMM drivers' vector multiply-adds.

LLVM's tuning for a CPU sets a preferred vector width: 512 bits for AMD's Zen 4, 256 for
Intel's AVX-512 cores (which slow their clock on 512-bit work).  The engine room asks for
512-bit vectors where that was measured to pay (the GEMM's micro-kernel, GELU, the fused
attention) and leaves the others to the tuning (under which LLVM may still emit some
512-bit instructions: LayerNorm's code mixes the two), so the same source runs at different
widths under `--cpu sapphirerapids` and on this CPU; this is where to see which.  The
kernels are compiled afresh in a child process with an empty cache: Numba shows no
assembly for a kernel it loaded from its cache."""

import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))   # the project

KERNELS = ("gemm", "small gemm", "softmax", "softmax_backward", "log_softmax", "log_softmax_backward",
           "layer norm", "layer norm backward", "gelu", "gelu backward", "relu", "relu backward", "masked fill",
           "adam", "attention", "attention backward")

SCRIPT = """
import json, sys
import numpy as np
from autograd.engine_room import attention, elementwise, gemm, normalization, optimizer, rowwise, small_gemm, target
f = np.float32

def adam():
    x = np.zeros(3, f)
    optimizer.adam_step(x, x, x.copy(), x.copy(), 1e-3, 0.9, 0.999, 1e-8, 0.0, False, 1)
    return optimizer._adam_step

made = {"gemm": lambda: gemm.gemm_kernel(f), "small gemm": lambda: small_gemm.small_gemm_kernel(f),
        "layer norm": lambda: normalization._layer_norm_kernel(f, False),
        "layer norm backward": lambda: normalization._layer_norm_kernel(f, True),
        "gelu": lambda: elementwise._gelu_kernel(f, False), "gelu backward": lambda: elementwise._gelu_kernel(f, True),
        "relu": lambda: elementwise._relu_kernel(f, False), "relu backward": lambda: elementwise._relu_kernel(f, True),
        "masked fill": lambda: elementwise._masked_fill_kernel(f),
        "attention": lambda: attention._kernels_for(f)[0], "attention backward": lambda: attention._kernels_for(f)[1]}
made.update({name: (lambda name=name: rowwise._rowwise_set(f)[name])
             for name in ("softmax", "softmax_backward", "log_softmax", "log_softmax_backward")})
counts = {}
for name in sys.argv[1:]:
    kernel = adam() if name == "adam" else made[name]().compiled
    asm = kernel.inspect_asm(kernel.signatures[0])
    counts[name] = {"packed": target.packed_registers(asm), "fma": target.fma_registers(asm)}
print(json.dumps(counts))
"""


def register_widths(names=KERNELS, cpu=None):
    """{kernel: {"packed": {"zmm": n, "ymm": n, "xmm": n}, "fma": {...}}} for the float32
    kernels `names`, compiled for the CPU this process compiles for (NUMBA_CPU_NAME), or
    for `cpu`, a target of demos/bench/cpu.py (its tuning and features)."""
    from demos.bench.cpu import feature_string
    unknown = [name for name in names if name not in KERNELS]
    if unknown:
        raise ValueError(f"no such kernel: {', '.join(unknown)} (known: {', '.join(KERNELS)})")
    target = {} if cpu is None else {"NUMBA_CPU_NAME": cpu, "NUMBA_CPU_FEATURES": feature_string(cpu)}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, AUTOGRAD_COMPILE_IN_PROCESS="1", **target)
        run = subprocess.run([sys.executable, "-c", SCRIPT, *names], env=env, cwd=ROOT, check=True,
                             capture_output=True, text=True)
    return json.loads(run.stdout)


def widest(counts):
    """The widest register one kernel's packed instructions use: "zmm", "ymm" or "xmm"
    (None if it has none).  Narrower ones appear in any kernel (constants, reductions
    across a vector, short remainders), and a kernel can mix widths (the counts say how)."""
    return next((width for width in ("zmm", "ymm", "xmm") if counts["packed"][width]), None)
