"""Let LLVM use the CPU's widest vectors: 512-bit AVX-512 where the CPU has it.

LLVM tunes Skylake-server and Ice Lake CPUs to *prefer* 256-bit vectors although they have
512-bit ones (early AVX-512 chips lowered their clock for 512-bit code).  For the matmul's
micro-kernel (gemm.py) that halves the multiply-adds each instruction does: the numpy BLAS
it is measured against uses the 512-bit registers, and with 256-bit ones our matmul peaked
at about 0.65x its speed on this project's Ice Lake machine (0.85-1.0x with 512-bit ones;
`python -m demos.bench_kernels`).

Numba reads the CPU's features once, when it compiles its first function, from the
environment variable NUMBA_CPU_FEATURES (default: what LLVM detects on the host).
`prefer_wide_vectors()` sets it to the host's features with the 256-bit preference turned
off.  It runs when `autograd.kernels` is imported, so before any kernel compiles; it does
nothing on CPUs without AVX-512, or when the variable is already set (your choice wins).
The features are part of the key of Numba's on-disk cache, so the kernels compiled either
way are cached side by side.
"""

import os

VARIABLE = "NUMBA_CPU_FEATURES"


def prefer_wide_vectors():
    """Set NUMBA_CPU_FEATURES to the host's features minus 'prefer-256-bit', on AVX-512
    CPUs, unless it is set already.  Returns the value Numba will use (None: its default)."""
    if VARIABLE in os.environ:
        return os.environ[VARIABLE]
    import llvmlite.binding as llvm
    features = llvm.get_host_cpu_features().flatten()
    if "+avx512f" not in features.split(","):
        return None
    os.environ[VARIABLE] = features + ",-prefer-256-bit"
    return os.environ[VARIABLE]
