"""Grading runs the teacher's code only: the submission's regions spliced into a pristine
copy, each check in a child process with a time limit; tampering outside the regions
changes no grade; a copy of an older exercise set is graded on what it has."""
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exercises.catalog import EXERCISES
from exercises.regions import line_in_submission, parse, regions_of, rewrite, splice
from tests.exercises.helpers import ROOT, SOLUTIONS, exercises, grade_pairs, plant, solve

ENDLESS = "    while True:\n        pass\n"
SOME = ["value_mul", "topological_sort", "softmax", "softmax_backward", "causal_mask", "sinusoidal", "embedding",
        "heads"]


@pytest.fixture
def student(fresh, tmp_path):
    """A copy with mixed answers: two solved, one wrong, an endless loop, os._exit, a signal,
    a syntax error and one that breaks the module at import time."""
    copy = tmp_path / "student"
    shutil.copytree(fresh, copy)
    solve(copy, "value_mul")
    solve(copy, "causal_mask")
    plant(copy, "softmax_backward", "    return y * dy\n")
    plant(copy, "softmax", ENDLESS)
    plant(copy, "sinusoidal", "    import os\n    os._exit(3)\n")
    plant(copy, "embedding", "    return weight[ids\n")
    plant(copy, "heads", "        import os, signal\n        os.kill(os.getpid(), signal.SIGSEGV)\n", which=0)
    plant(copy, "topological_sort", "    return []\nundefined_at_import_time\n")
    return copy


def grade_lines(copy, *extra):
    status, out = exercises("check", *SOME, "--project", str(copy), "--timeout", "3", *extra)
    return status, out.splitlines()


def test_every_solution_passes_its_check():
    status, out = exercises("check", "all")
    assert status == 0, out
    assert [line.split(":")[0] for line in out.splitlines()] == [f"exercise {name}" for name in EXERCISES]
    assert all(": passed (" in line for line in out.splitlines())


def test_a_fresh_copy_is_not_started_anywhere(fresh):
    status, out = exercises("check", "all", "--project", str(fresh))
    assert status == 1
    assert out.splitlines() == [f"exercise {n}: not yet: not started: the region still raises NotImplementedError"
                                for n in EXERCISES]


def test_each_kind_of_failure_is_one_line_naming_the_exercise(student):
    status, lines = grade_lines(student)
    assert status == 1 and len(lines) == len(SOME), lines
    by_name = dict(zip(SOME, lines))
    assert by_name["value_mul"].startswith("exercise value_mul: passed (")
    assert by_name["causal_mask"].startswith("exercise causal_mask: passed (")
    assert by_name["softmax_backward"].startswith("exercise softmax_backward: not yet: ")
    assert by_name["softmax"] == ("exercise softmax: timed out: timed out after 3 s, the time a check may take "
                                  "(an endless loop, or far slower than it need be?)")
    assert by_name["sinusoidal"] == "exercise sinusoidal: not yet: crashed: the process exited with status 3"
    assert by_name["heads"] == "exercise heads: not yet: crashed: killed by SIGSEGV"
    assert by_name["embedding"].startswith("exercise embedding: not yet: syntax error in nn/functional.py line ")
    assert by_name["topological_sort"].startswith(        # a line at column 0 would run at import: refused, not run
        "exercise topological_sort: not yet: a line of the region in autograd/scalar.py is indented less than the region")


def _tamper(copy):
    """Replace the grader, the tests, conftest.py and code outside the regions of a copy."""
    fake = "def run(name):\n    return 'passed', 'everything'\nCHECKS = {}\n"
    (copy / "exercises" / "checks" / "__init__.py").write_text(fake)
    (copy / "exercises" / "grading.py").write_text("raise SystemExit(0)\n")
    shutil.rmtree(copy / "tests")
    (copy / "conftest.py").write_text("import sys\nsys.exit(0)\n")
    reference = copy / "autograd" / "kernels" / "reference.py"
    reference.write_text(reference.read_text().replace("def _row_max(x):", "def _row_max(x):\n    return 0.0\n\n\ndef _unused(x):"))
    (copy / "autograd" / "__init__.py").write_text("raise ImportError('tampered')\n")
    (copy / "transformer" / "masks.py").write_text((copy / "transformer" / "masks.py").read_text() + "\nimport sys\nsys.exit(0)\n")


def test_tampering_outside_the_regions_changes_no_grade(student):
    untampered = grade_lines(student)
    _tamper(student)
    assert grade_lines(student) == untampered


