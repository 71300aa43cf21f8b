"""demos.bench.first_run: timing a demo to its first progress line, then stopping it."""

import os
import sys
import time

import pytest

from demos.bench.first_run import time_to_progress


def fake_demo(tmp_path, monkeypatch, body):
    (tmp_path / "fake_demo.py").write_text("import sys, time\n" + body)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))


def test_times_the_compile_and_the_first_progress_line_then_stops_the_run(tmp_path, monkeypatch):
    fake_demo(tmp_path, monkeypatch, "time.sleep(0.3)\nprint('autograd: the kernels compiled in 0 s', file=sys.stderr, "
                                     "flush=True)\ntime.sleep(0.3)\nprint('step 1  loss 2.0', flush=True)\n"
                                     "time.sleep(60)\n")
    started = time.perf_counter()
    compiled, first = time_to_progress(["fake_demo"], str(tmp_path / "cache"), str(tmp_path / "out"), one_core=False)
    assert 0.3 <= compiled < first < 30
    assert time.perf_counter() - started < 30                  # stopped, not waited for its minute


def test_a_run_pinned_to_one_core_runs_on_one_core(tmp_path, monkeypatch):
    fake_demo(tmp_path, monkeypatch, "import os\nassert len(os.sched_getaffinity(0)) == 1\nprint('step 1')\n")
    assert time_to_progress(["fake_demo"], str(tmp_path), str(tmp_path), one_core=True)[0] is None   # no compile line


def test_a_run_without_progress_is_reported(tmp_path, monkeypatch):
    fake_demo(tmp_path, monkeypatch, "sys.exit(3)\n")
    with pytest.raises(SystemExit, match="fake_demo ended without a progress line \\(exit status 3\\)"):
        time_to_progress(["fake_demo"], str(tmp_path), str(tmp_path), one_core=False)
