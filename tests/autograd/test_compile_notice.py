"""The line that announces a Numba compile (autograd/kernels/compile_notice.py): said only when
Numba compiles (never when it loads from its cache), once per group of kernels, for the compile
Numba starts on its own (not a helper compiled inside it), with the reason its cache gives and the
float dtypes of the array arguments only."""

import os
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("numba")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KERNELS = '''
import numba
import numpy as np


@numba.njit(cache=True)
def helper(x):
    return x * 2.0


@numba.njit(cache=True)
def kernel(x, scale):
    return helper(x).sum() * scale


@numba.njit
def uncached(x):
    return x.sum()
'''


def run(tmp_path, script, **env):
    """stdout and stderr of `script` run in a fresh process, with tmp_path importable and its own Numba cache."""
    environment = {k: v for k, v in os.environ.items() if k not in ("NUMBA_DISABLE_JIT", "AUTOGRAD_KERNELS")}
    environment.update(NUMBA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]),
                       **env)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                            cwd=ROOT, env=environment, timeout=600)
    assert result.returncode == 0, result.stderr
    return result.stdout, result.stderr


def test_the_reason_is_read_from_numbas_cache(tmp_path):
    """No index: a first build; after one build: other argument types; the source edited:
    changed; a function without cache=True: compiled in every process."""
    (tmp_path / "probe_kernels.py").write_text(KERNELS)
    reasons = """
        import numpy as np
        import probe_kernels as k
        from autograd.kernels.compile_notice import reason
        print(reason(k.kernel))
        k.kernel(np.ones(3, np.float32), 2.0)
        print(reason(k.kernel))
        print(reason(k.uncached))
    """
    said, _ = run(tmp_path, reasons)
    assert said.splitlines() == ["Numba's cache holds no build of it yet (a first run, or a fresh cache)",
                                 "Numba's cache holds builds of it for other argument types only",
                                 "it is not kept in Numba's cache, so every new process compiles it"]
    (tmp_path / "probe_kernels.py").write_text(KERNELS.replace("x * 2.0", "x * 3.0"))
    said, _ = run(tmp_path, "import probe_kernels as k\nfrom autograd.kernels.compile_notice import reason\n"
                            "print(reason(k.kernel))")
    assert said.strip() == "its source file, or Numba, changed since Numba's cache built it"


ANNOUNCED = """
    import sys
    import numpy as np
    from numba.core import event
    from autograd.kernels import compile_notice
    event.register("numba:compile", compile_notice.Announcer({"probe_kernels": ("the probe's", "a moment each")},
                                                             out=sys.stdout))
    import probe_kernels as k
    k.kernel(np.ones(3, np.float32), 2.0)            # kernel, and inside it helper: one line, kernel's
    k.kernel(np.ones((2, 2), np.float32), 2.0)       # another build of the same group: no second line
    k.uncached(np.ones(3))
    import numba
    numba.njit(lambda x: x + 1)(np.ones(2))          # not ours: no line
"""


def test_one_line_for_the_compile_numba_starts_and_none_when_it_loads(tmp_path):
    (tmp_path / "probe_kernels.py").write_text(KERNELS)
    first, _ = run(tmp_path, ANNOUNCED)
    assert first.splitlines() == [
        f"autograd: compiling kernel ({os.path.relpath(tmp_path / 'probe_kernels.py', ROOT)}) for float32 arrays "
        "with Numba now, as Numba's cache holds no build of it yet (a first run, or a fresh cache): a moment each "
        "for the probe's kernels (this one, and any other this run needs compiled); later runs load them from the "
        "cache"]                                     # float32 only: the float64 scale is no array
    again, _ = run(tmp_path, ANNOUNCED.replace("np.ones(3))", "np.ones(3, np.int64))"))
    assert again.splitlines() == [
        f"autograd: compiling uncached ({os.path.relpath(tmp_path / 'probe_kernels.py', ROOT)}) with Numba now, as "
        "it is not kept in Numba's cache, so every new process compiles it: a moment each for the probe's kernels "
        "(this one, and any other this run needs compiled)"]      # kernel and helper loaded from the cache


@pytest.mark.parametrize("dtype, other", [("float32", "float64"), ("float64", "float32")])
def test_a_loop_kernel_new_to_a_warm_cache_is_said_as_such(tmp_path, dtype, other):
    """The loops tier: the cache warm for one dtype, a call in the other is a compile for other
    argument types, not a first run; a process that needs nothing compiled says nothing."""
    call = "import numpy as np\nfrom autograd import kernels\nkernels.softmax(np.ones((2, 3), np.{}))"
    lines = [run(tmp_path, call.format(dtype), AUTOGRAD_KERNELS="loops")[1] for _ in range(2)]
    lines.append(run(tmp_path, call.format(other), AUTOGRAD_KERNELS="loops")[1])
    assert "softmax_loops" in lines[0] and f"for {dtype} arrays" in lines[0] and "no build of it yet" in lines[0]
    assert lines[1] == ""
    assert lines[2].count("\n") == 1 and f"for {other} arrays" in lines[2] and dtype not in lines[2]
    assert "for other argument types only" in lines[2]
