"""Grading a class: a folder of submissions to a CSV and Gradescope's results.json, and the
GitHub Classroom entry point, one test per exercise."""
import csv
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile

import pytest

from exercises.catalog import EXERCISES
from exercises.gradescope import SHIPPED
from exercises.regions import rewrite
from exercises.versions import versions
from tests.exercises.helpers import ROOT, exercises, plant, solve


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    """Three students: one solved softmax, one planted a mistake, one tampered with the grader
    (and added regions of exercises not handed out);
    ada's copy again as a .zip one folder down (zed) and as a folder two down (nia); an older
    copy that handed out softmax only (ole); a folder and a file holding no project (cy, dee.txt)."""
    root = tmp_path_factory.mktemp("class")
    status, out = exercises("make", str(root / "template"), "--only", "softmax", "causal_mask")
    assert status == 0 and out.rstrip().endswith(
        f"grade it with: python -m exercises check softmax causal_mask --project {root / 'template'}"), out
    folder = root / "submissions"
    for student in ("ada", "bob", "eve"):
        shutil.copytree(root / "template", folder / student)
    solve(folder / "ada", "softmax")
    plant(folder / "bob", "causal_mask", "    return np.tril(np.ones((length, length), dtype=bool), -1)\n")
    (folder / "eve" / "exercises" / "checks" / "__init__.py").write_text("def run(name):\n    return 'passed', ''\n")
    with open(folder / "eve" / "autograd" / "scalar.py", "a") as f:   # regions of exercises not handed out,
        f.write("\n\ndef forged():\n    # BEGIN EXERCISE value_mul (version "   # one at the grader's own version
                f"{versions(ROOT)['value_mul']})\n    pass\n"
                "    # END EXERCISE\n    # BEGIN EXERCISE adam_step\n    pass\n    # END EXERCISE\n")
    shutil.make_archive(str(folder / "zed"), "zip", root_dir=folder, base_dir="ada")
    shutil.copytree(folder / "ada", folder / "nia" / "downloads" / "class-copy")
    shutil.copytree(folder / "ada", folder / "ole")
    masks = folder / "ole" / "transformer" / "masks.py"                    # causal_mask solved, its markers gone
    masks.write_text(rewrite(masks.read_text(), lambda indent, name, version, lines: lines[1:-1]
                             if name == "causal_mask" else lines))
    (folder / "cy").mkdir()
    (folder / "cy" / "README.md").write_text("my answers are in my head\n")
    (folder / "dee.txt").write_text("def softmax(x): ...\n")
    return folder


NO_PROJECT = ("no project found: expected a copy of the project (its autograd/, nn/, transformer/ folders) in the "
              "folder, one or two folders down, or in a .zip of it, or the exercise files themselves (scores.py, ...)")


