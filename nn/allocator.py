"""Keeping freed memory for reuse, so training steps do not pay for page faults.

Each training step allocates and frees the same few hundred arrays.  glibc's malloc serves
arrays above its mmap threshold (128 KiB at first) with fresh pages from the kernel and
returns them on free, so every step faults the same memory in again; raising the mmap
and trim thresholds keeps that memory in the heap for the next step (PyTorch keeps a
caching allocator for the same reason).  This changes the whole process's allocator, so
it is opt-in: the training loop and the benchmarks call it.  A no-op where glibc is absent.
"""

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024   # glibc's upper limit on 64-bit systems


def keep_freed_memory():
    """Raise malloc's mmap and trim thresholds; returns True if glibc accepted them."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_MAX)) and bool(mallopt(M_TRIM_THRESHOLD, 1 << 30))
