"""The kernel tests again, against kernels compiled for other CPUs than the host.

The engine room sizes its register tiles and vector width from the CPU Numba compiles for
(target.py), so a tile or a vectorized loop that is wrong only for AVX2's 16 registers, or
for SSE's 128-bit ones, passes every test on an AVX-512 machine.  Here the kernel-tier
tests (and the register-width checks of test_target.py) run in a child process with
NUMBA_CPU_NAME and NUMBA_CPU_FEATURES set for another target, in a Numba cache of its own.

CI runs them for AVX2 (haswell); the slower job that also runs them for SSE4.2 only is
    AUTOGRAD_TEST_TARGETS=haswell,x86-64-v2 python -m pytest tests/autograd/engine_room/test_targets.py
"""

import os
import subprocess
import sys

import numba
import pytest

from demos.bench import cpu

TARGETS = [name for name in os.environ.get("AUTOGRAD_TEST_TARGETS", "haswell").split(",") if name]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
KERNEL_TESTS = ["tests/autograd/engine_room/test_kernels.py", "tests/autograd/engine_room/test_target.py",
                "tests/autograd/test_kernel_tiers.py"]
# Left to the host's run: the tests of the compiling machinery (child processes, Numba's
# cache, the JIT turned off), each of which compiles every kernel again from an empty cache
# and none of which depends on the instructions compiled for.
MACHINERY = "not every_process and not leaves_early and not string_code and not plain_python"


def _runnable(name):
    """Whether this machine can run code compiled for target `name` (an x86 CPU with its features)."""
    _, features, _ = cpu.TARGETS[name]
    return features is None or set(features) <= cpu.host_features()


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="compiles kernels")
@pytest.mark.parametrize("name", TARGETS)
def test_kernel_tests_pass_compiled_for(name, tmp_path):
    if not _runnable(name):
        pytest.skip(f"this CPU cannot run code compiled for {name}")
    env = dict(cpu.target_environment(name), NUMBA_CACHE_DIR=str(tmp_path))
    env.pop(cpu.CHILD)
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-k", MACHINERY,
                          "--durations=5", *KERNEL_TESTS],
                         env=env, cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    check = subprocess.run([sys.executable, "-c", "from autograd.engine_room import gemm; print(gemm.VECTOR_BYTES)"],
                           env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    assert int(check.stdout) == {"AVX-512": 64, "AVX2": 32, "SSE4.2": 16}[cpu.TARGETS[name][0]]