def test_grade_writes_a_csv_and_gradescope_results(submissions, tmp_path):
    out, gradescope = tmp_path / "grades.csv", tmp_path / "gradescope"
    status, text = exercises("grade", str(submissions), "--out", str(out), "--gradescope", str(gradescope), "--jobs", "2")
    totals = tmp_path / "grades-totals.csv"
    assert status == 0 and text.strip().endswith(f"wrote {out} and {totals} (a row per student)"), text
    left = [name for name in EXERCISES if name not in ("softmax", "causal_mask")]
    assert f"not graded, in no more than half the submissions at its version: not handed out, or changed since: " \
           f"17 exercises " \
           f"({', '.join(left)})" in text.splitlines()
    assert ("graded 8 submissions (2 with no project found): 4 of 11 checks passed (1 more not in that copy: "
            "0 points, the rows say why)") in text, text
    assert f"cy: {NO_PROJECT}" in text.splitlines() and "dee.txt: no project found: dee.txt is neither" in text
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 6 * 2 + 2 and set(rows[0]) == {"student", "exercise", "result", "message"}
    result = {(r["student"], r["exercise"]): r for r in rows}
    assert result["ada", "softmax"]["result"] == "passed"
    assert result["ada", "causal_mask"]["result"] == "not yet" and "not started" in result["ada", "causal_mask"]["message"]
    assert result["bob", "causal_mask"]["result"] == "not yet" and "[mistake: diagonal excluded]" in \
        result["bob", "causal_mask"]["message"]
    assert result["eve", "softmax"]["result"] == "not yet" and result["ole", "causal_mask"]["result"] == "not in that copy"
    for twin in ("zed", "nia"):                                            # ada's copy, zipped or two folders down
        assert [result[twin, n]["message"] for n in ("softmax", "causal_mask")] == \
            [result["ada", n]["message"] for n in ("softmax", "causal_mask")]
    assert result["cy", ""]["result"] == "no project found" and result["cy", ""]["message"] == NO_PROJECT[18:]
    by_student = {row["student"]: row for row in csv.DictReader(totals.open())}
    assert list(by_student) == list(dict.fromkeys(r["student"] for r in rows))       # the CSV's order
    for student, row in by_student.items():
        mine = [r for r in rows if r["student"] == student and r["result"] not in ("not in that copy", "no project found")]
        assert (row["passed"], row["softmax"]) == (str(sum(r["result"] == "passed" for r in mine)),
                                                   result.get((student, "softmax"), {"result": "no project found"})["result"])
    assert (by_student["ole"]["of"], by_student["cy"]["of"], by_student["ada"]["of"]) == ("1", "2", "2")
    ada = json.loads((gradescope / "ada" / "results.json").read_text())
    assert ada["score"] == 1.0 and [(t["name"], t["max_score"]) for t in ada["tests"]] == \
        [("softmax", 1.0), ("causal_mask", 1.0)] and "output" not in ada
    ole = json.loads((gradescope / "ole" / "results.json").read_text())
    assert ole["score"] == 1.0 and [t["name"] for t in ole["tests"] if not t["max_score"]] == \
        ["causal_mask (not graded: not in that copy)"]
    assert ole["output"] == "not graded, not in that copy (each test of 0 points below says why): causal_mask"
    assert [t["output"] for t in ole["tests"] if t["name"].startswith("causal_mask ")] == \
        [result["ole", "causal_mask"]["message"].join(["exercise causal_mask: not in that copy: ", ""])]
    assert ada["tests"][0] == {"name": "softmax", "score": 1.0, "max_score": 1.0, "status": "passed",
                               "output": result["ada", "softmax"]["message"].join(["exercise softmax: passed (", ")"])}
    assert json.loads((gradescope / "cy" / "results.json").read_text()) == {"score": 0.0, "tests": [],
                                                                            "output": NO_PROJECT}
    assert os.access(gradescope / "run_autograder", os.X_OK)
    assert '"$python" -m exercises check softmax causal_mask --project' in (gradescope / "run_autograder").read_text()


def test_grade_only_grades_the_exercises_named(submissions, tmp_path):
    status, text = exercises("grade", str(submissions), "--only", "causal_mask", "--out", str(tmp_path / "g.csv"))
    assert status == 0 and "not graded, not given to --only: 18 exercises (value_mul, " in text, text
    rows = list(csv.DictReader((tmp_path / "g.csv").open()))
    assert {r["exercise"] for r in rows} == {"causal_mask", ""} and len(rows) == 6 + 2
    status, text = exercises("grade", str(submissions), "--only", "causal_mask", "value_mul", "--out",
                             str(tmp_path / "g.csv"))
    assert status == 0 and "graded though in no more than half the submissions at its version: value_mul" in text
    status, text = exercises("grade", str(submissions), "--only", "causal", "--out", str(tmp_path / "g.csv"))
    assert status == 2 and "no exercise 'causal'" in text