def test_the_time_limit_is_an_option(student):
    status, out = exercises("check", "softmax", "--project", str(student), "--timeout", "1.5")
    assert status == 1 and out.strip() == ("exercise softmax: timed out: timed out after 1.5 s, the time a check may "
                                           "take (an endless loop, or far slower than it need be?)")


def test_a_copy_of_an_older_exercise_set_is_graded_on_what_it_has(student):
    masks = student / "transformer" / "masks.py"
    text = masks.read_text()
    version = text.split("(version ")[1].split(")")[0]
    masks.write_text(text.replace(version, "0123456789abcdef"))          # causal_mask changed since
    scalar = student / "autograd" / "scalar.py"
    lines = [line for line in scalar.read_text().splitlines(keepends=True) if "EXERCISE value_mul" not in line]
    scalar.write_text("".join(lines))                                    # value_mul added since
    status, out = exercises("check", "causal_mask", "value_mul", "softmax_backward", "--project", str(student))
    causal, value_mul, softmax_backward = out.splitlines()
    assert causal == (f"exercise causal_mask: not in that copy: the copy has version 0123456789abcdef of causal_mask, "
                      f"the grader {version}: it changed since the copy was made, or the version on its "
                      "# BEGIN EXERCISE line was edited")
    assert value_mul == ("exercise value_mul: not in that copy: the copy has no region for value_mul: it was made "
                         "before value_mul was added, or without it (make --only), or its # BEGIN EXERCISE and "
                         "# END EXERCISE lines were removed")
    assert softmax_backward.startswith("exercise softmax_backward: not yet: ")
    assert status == 1 and "Traceback" not in out


def test_check_refuses_an_unknown_exercise_or_project(tmp_path):
    assert exercises("check", "softmax_forward")[1].strip().endswith("python -m exercises list shows them")
    status, out = exercises("check", "softmax", "--project", str(tmp_path))
    assert status == 2 and f"--project {str(tmp_path)!r}: no project found: expected a copy of the project" in out


def test_make_refuses_a_folder_in_use(fresh):
    status, out = exercises("make", str(fresh))
    assert status == 2 and "exists and is not empty" in out
    status, out = exercises("make", str(fresh / "README.md"))
    assert status == 2 and "is a file; expected a new or empty folder" in out


SYNTAX_ERRORS = {    # exercise: (body, the text of its bad line), a region of a file with other regions before it
    "log_softmax": ("    a = 1\n    b = 2\n    c = (a\n    return b\n", "c = (a"),
    "kv_cache": ("            y = 1\n            y = y +\n            z = 3\n", "y = y +"),
    "sinusoidal": ("    return )\n    x = 2\n", "return )"),
}


def _planted_syntax_errors(copy):
    """Plant SYNTAX_ERRORS in the copy, a line added above each file's regions (its line
    numbers are not the teacher's); {exercise: (file, line of the error in the copy's file)}."""
    where = {}
    for name, (body, bad) in SYNTAX_ERRORS.items():
        plant(copy, name, body)
        path = copy / {"log_softmax": "autograd/kernels/reference.py", "kv_cache": "transformer/attention.py",
                       "sinusoidal": "transformer/positional.py"}[name]
        path.write_text("# my notes\n" + path.read_text())
        lines = path.read_text().splitlines()
        where[name] = (str(path.relative_to(copy)), next(i for i, line in enumerate(lines, 1) if bad in line))
    return where


