"""The benchmarks' check for the engine room imports nothing: numpy's BLAS must start after a
benchmark has fixed its thread count, or numpy's baseline runs on every core."""

import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPT = """
import json, sys
from demos.bench import need_engine_room
need_engine_room("demos.bench.kernels")
print(json.dumps(sorted(name for name in ("numpy", "autograd", "numba", "torch") if name in sys.modules)))
from demos.bench._threads import use_threads
use_threads(1)
import ctypes, glob, os
import numpy as np
libraries = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "*openblas*"))
counts = [getattr(ctypes.CDLL(library), name)() for library in libraries
          for name in ("scipy_openblas_get_num_threads64_", "openblas_get_num_threads") if hasattr(ctypes.CDLL(library), name)]
print(json.dumps(counts))
"""


def test_finding_the_engine_room_imports_nothing_and_numpy_then_starts_on_one_thread():
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    imported, counts = result.stdout.splitlines()
    assert json.loads(imported) == []
    assert set(json.loads(counts)) <= {1}                            # numpy's OpenBLAS (where it can be asked): one thread
