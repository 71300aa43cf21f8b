"""GitHub Classroom's autograding entry point: one test per exercise.

Run from the teacher's project, with the student's repository named by EXERCISES_SUBMISSION:

    EXERCISES_SUBMISSION=../student python -m pytest "exercises/classroom_test.py::test_exercise[NAME]"

The teacher's grader (`python -m exercises check NAMES --project ...`, in a process of its
own: the grader imports nothing of the submission) runs once, on the exercises whose tests
were selected only: `::test_exercise[softmax]` grades softmax and nothing else (`-k softmax`
would select every test whose name holds "softmax": softmax_backward's and log_softmax's too). Each test passes when the
grader's results.json says its exercise passed, and fails with the grader's line otherwise;
reading the results from JSON, not from printed lines, a message cannot pass for another
exercise's line. Teacher-only: not in a student copy.
"""
import json
import os
import subprocess
import sys
import tempfile

import pytest

from exercises.catalog import EXERCISES

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def selected(items):
    """The exercises of the test_exercise items pytest is about to run (after -k), in order."""
    return [item.callspec.params["name"] for item in items
            if getattr(item, "originalname", None) == "test_exercise" and hasattr(item, "callspec")]


def graded(names, submission):
    """{exercise: (passed, the grader's line)} of the teacher's grader run once on `names`, read
    from its results.json; a str saying why there are none (no project, the grader failed)."""
    with tempfile.TemporaryDirectory(prefix="exercises-classroom-") as folder:
        results = os.path.join(folder, "results.json")
        run = subprocess.run([sys.executable, "-m", "exercises", "check", *names, "--project", submission,
                              "--gradescope", results], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": ROOT})
        if not os.path.isfile(results):
            return f"the grader failed: {(run.stderr.strip() or run.stdout.strip())[-500:]}"
        try:
            with open(results) as f:
                report = json.load(f)
        except ValueError as err:
            return f"the grader's results.json could not be read: {err}"
    if not report["tests"]:
        return report.get("output", "the grader graded nothing")
    return {test["name"].split(" ")[0]: (test.get("status") == "passed", test["output"]) for test in report["tests"]}


@pytest.fixture(scope="session")
def grades(request):
    submission = os.environ.get("EXERCISES_SUBMISSION")
    if not submission:
        pytest.fail("set EXERCISES_SUBMISSION to the student's repository (a copy made by python -m exercises make)")
    names = selected(request.session.items)
    print(f"graded {', '.join(names)} of {submission}")
    return graded(names, submission)


@pytest.mark.parametrize("name", list(EXERCISES))
def test_exercise(grades, name):
    if isinstance(grades, str):
        pytest.fail(grades)
    if name not in grades:
        pytest.fail(f"exercise {name}: the grader gave no result for it")
    passed, line = grades[name]
    assert passed, line
