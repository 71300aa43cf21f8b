"""GitHub Classroom's autograding entry point: one test per exercise.

Run from the teacher's project, with the student's repository named by EXERCISES_SUBMISSION:

    EXERCISES_SUBMISSION=../student python -m pytest exercises/classroom_test.py

Each test passes when the teacher's grader (`python -m exercises check`, run once for all,
in a process of its own: the grader imports nothing of the submission) says the exercise
passed, and fails with the grader's line otherwise. Teacher-only: not in a student copy.
"""
import os
import subprocess
import sys

import pytest

from exercises.catalog import EXERCISES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def grades():
    submission = os.environ.get("EXERCISES_SUBMISSION")
    if not submission:
        pytest.fail("set EXERCISES_SUBMISSION to the student's repository (a copy made by python -m exercises make)")
    run = subprocess.run([sys.executable, "-m", "exercises", "check", "all", "--project", submission], cwd=ROOT,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT})
    lines = [line for line in run.stdout.splitlines() if line.startswith("exercise ")]
    if not lines:
        pytest.fail(f"the grader failed: {run.stderr.strip()[-500:]}")
    return {line.split(":")[0].split()[1]: line for line in lines}


@pytest.mark.parametrize("name", list(EXERCISES))
def test_exercise(grades, name):
    line = grades[name]
    assert line.startswith(f"exercise {name}: passed"), line
