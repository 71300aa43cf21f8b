"""Keeping freed memory for reuse, so training steps do not pay for page faults.

Each training step allocates and frees the same few hundred arrays.  glibc's malloc serves
arrays above its mmap threshold (128 KiB at first) with fresh pages from the kernel and
returns them on free, so every step faults the same memory in again; raising the mmap
and trim thresholds keeps that memory in the heap for the next step (PyTorch keeps a
caching allocator for the same reason).  With it, a training step's page faults fall from
thousands to a handful, and the system time they cost with them.

This changes the whole process's allocator, so it is opt-in: `kernels.prepare()`, which the
training loops call, turns it on with the fast tier (a loop of your own can call it too).  A no-op where glibc is absent, and when
the user has chosen malloc settings of their own (the environment variables
MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ or GLIBC_TUNABLES).
"""

import ctypes
import ctypes.util
import os

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 * 1024 * 1024   # glibc's upper limit on 64-bit systems
USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def keep_freed_memory():
    """Raise malloc's mmap and trim thresholds; returns True if glibc accepted them."""
    if any(setting in os.environ for setting in USER_SETTINGS):
        return False
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
