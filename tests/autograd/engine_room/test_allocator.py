"""nn/allocator.py: with keep_freed_memory, freed array memory is reused instead of
page-faulted in again."""

import os
import subprocess
import sys

from autograd.engine_room.allocator import USER_SETTINGS, keep_freed_memory

CHURN = """
import resource, sys
import numpy as np
from autograd.engine_room.allocator import keep_freed_memory

applied = keep_freed_memory() if sys.argv[1] == "keep" else None

def churn():                       # one 'training step': 40 arrays of 2 MiB, written, then freed
    arrays = [np.ones(1 << 18) for _ in range(40)]
    del arrays

churn(); churn()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    churn()
print(applied, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
"""


def churn(mode, **env):
    """(what keep_freed_memory returned, page faults per round of allocating and freeing
    80 MiB), in a fresh interpreter."""
    environment = {key: value for key, value in os.environ.items() if key not in USER_SETTINGS}
    result = subprocess.run([sys.executable, "-c", CHURN, mode], env=environment | env, capture_output=True,
                            text=True, check=True)
    applied, faults = result.stdout.split()
    return applied, float(faults)


def test_freed_arrays_are_reused_without_page_faults():
    # 80 MiB is 20,480 pages: glibc's defaults fault nearly all of them in again each round
    assert churn("default")[1] > 10_000
    applied, faults = churn("keep")
    assert applied == "True" and faults < 200


def test_user_malloc_settings_win():
    # malloc settings of the user's own (here one that changes nothing): left alone
    applied, faults = churn("keep", GLIBC_TUNABLES="glibc.malloc.perturb=0")
    assert applied == "False" and faults > 10_000


def test_keep_freed_memory_says_whether_it_applied(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "131072")
    assert keep_freed_memory() is False
