"""autograd/memory.py: freed array memory is reused instead of page-faulted in again."""

import os
import subprocess
import sys

import autograd  # noqa: F401  (importing autograd sets malloc up)
from autograd.memory import keep_freed_memory

CHURN = """
import resource
import numpy as np
import autograd

def churn():                       # one 'training step': 40 arrays of 2 MiB, written, then freed
    arrays = [np.ones(1 << 18) for _ in range(40)]
    del arrays

churn(); churn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    churn()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
"""


def faults_per_churn(**env):
    """Page faults per round of allocating and freeing 80 MiB, in a fresh interpreter."""
    environment = {key: value for key, value in os.environ.items() if key not in ("MALLOC_MMAP_THRESHOLD_",
                                                                              "MALLOC_TRIM_THRESHOLD_",
                                                                              "GLIBC_TUNABLES")}
    result = subprocess.run([sys.executable, "-c", CHURN], env=environment | env, capture_output=True, text=True,
                            check=True)
    return float(result.stdout)


def test_freed_arrays_are_reused_without_page_faults():
    # 80 MiB is 20,480 pages: glibc's defaults fault nearly all of them in again each round.
    assert faults_per_churn() < 200


def test_user_malloc_settings_win():
    # With malloc settings of the user's own (here one that changes nothing) we leave malloc
    # alone, and glibc's defaults fault the pages in again every round.
    assert faults_per_churn(GLIBC_TUNABLES="glibc.malloc.perturb=0") > 10_000


def test_keep_freed_memory_reports_whether_it_applied(monkeypatch):
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.trim_threshold=131072")
    assert keep_freed_memory() is False
    monkeypatch.delenv("GLIBC_TUNABLES")
    assert keep_freed_memory() is (sys.platform.startswith("linux"))