def test_a_syntax_error_is_at_its_line_in_the_student_s_file(fresh, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(fresh, copy)
    where = _planted_syntax_errors(copy)
    status, teacher = exercises("check", *SYNTAX_ERRORS, "--project", str(copy))
    assert status == 1
    status, own = exercises("check", *SYNTAX_ERRORS, cwd=copy)
    assert status == 1
    for name, (path, line) in where.items():
        expected = f"exercise {name}: not yet: syntax error in {path} line {line}: "
        assert [x for x in teacher.splitlines() if x.startswith(expected)] != [], (expected, teacher)
        assert [x for x in own.splitlines() if x.startswith(expected)] != [], (expected, own)


BALLAST = "    _ballast = np.ones(600 * 2 ** 20, dtype=np.uint8)  # 600 MB\n"


def test_a_check_that_needs_more_memory_than_the_limit_is_one_line(fresh, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(fresh, copy)
    plant(copy, "softmax", lambda solution: BALLAST + solution)
    plant(copy, "log_softmax", lambda solution: BALLAST + solution)
    plant(copy, "causal_mask", lambda solution: solution)
    for where, cwd in ((("--project", str(copy)), ROOT), ((), copy)):           # the teacher's grade, the copy's
        status, out = exercises("check", "softmax", "log_softmax", "causal_mask", "--memory", "500", *where, cwd=cwd)
        lines = [line for line in out.splitlines() if line.startswith("exercise ")]
        expected = [f"exercise {n}: not yet: used more than 500 MB of memory (the limit is --memory)"
                    for n in ("softmax", "log_softmax")]
        if not where:        # the copy's own check: log_softmax's check ran the learner's softmax, which failed
            expected[1] += (" (its check runs your softmax, which does not pass yet: the teacher's grade runs the "
                            "solution there; check that first)")
        assert status == 1 and lines[:2] == expected, out
        assert lines[2].startswith("exercise causal_mask: passed (")
    status, out = exercises("check", "softmax", "log_softmax", "--project", str(copy))      # the default leaves room
    assert status == 0 and "--memory" not in out, out
    status, out = exercises("check", "softmax", "--memory", "0")
    assert status == 2 and "--memory and --timeout must be positive" in out


def _layout_text(layout, mine, notes):
    """A file of len(layout) regions (named e0, e1 alternately), each body the teacher's
    (layout[i][0] lines) or, if mine, the student's (layout[i][1] lines, each unique), after
    `notes` lines of the student's own above the first."""
    lines = ["# my notes\n"] * notes if mine else []
    for i, (theirs, ours) in enumerate(layout):
        lines += [f"def f{i}():\n", f"    # BEGIN EXERCISE e{i % 2}\n"]
        lines += [f"    s{i}_{j} = {j}\n" for j in range(ours)] if mine else [f"    t = {j}\n" for j in range(theirs)]
        lines += ["    # END EXERCISE\n", "\n"]
    return "".join(lines)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 5)), min_size=1, max_size=5), st.integers(0, 4))
def test_every_line_spliced_in_maps_to_its_line_in_the_student_s_file(layout, notes):
    student = _layout_text(layout, True, notes)
    regions = parse(student)
    spliced = _layout_text(layout, False, 0)
    for name in ("e0", "e1"):
        spliced = splice(spliced, name, ["".join(body) for n, _, _, _, body in regions if n == name])
    origins = {name: [("autograd/f.py", first, last) for n, _, first, last, _ in regions if n == name]
               for name in ("e0", "e1")}                                    # as find_regions gives them
    where = {line: number for number, line in enumerate(student.splitlines(), 1)}
    for number, line in enumerate(spliced.splitlines(), 1):
        if line.startswith("    s"):
            assert line_in_submission(spliced, number, origins) == ("autograd/f.py", where[line])


def test_a_region_removed_from_a_current_copy_fails_and_a_half_written_exercise_is_not_finished(fresh, tmp_path):
    """Attention has two regions. A copy at the grader's version whose file of one was deleted
    fails the exercise, naming that file (it is not 'not in that copy', worth nothing); so does
    one whose markers around one region were removed; a copy with one region written and the
    other still the stub is 'not finished', naming the stub's file, in the grade and in the
    learner's own check."""
    files = [path for path, _, _ in SOLUTIONS["attention"]]
    missing, unmarked, half = tmp_path / "missing", tmp_path / "unmarked", tmp_path / "half"
    for copy in (missing, unmarked, half):
        shutil.copytree(fresh, copy)
    solve(missing, "attention")
    (missing / files[0]).unlink()
    solve(unmarked, "attention")
    (unmarked / files[0]).write_text(rewrite((unmarked / files[0]).read_text(),
                                             lambda indent, name, version, lines: lines[1:-1] if name == "attention"
                                             else lines))
    stub = regions_of(fresh)["attention"][1][2]
    plant(half, "attention", stub, which=1)                   # the first region solved, the second the stub
    lines = grade_pairs({"missing": missing, "unmarked": unmarked, "half": half}, ["attention"])
    assert lines[("missing", "attention")] == f"exercise attention: not yet: not handed in: {files[0]}, where " \
                                              "attention is written"
    assert lines[("unmarked", "attention")] == (
        f"exercise attention: not yet: its region in {files[0]} is missing: the copy's other region of attention is "
        "at the grader's version, so the file or the region's # BEGIN EXERCISE and # END EXERCISE lines were removed")
    unfinished = f"exercise attention: not yet: not finished: its region in {files[1]} still raises NotImplementedError"
    assert lines[("half", "attention")] == unfinished
    status, out = exercises("check", "attention", cwd=half)
    assert status == 1 and out.splitlines()[1] == unfinished, out
