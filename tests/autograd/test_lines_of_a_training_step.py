"""How much classroom code one GPT training step runs (demos/bench/lines.py): at most 470
distinct lines outside the engine room, 40 in engine.py.  (The first target was 450; the
step then ran 451.  Grouped-query attention's tests of the heads in the attention (7 lines
a step runs) and the Tensor graph walked by the scalar engine's topological_order, the
topological_sort exercise's region (11 lines in scalar.py for 4 fewer in engine.py),
brought it to 466: both are code a learner reads anyway.)"""

import json
import os
import subprocess
import sys

from tests.helpers import ENGINE_ROOM

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOST_LINES, MOST_ENGINE_LINES = 470, 40
WITHOUT_ENGINE_ROOM = ("autograd: the engine room (autograd/engine_room/) cannot be loaded (the folder is absent); "
                       "running the loops tier instead")


def run_lines(tmp_path, **env):
    environment = {k: v for k, v in os.environ.items() if k not in ("AUTOGRAD_KERNELS", "NUMBA_DISABLE_JIT")}
    return subprocess.run([sys.executable, "-m", "demos.bench.lines", "--json", str(tmp_path / "lines.json")],
                          capture_output=True, text=True, cwd=ROOT, env=dict(environment, **env), timeout=600)


def test_one_gpt_step_runs_few_classroom_lines(tmp_path):
    result = run_lines(tmp_path, NUMBA_DISABLE_JIT="1")
    assert result.returncode == 0, result.stderr
    counted = json.loads((tmp_path / "lines.json").read_text())
    by_file = counted["by_file"]
    # the trace saw the whole step: the engine, the loops tier's kernels, an optimizer, attention
    assert {os.path.join("autograd", "engine.py"), os.path.join("autograd", "kernels", "loops.py"),
            os.path.join("nn", "optim.py"), os.path.join("transformer", "attention.py")} <= set(by_file)
    assert not any(path.startswith(os.path.join("autograd", "engine_room")) for path in by_file)
    assert counted["lines"] == sum(by_file.values()) and counted["files"] == len(by_file)
    assert counted["engine_py_lines"] == by_file[os.path.join("autograd", "engine.py")]
    assert 300 < counted["lines"] <= MOST_LINES, by_file
    assert 20 < counted["engine_py_lines"] <= MOST_ENGINE_LINES


def test_counting_with_the_jit_on_is_refused_in_one_line(tmp_path):
    """One line of its own; without the engine room the registry's one line says so first."""
    result = run_lines(tmp_path)
    assert result.returncode != 0
    lines = result.stderr.strip().split("\n")
    assert lines[-1] == "demos.bench.lines: run with NUMBA_DISABLE_JIT=1 (the loops tier, as a learner steps through it)"
    assert lines[:-1] == ([] if ENGINE_ROOM else [WITHOUT_ENGINE_ROOM]), result.stderr
