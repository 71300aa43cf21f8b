"""The grades written: an exercise not in a copy is shown to the student with its reason (a
Gradescope test of 0 points, a CSV row), and no cell or results.json text grows with what a
check's message holds."""
import csv
import json
import os
import shutil
import subprocess
import sys

import pytest

from exercises import reports
from exercises.grading import NO_PROJECT, NOT_IN_COPY, Result
from exercises.regions import SKIPPED, SOURCES
from exercises.reports import CAP, capped, gradescope, write_csv, write_gradescope, write_gradescope_class
from tests.exercises.helpers import ROOT, plant

WHY = ("the copy has version 1f3a9c0e2b7d4a15 of causal_mask, the grader 0b7e2c4d8a1f9e36: it changed since the "
       "copy was made")


def _results(student="ada", message="softmax: 3 cases"):
    return [Result(student, "softmax", "passed", message),
            Result(student, "causal_mask", NOT_IN_COPY, WHY),
            Result(student, "linear", "not yet", "W not transposed: y = x W^T"),
            Result(student, "heads", "timed out", "ran over 20 s")]


def test_an_exercise_not_in_the_copy_is_a_test_of_no_points_naming_why():
    report = gradescope(_results())
    by_name = {t["name"]: t for t in report["tests"]}
    assert list(by_name) == ["softmax", "linear", "heads", "causal_mask (not graded: not in that copy)"]  # graded 1st
    absent = by_name["causal_mask (not graded: not in that copy)"]
    assert absent == {"name": "causal_mask (not graded: not in that copy)", "score": 0.0, "max_score": 0.0,
                      "output": f"exercise causal_mask: not in that copy: {WHY}"}
    assert [(t["score"], t["max_score"], t.get("status")) for t in report["tests"]] == [
        (1.0, 1.0, "passed"), (0.0, 1.0, "failed"), (0.0, 1.0, "failed"), (0.0, 0.0, None)]
    assert report["score"] == 1.0 and sum(t["max_score"] for t in report["tests"]) == 3.0
    assert report["output"] == "not graded, not in that copy (each test of 0 points below says why): causal_mask"


def test_a_copy_with_every_exercise_has_no_output_and_every_test_is_worth_one():
    report = gradescope([r for r in _results() if r.status != NOT_IN_COPY])
    assert "output" not in report and [t["max_score"] for t in report["tests"]] == [1.0, 1.0, 1.0]


