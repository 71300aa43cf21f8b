"""demos.bench.grading on a tiny class: every solved submission passes every check."""

import subprocess
import sys

from exercises.catalog import EXERCISES


def test_a_tiny_class_is_graded_and_every_solved_check_passes():
    run = subprocess.run([sys.executable, "-m", "demos.bench.grading", "--students", "2", "--jobs", "2"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
    count = 2 * len(EXERCISES)
    assert run.stdout.startswith(f"graded 2 submissions, {count} checks ({count} passed) with 2 jobs, isolated in "), run.stdout
    assert run.stdout.rstrip().endswith("checks/s")
