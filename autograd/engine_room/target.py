"""What the kernels are compiled for: the CPU's vector registers and its caches.

The register tiles (gemm.py, small_gemm.py) are sized from the vector registers of the CPU
Numba compiles for, and the GEMM's blocks from the caches of the CPU it runs on:

- `vector_bytes()`: the width of one vector register, from the features Numba compiles
  with (NUMBA_CPU_FEATURES, else the host's): 64 with AVX-512, 32 with AVX2 (or AVX),
  16 with SSE or ARM's NEON.
- `vector_registers()`: how many there are: 32 with AVX-512 or on AArch64 (NEON), 16 on
  x86 without AVX-512.
- `cache_bytes(level)`: the data cache of one core at level 1 or 2, read at run time from
  Linux's /sys/devices/system/cpu/cpu0/cache, else from os.sysconf, else a fallback
  (FALLBACK_CACHE_BYTES) where neither can be read (macOS, Windows, a container that hides
  them).
- `fma_registers(asm)`: in the assembly of a compiled kernel, how many vector
  multiply-adds use each register width; the tests and benchmarks check with it that the
  GEMM's hot loop runs on the widest registers the CPU has.

Why the vector width is chosen per kernel, and marked on the functions themselves rather
than left to LLVM's tuning of the CPU: LLVM tunes Intel's AVX-512 cores (Skylake-server to
Sapphire Rapids) to prefer 256-bit vectors, and AMD's Zen 4 and 5 to prefer 512-bit ones.
The GEMM's micro-kernel is the CPU's peak only on its widest registers, so it asks for
512-bit vectors on every CPU that has them (`WIDE_VECTORS`, in micro_kernel.py and gemm.py);
the row-wise kernels' short loops keep LLVM's tuning.
"""

import os
import platform
import re

import llvmlite.binding
import numba

WIDE_VECTORS = '"prefer-vector-width"="512"'     # an LLVM function attribute (llvmlite knows no such name)
FALLBACK_CACHE_BYTES = {1: 32 << 10, 2: 1 << 20}  # the smallest of the x86 and ARM cores in use today
_SYSCONF_NAMES = {1: "SC_LEVEL1_DCACHE_SIZE", 2: "SC_LEVEL2_CACHE_SIZE"}
_CACHE_FOLDER = "/sys/devices/system/cpu/cpu0/cache"


def compile_features():
    """The CPU features Numba compiles for: NUMBA_CPU_FEATURES if set, else the host's,
    as a set of names ("avx512f", "neon", ...)."""
    features = numba.config.CPU_FEATURES or llvmlite.binding.get_host_cpu_features().flatten()
    return {name[1:] for name in features.split(",") if name.startswith("+")}


def compile_cpu_name():
    """The CPU Numba tunes for: NUMBA_CPU_NAME if set, else the host's (as LLVM names it)."""
    return numba.config.CPU_NAME or llvmlite.binding.get_host_cpu_name()


def _is_arm():
    return platform.machine().lower() in ("arm64", "aarch64")


def vector_bytes(features=None):
    """Bytes in one vector register of the CPU the kernels are compiled for."""
    features = compile_features() if features is None else features
    if "avx512f" in features:
        return 64
    if "avx" in features or "avx2" in features:
        return 32
    return 16                                            # SSE, NEON


def vector_registers(features=None, arm=None):
    """How many vector registers that CPU has: 32 with AVX-512 and on AArch64, else 16."""
    features = compile_features() if features is None else features
    arm = _is_arm() if arm is None else arm
    return 32 if arm or "avx512f" in features else 16


def _read_sys_cache(level):
    """The level's data (or unified) cache of cpu0 in bytes from /sys, or None."""
    try:
        entries = sorted(os.listdir(_CACHE_FOLDER))
    except OSError:
        return None
    for entry in entries:
        folder = os.path.join(_CACHE_FOLDER, entry)
        try:
            with open(os.path.join(folder, "level")) as f:
                entry_level = int(f.read())
            with open(os.path.join(folder, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(folder, "size")) as f:
                size = f.read().strip()
        except (OSError, ValueError):
            continue
        if entry_level == level and kind in ("Data", "Unified"):
            return _parse_size(size)
    return None


def _parse_size(text):
    """'48K' -> 49152, '2048K' -> 2097152, '2M' -> 2097152; None if unreadable."""
    match = re.fullmatch(r"(\d+)\s*([KMG]?)B?", text.strip(), re.IGNORECASE)
    if not match:
        return None
    return int(match.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[match.group(2).upper()]


def _sysconf_cache(level):
    try:
        size = os.sysconf(_SYSCONF_NAMES[level])
    except (ValueError, OSError, AttributeError):
        return None
    return size if size and size > 0 else None


def cache_bytes(level):
    """One core's level-1 data cache or level-2 cache, in bytes, read at run time (see the
    module docstring); FALLBACK_CACHE_BYTES where it cannot be read."""
    return _read_sys_cache(level) or _sysconf_cache(level) or FALLBACK_CACHE_BYTES[level]


def fma_registers(asm):
    """{"zmm": count, "ymm": count, "xmm": count} of the vector fused multiply-adds
    (vfmadd...) in x86 assembly text, by the width of their destination register."""
    return registers_of(asm, r"vfn?madd")


def packed_registers(asm):
    """The same count for every packed floating-point instruction (v...ps, v...pd: whole
    vectors loaded, stored, compared or computed): the widths a kernel's loops run at."""
    return registers_of(asm, r"v\w*p[sd]\b")


def registers_of(asm, mnemonic):
    """{"zmm": count, "ymm": count, "xmm": count} of the instructions whose name starts
    with the regular expression `mnemonic`, by the width of their last register operand
    (AT&T syntax: the destination)."""
    counts = {"zmm": 0, "ymm": 0, "xmm": 0}
    for line in asm.splitlines():
        if re.match(r"\s*" + mnemonic, line):
            registers = re.findall(r"%([xyz]mm)\d+", line)
            if registers:
                counts[registers[-1]] += 1
    return counts