def test_the_csv_has_a_row_for_the_exercise_not_in_the_copy_with_its_reason(tmp_path):
    write_csv(_results(), tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == ["student", "exercise", "result", "message"]
    assert ["ada", "causal_mask", NOT_IN_COPY, WHY] in rows and len(rows) == 5


def test_the_totals_have_a_row_per_student_counting_only_what_was_in_their_copy(tmp_path):
    names = ["softmax", "causal_mask", "linear", "heads"]
    results = [*_results("ada"), *[Result("bo", name, "passed", "") for name in names],
               Result("=cy", "", NO_PROJECT, "expected a copy of the project")]
    path = tmp_path / "grades-totals.csv"
    reports.write_totals(results, names, path)
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [["student", "passed", "of", *names],
                    ["ada", "1", "3", "passed", NOT_IN_COPY, "not yet", "timed out"],
                    ["bo", "4", "4", "passed", "passed", "passed", "passed"],
                    ["'=cy", "0", "4", *[NO_PROJECT] * 4]]
    assert reports.totals_path("out/grades.csv") == "out/grades-totals.csv"
    assert reports.totals_path("marks") == "marks-totals.csv"


@pytest.mark.parametrize("student", ["=HYPERLINK(\"http://x\",\"ada\")", "+1", "-2+3", "@SUM(A1)", "\t=1"])
def test_a_csv_cell_a_spreadsheet_would_run_as_a_formula_is_quoted(tmp_path, student):
    write_csv([Result(student, "softmax", "passed", "=1+1 in 3 cases")], tmp_path / "grades.csv")
    with open(tmp_path / "grades.csv", newline="") as f:
        assert list(csv.reader(f))[1] == ["'" + student, "softmax", "passed", "'=1+1 in 3 cases"]


@pytest.mark.parametrize("extra, shown", [(0, None), (1, "... (1 character cut)"), (7, "... (7 characters cut)")])
def test_capped_keeps_cap_characters_and_says_how_many_were_cut(extra, shown):
    text = "".join(chr(ord("a") + i % 26) for i in range(CAP + extra))
    assert capped(text) == (text if shown is None else text[:CAP] + shown)


@pytest.mark.parametrize("seed", [0, 1])
def test_a_50_mb_message_is_capped_in_the_csv_and_in_results_json(tmp_path, seed):
    huge = ("x" if seed == 0 else "é\n,\"") * (50 * 2 ** 20 // (1 if seed == 0 else 4))
    results = [Result("eve" * (CAP if seed else 1), "softmax", "not yet", f"raised ValueError: {huge}"),
               Result("eve" * (CAP if seed else 1), "linear", NOT_IN_COPY, huge)]
    write_csv(results, tmp_path / "grades.csv")
    write_gradescope(results, tmp_path / "eve" / "results.json")
    with open(tmp_path / "grades.csv", newline="") as f:
        cells = [cell for row in csv.reader(f) for cell in row]
    longest = CAP + len(f"... ({2 * len(huge) + 100} characters cut)")     # a printed line indents each newline
    assert max(len(c) for c in cells) <= longest
    assert any(c.startswith("raised ValueError: ") and c.endswith(" characters cut)") for c in cells)
    report = json.loads((tmp_path / "eve" / "results.json").read_text())
    assert all(len(t["output"]) <= longest for t in report["tests"]) and len(report["output"]) <= longest
    assert (tmp_path / "eve" / "results.json").stat().st_size < 20 * CAP
    assert (tmp_path / "grades.csv").stat().st_size < 20 * CAP


def test_a_submission_with_no_project_has_its_output_capped_and_the_class_gets_one_file_each(tmp_path):
    why = "expected a copy of the project " + "y" * (3 * CAP)
    results = _results("ada") + [Result("bob", "", NO_PROJECT, why)]
    write_gradescope_class(results, tmp_path, ["softmax"])
    ada = json.loads((tmp_path / "ada" / "results.json").read_text())
    bob = json.loads((tmp_path / "bob" / "results.json").read_text())
    assert ada == gradescope(_results("ada"))
    assert bob["tests"] == [] and bob["score"] == 0.0 and bob["output"] == capped(f"{NO_PROJECT}: {why}")
    assert bob["output"].endswith(f"... ({len(why) + len(NO_PROJECT) + 2 - CAP} characters cut)")
    assert reports.summary(results, "grades.csv").startswith("graded 2 submissions (1 with no project found)")


def _classroom(submission, *args):
    """(exit status, output) of GitHub Classroom's entry point run on a submission with pytest ARGS."""
    env = {**os.environ, "EXERCISES_SUBMISSION": str(submission), "PYTHONPATH": ROOT}
    run = subprocess.run([sys.executable, "-m", "pytest", "exercises/classroom_test.py", "-p", "no:cacheprovider",
                          "-rA", *args], cwd=ROOT, capture_output=True, text=True, env=env)
    return run.returncode, run.stdout + run.stderr


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """A submission as small as it gets: the teacher's source packages, every exercise solved."""
    folder = tmp_path_factory.mktemp("classroom") / "ada"
    for package in SOURCES:
        shutil.copytree(os.path.join(ROOT, package), folder / package,
                        ignore=lambda _, names: [n for n in names if n in SKIPPED])
    return folder


def test_the_classroom_entry_point_grades_only_the_exercises_selected(solved):
    status, out = _classroom(solved, "-k", "softmax and not backward and not log")
    assert status == 0 and "1 passed, 18 deselected" in out, out
    assert f"graded softmax of {solved}" in out and "PASSED exercises/classroom_test.py::test_exercise[softmax]" in out


def test_the_classroom_node_id_the_docs_give_selects_one_exercise(solved):
    """`-k softmax` would select softmax_backward's and log_softmax's tests too."""
    env = {**os.environ, "EXERCISES_SUBMISSION": str(solved), "PYTHONPATH": ROOT}
    run = subprocess.run([sys.executable, "-m", "pytest", "exercises/classroom_test.py::test_exercise[softmax]",
                          "-p", "no:cacheprovider", "-rA"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert run.returncode == 0 and "1 passed" in run.stdout and f"graded softmax of {solved}" in run.stdout, run.stdout


def test_a_message_written_as_another_passed_line_does_not_pass_in_the_classroom(solved, tmp_path):
    eve = tmp_path / "eve"
    shutil.copytree(solved, eve)
    plant(eve, "causal_mask", '    raise ValueError("\\nexercise causal_mask: passed (every case)\\n")\n')
    status, out = _classroom(eve, "-k", "causal_mask or value_mul")
    assert status == 1 and "1 failed, 1 passed, 17 deselected" in out, out
    assert f"graded value_mul, causal_mask of {eve}" in out
    assert "FAILED exercises/classroom_test.py::test_exercise[causal_mask]" in out
    assert "AssertionError: exercise causal_mask: not yet: raised ValueError" in out


def test_a_refused_student_named_as_the_script_gets_no_folder_and_the_script_is_written(tmp_path):
    """A submission named run_autograder once made --gradescope end in IsADirectoryError."""
    results = _results("ada") + [Result("run_autograder", "", NO_PROJECT, "rename the entry to grade it")]
    write_gradescope_class(results, tmp_path, ["softmax"])
    assert (tmp_path / "run_autograder").is_file() and (tmp_path / "ada" / "results.json").is_file()


def test_the_grader_s_own_lines_head_a_results_json_s_output():
    """An isolation by process only, said on stdout, is said where Gradescope shows it too."""
    note = "isolation by process only: a submission's code runs with your rights"
    graded = [r for r in _results("ada") if r.status != NOT_IN_COPY]
    assert gradescope(graded, [note])["output"] == note and "output" not in gradescope(graded)
    assert gradescope(_results("ada"), [note])["output"].split("\n") == [note, gradescope(_results("ada"))["output"]]