def test_one_submission_is_one_submission(submissions, tmp_path):
    (tmp_path / "class").mkdir()
    shutil.copytree(submissions / "ada", tmp_path / "class" / "ada")
    status, text = exercises("grade", str(tmp_path / "class"), "--out", str(tmp_path / "grades.csv"))
    assert status == 0 and "graded 1 submission: 1 of 2 checks passed;" in text, text


def _run_autograder(gradescope, tmp_path, submission, source=None):
    """Run the run_autograder script as Gradescope would, /autograder laid out in tmp_path
    (the teacher's project at `source`, by default a copy of what the .zip ships: the script
    makes it root's only, and must not do that to this checkout): (exit status, results.json)."""
    autograder = tmp_path / "autograder"
    autograder.mkdir()
    if source is None:
        source = tmp_path / "source"
        source.mkdir()
        for name in SHIPPED:
            if os.path.isdir(os.path.join(ROOT, name)):
                shutil.copytree(os.path.join(ROOT, name), source / name, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy(os.path.join(ROOT, name), source / name)
    (autograder / "source").symlink_to(source)
    shutil.copytree(submission, autograder / "submission")
    bin_folder = tmp_path / "bin"
    bin_folder.mkdir()
    (bin_folder / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_folder / "python").chmod(0o755)
    env = {**os.environ, "AUTOGRADER": str(autograder), "PATH": f"{bin_folder}:{os.environ['PATH']}"}
    run = subprocess.run(["bash", str(gradescope / "run_autograder")], capture_output=True, text=True, env=env)
    return run.returncode, json.loads((autograder / "results" / "results.json").read_text())


@pytest.mark.parametrize("student", ["cy", "nia", "broken"])
def test_run_autograder_always_leaves_results_that_say_what_happened(submissions, tmp_path, student):
    gradescope = tmp_path / "gradescope"
    exercises("grade", str(submissions / "cy"), "--out", str(tmp_path / "g.csv"), "--gradescope", str(gradescope))
    assert (gradescope / "run_autograder").exists()
    submission = submissions / ("ada" if student == "broken" else student)
    if student == "broken":                                        # the grader itself fails: no source to run
        (gradescope / "run_autograder").write_text((gradescope / "run_autograder").read_text().replace(
            '"$autograder/source"', '"$autograder/nowhere"'))
    mode = os.stat(ROOT).st_mode
    status, results = _run_autograder(gradescope, tmp_path, submission)
    assert status == 0 and os.stat(ROOT).st_mode == mode
    if student == "cy":
        assert results == {"score": 0.0, "tests": [], "output": NO_PROJECT}
    elif student == "nia":
        assert results["score"] == 1.0 and [t["name"] for t in results["tests"] if t["max_score"]] == \
            ["softmax", "causal_mask"]
    else:
        assert results["tests"] == [] and results["output"].startswith("The grader failed before grading")


def test_the_autograder_zip_grades_a_submission_as_gradescope_would(submissions, tmp_path):
    status, text = exercises("autograder", str(tmp_path / "autograder.zip"), "--only", "softmax", "causal_mask")
    assert status == 0 and text.startswith(f"wrote {tmp_path / 'autograder.zip'}: this project ("), text
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(tmp_path / "autograder.zip") as archive:
        names = archive.namelist()
        archive.extractall(unpacked)
    assert names[:2] == ["setup.sh", "run_autograder"] and "exercises/checks/definitions/__init__.py" in names
    assert not [n for n in names if n.split("/")[0] in ("tests", "runs", ".git") or "__pycache__" in n]
    assert subprocess.run(["bash", "-n", str(unpacked / "setup.sh")]).returncode == 0
    status, results = _run_autograder(unpacked, tmp_path, submissions / "ada", source=unpacked)
    assert status == 0 and results["score"] == 1.0 and [t["name"] for t in results["tests"]] == ["softmax", "causal_mask"]
    status, text = exercises("autograder", str(tmp_path / "autograder.tar"))
    assert status == 2 and "expected the name of a .zip to write" in text
    status, text = exercises("autograder", str(tmp_path / "like.zip"), "--like", str(submissions.parent / "template"))
    with zipfile.ZipFile(tmp_path / "like.zip") as archive:
        script = archive.read("run_autograder").decode()
        archive.extractall(tmp_path / "like")
    assert status == 0 and "-m exercises check softmax causal_mask --project" in script, text
    assert '--like "$autograder/source/like"' in script and (tmp_path / "like" / "like" / "exercises" / "handout.json").exists()
    edited = tmp_path / "edited"                   # ada's right copy, causal_mask's version edited on its BEGIN line
    shutil.copytree(submissions / "ada", edited)
    masks = edited / "transformer" / "masks.py"
    masks.write_text(re.sub(r"(# BEGIN EXERCISE causal_mask \(version \w+)\w\)", r"\g<1>z)", masks.read_text()))
    run_in = tmp_path / "like-run"
    run_in.mkdir()
    status, results = _run_autograder(tmp_path / "like", run_in, edited, source=tmp_path / "like")
    scored = {t["name"]: (t["score"], t["output"]) for t in results["tests"] if t["max_score"]}
    assert status == 0 and scored["softmax"][0] == 1 and scored["causal_mask"][0] == 0, results
    assert "as in the copy handed out" in scored["causal_mask"][1], scored
    status, text = exercises("autograder", str(tmp_path / "x.zip"), "--like", str(tmp_path))
    assert status == 2 and "not a student copy made by make" in text, text


def test_a_pipe_closed_early_ends_quietly():
    reader = subprocess.Popen([sys.executable, "-m", "exercises", "list"], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": ROOT})
    reader.stdout.close()                                          # as `| head -3` does before the list is written
    assert reader.wait() in (0, 1) and reader.stderr.read() == b""


def test_grade_refuses_a_folder_without_submissions(tmp_path):
    status, out = exercises("grade", str(tmp_path / "none"))
    assert status == 2 and "no submissions in" in out


def test_the_classroom_entry_point_is_one_test_per_exercise(submissions):
    env = {**os.environ, "EXERCISES_SUBMISSION": str(submissions / "ada"), "PYTHONPATH": ROOT}
    run = subprocess.run([sys.executable, "-m", "pytest", "exercises/classroom_test.py", "-p", "no:cacheprovider",
                          "-rA"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert run.returncode == 1
    assert "PASSED exercises/classroom_test.py::test_exercise[softmax]" in run.stdout
    assert "FAILED exercises/classroom_test.py::test_exercise[causal_mask]" in run.stdout
    assert f"{len(EXERCISES) - 1} failed, 1 passed" in run.stdout


def test_an_exercise_one_of_two_students_wrapped_in_markers_is_not_handed_out(tmp_path):
    """More than half, not half: in a pair, one student's region (its version copied) adds nothing."""
    from exercises.grading import handed_out_in
    region = "def f():\n    # BEGIN EXERCISE value_mul (version 0123456789abcdef)\n    pass\n    # END EXERCISE\n"
    for student, text in (("ann", region), ("ben", "x = 1\n"), ("cal", region)):
        (tmp_path / student / "autograd").mkdir(parents=True)
        (tmp_path / student / "autograd" / "x.py").write_text(text)
    current = {"value_mul": "0123456789abcdef"}
    assert handed_out_in({s: tmp_path / s for s in ("ann", "ben")}, current) == []
    assert handed_out_in({s: tmp_path / s for s in ("ann", "ben", "cal")}, current) == ["value_mul"]
    assert handed_out_in({s: tmp_path / s for s in ("ann", "cal")}, {"value_mul": "another"}) == []


def test_list_shows_one_exercise_a_line_in_aligned_columns():
    status, out = exercises("list")
    lines = out.splitlines()
    assert status == 0 and [line.split()[0] for line in lines] == list(EXERCISES)
    starts = {line.index(EXERCISES[line.split()[0]][0]) for line in lines}     # where each description begins
    assert len(starts) == 1, out
