"""Grading a class: a folder of submissions to a CSV and Gradescope's results.json, and the
GitHub Classroom entry point, one test per exercise."""
import csv
import json
import os
import shutil
import subprocess
import sys

import pytest

from exercises.catalog import EXERCISES
from tests.exercises.helpers import ROOT, exercises, plant, solve


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    """Three students: one solved softmax, one planted a mistake, one tampered with the grader."""
    root = tmp_path_factory.mktemp("class")
    status, out = exercises("make", str(root / "template"), "--only", "softmax", "causal_mask")
    assert status == 0, out
    folder = root / "submissions"
    for student in ("ada", "bob", "eve"):
        shutil.copytree(root / "template", folder / student)
    solve(folder / "ada", "softmax")
    plant(folder / "bob", "causal_mask", "    return np.tril(np.ones((length, length), dtype=bool), -1)\n")
    (folder / "eve" / "exercises" / "checks" / "__init__.py").write_text("def run(name):\n    return 'passed', ''\n")
    return folder


def test_grade_writes_a_csv_and_gradescope_results(submissions, tmp_path):
    out, gradescope = tmp_path / "grades.csv", tmp_path / "gradescope"
    status, text = exercises("grade", str(submissions), "--out", str(out), "--gradescope", str(gradescope), "--jobs", "2")
    assert status == 0 and text.strip().endswith(f"wrote {out}") and "graded 3 submissions: 1 of 57" in text, text
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 3 * len(EXERCISES) and set(rows[0]) == {"student", "exercise", "result", "message"}
    result = {(r["student"], r["exercise"]): r for r in rows}
    assert result["ada", "softmax"]["result"] == "passed"
    assert result["ada", "causal_mask"]["result"] == "not yet" and "not started" in result["ada", "causal_mask"]["message"]
    assert result["bob", "causal_mask"]["result"] == "not yet" and "[mistake: diagonal excluded]" in \
        result["bob", "causal_mask"]["message"]
    assert result["eve", "softmax"]["result"] == "not yet" and result["bob", "value_mul"]["result"] == "not in that copy"
    ada = json.loads((gradescope / "ada" / "results.json").read_text())
    assert ada["score"] == 1.0 and len(ada["tests"]) == len(EXERCISES)
    assert sum(t["max_score"] for t in ada["tests"]) == 2.0              # not in that copy: worth 0
    assert ada["tests"][5] == {"name": "softmax", "score": 1.0, "max_score": 1.0, "status": "passed",
                               "output": result["ada", "softmax"]["message"].join(["exercise softmax: passed (", ")"])}
    assert os.access(gradescope / "run_autograder", os.X_OK)
    assert "--gradescope /autograder/results/results.json" in (gradescope / "run_autograder").read_text()


def test_grade_refuses_a_folder_without_submissions(tmp_path):
    status, out = exercises("grade", str(tmp_path / "none"))
    assert status == 2 and "no submission folders in" in out


def test_the_classroom_entry_point_is_one_test_per_exercise(submissions):
    env = {**os.environ, "EXERCISES_SUBMISSION": str(submissions / "ada"), "PYTHONPATH": ROOT}
    run = subprocess.run([sys.executable, "-m", "pytest", "exercises/classroom_test.py", "-p", "no:cacheprovider",
                          "-rA"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert run.returncode == 1
    assert "PASSED exercises/classroom_test.py::test_exercise[softmax]" in run.stdout
    assert "FAILED exercises/classroom_test.py::test_exercise[causal_mask]" in run.stdout
    assert f"{len(EXERCISES) - 1} failed, 1 passed" in run.stdout
