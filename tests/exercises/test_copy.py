"""The student copy: no solution of an exercise handed out, in any form (searched for
through every file, decompressed and decoded); `make --only` hands out some and leaves the
rest solved; the copy checks itself, in any order, and its own tests stay green."""
import ast
import base64
import binascii
import bz2
import gzip
import io
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import zipfile
import zlib

import pytest

from exercises.catalog import EXERCISES, TESTS_THAT_REVEAL
from exercises.regions import regions_of
from tests.exercises.helpers import ROOT, SOLUTIONS, exercises, plant, solve

# Lines of a solution that are also everyday code elsewhere, giving nothing away.
GENERIC = {"pos = np.arange(max_len)[:, None]"}     # transformer/positional.py's binary_table starts so too


def solution_lines(names):
    """{line: exercise} of the solutions' lines long enough to be an answer (comments cut)."""
    lines = {}
    for name in names:
        for _, _, body in SOLUTIONS[name]:
            for line in body.splitlines():
                code = line.split("  #")[0].strip()
                if len(code) > 20 and code not in GENERIC:
                    lines[code] = name
    return lines


def _decompressed(data):
    for method in (gzip.decompress, zlib.decompress, bz2.decompress, lzma.decompress):
        try:
            yield method(data)
        except Exception:                                       # noqa: BLE001  not in that format
            pass
    if zipfile.is_zipfile(io.BytesIO(data)):
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            for member in archive.namelist():
                yield archive.read(member)


def _decoded(data):
    text = data.decode("latin-1")
    for token in re.findall(r"[A-Za-z0-9+/=_-]{24,}", text):
        for decode in (base64.b64decode, base64.urlsafe_b64decode):
            try:
                yield decode(token + "=" * (-len(token) % 4))
            except (binascii.Error, ValueError):
                pass
    for token in re.findall(r"(?:[0-9a-fA-F]{2}){12,}", text):
        yield bytes.fromhex(token)


def readable_forms(data, depth=2):
    """The bytes of a file and everything they decompress or decode to, a few layers deep."""
    yield data
    if depth:
        for inner in list(_decompressed(data)) + list(_decoded(data)):
            yield from readable_forms(inner, depth - 1)


def solutions_found(copy, names):
    """[(file, exercise, line)] of solution lines of `names` found anywhere in the copy."""
    lines, found = solution_lines(names), []
    for folder, _, files in os.walk(copy):
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                forms = [form.decode("utf-8", "replace") for form in readable_forms(f.read())]
            found += [(os.path.relpath(path, copy), exercise, line) for line, exercise in lines.items()
                      if any(line in form for form in forms)]
    return found


def test_the_search_finds_a_solution_hidden_in_any_of_those_forms(tmp_path):
    line = next(iter(solution_lines(["softmax_backward"])))
    hidden = base64.b64encode(gzip.compress(line.encode())).decode()
    (tmp_path / "a.txt").write_text(f"x = '{hidden}'\n")
    (tmp_path / "b.bin").write_bytes(lzma.compress(line.encode().hex().encode()))
    with zipfile.ZipFile(tmp_path / "c.zip", "w") as archive:
        archive.writestr("inner.gz", bz2.compress(line.encode()))
    assert sorted(f for f, _, _ in solutions_found(tmp_path, ["softmax_backward"])) == ["a.txt", "b.bin", "c.zip"]


def test_a_fresh_copy_holds_no_solution_in_any_form(fresh):
    assert solutions_found(fresh, list(EXERCISES)) == []
    for teacher_only in ("tests/exercises", "exercises/checks/definitions", "exercises/solutions.sealed"):
        assert not (fresh / teacher_only).exists()
    revealing = {path for paths in TESTS_THAT_REVEAL.values() for path in paths}
    assert revealing >= {"tests/nn/test_optim.py", "tests/transformer/test_gpt.py", "tests/nn/test_layers.py"}
    assert [path for path in revealing if (fresh / path).exists()] == []
    helpers = ("def numpy_attention", "def _numpy_cross_entropy", "(m / (1 - b1 ** t))", "pos / 10000 ** (2 * i")
    assert [(path, h) for path in (fresh / "tests").rglob("*.py") for h in helpers if h in path.read_text()] == []
    assert (fresh / "exercises" / "checks" / "expected.npz").exists()
    made = json.loads((fresh / "exercises" / "as_made.json").read_text())     # its text read, not its JSON escapes
    assert made == {path: (fresh / path).read_text() for path in made} and "autograd/scalar.py" in made
    assert [(path, line) for path, text in made.items() for line in solution_lines(EXERCISES) if line in text] == []


def test_make_only_hands_out_some_and_leaves_the_rest_solved(tmp_path):
    copy = tmp_path / "some"
    status, out = exercises("make", str(copy), "--only", "softmax", "causal_mask")
    assert status == 0 and "2 of 19 exercises cut out of 2 files;" in out, out      # reference.py, masks.py
    assert sorted(regions_of(str(copy))) == ["causal_mask", "softmax"]
    handout = json.loads((copy / "exercises" / "handout.json").read_text())
    assert list(handout["handed_out"]) == ["softmax", "causal_mask"] and len(handout["solved"]) == 17
    assert solutions_found(copy, ["softmax", "causal_mask"]) == []
    pages = {f"docs/reading/{step}.{kind}": ["softmax", "causal_mask"] for step in ("gpt_step", "seq2seq_step")
             for kind in ("md", "html")}                                       # each shows both regions solved
    pages.update({f"docs/reading/loops_tier.{kind}": ["softmax"] for kind in ("md", "html")})   # softmax's loops
    assert handout["tests_left_out"] == {"tests/transformer/test_gpt.py": ["softmax", "causal_mask"],
                                         "notebooks/03_attention_by_hand.py": ["softmax"],    # softmax by hand
                                         **pages, "tests/demos/test_reading.py": ["softmax", "causal_mask"]}
    assert (copy / "docs" / "reading" / "scalar_backward.md").exists()         # Value's backward: not handed out
    assert "](docs/reading/gpt_step.md)" not in (copy / "README.md").read_text()
    assert "](reading/gpt_step.html)" not in (copy / "docs" / "LEARNING_PATH.md").read_text()
    assert not (copy / "tests" / "transformer" / "test_gpt.py").exists()       # its numpy GPT: np.tril, softmax
    assert (copy / "tests" / "nn" / "test_optim.py").exists()                  # Adam's answer: not handed out
    status, out = exercises("check", "all", "--project", str(copy))
    lines = out.splitlines()
    assert status == 1 and len(lines) == 19
    assert [line.split(":")[0] for line in lines if ": not in that copy: " in line] == \
        [f"exercise {n}" for n in EXERCISES if n not in ("softmax", "causal_mask")]
    status, out = exercises("make", str(tmp_path / "again"), cwd=copy)
    assert status == 2 and "making copies needs the teacher's project" in out
    status, out = exercises("list", cwd=copy)
    assert "(solved in this copy)" in out.splitlines()[0] and "transformer/masks.py" in out
    status, out = exercises("check", "all", cwd=copy)                 # in the copy: the two handed out, no more
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("exercise ")] == \
        ["exercise softmax", "exercise causal_mask"], out


def test_value_mul_checks_first_with_topological_sort_not_done(fresh, tmp_path):
    """The first exercise listed needs no other: its check walks the graph in the order it was
    made, not through backward() (whose topological_order is the next exercise)."""
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(fresh), str(copy)], check=True)
    solve(copy, "value_mul")
    status, out = exercises("check", "value_mul", cwd=copy)
    assert status == 0 and out.splitlines()[1].startswith("exercise value_mul: passed ("), out
    plant(copy, "value_mul", lambda body: body.replace("+=", "=", 1))
    status, out = exercises("check", "value_mul", cwd=copy)
    assert status == 1 and "[mistake: = instead of +=]" in out, out


def test_the_copy_checks_itself_in_any_order(fresh, tmp_path):
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(fresh), str(copy)], check=True)
    solve(copy, "attention")
    plant(copy, "softmax_backward", "    return y * dy\n")
    solve(copy, "causal_mask")
    status, out = exercises("check", "attention", "softmax_backward", "causal_mask", "heads", "value_mul", cwd=copy)
    lines = out.splitlines()
    assert status == 1 and lines[0].startswith(f"checked the copy at {copy} against the results recorded"), out
    assert lines[1] == ("exercise attention: not yet: needs exercise softmax, which this copy has not done yet: do it "
                        "first (the teacher's grade uses its solution)")
    assert lines[2].startswith("exercise softmax_backward: not yet: ") and "[mistake: no subtraction]" in lines[2]
    assert "its check runs your" not in lines[2]
    assert lines[3].startswith("exercise causal_mask: passed (")
    assert lines[4] == "exercise heads: not yet: not started: the region still raises NotImplementedError"
    assert lines[5] == "exercise value_mul: not yet: not started: the region still raises NotImplementedError"
    assert lines[6].startswith("outstanding in this copy: value_mul, topological_sort, ")   # not: needs topological_sort
    assert "causal_mask" not in lines[6] and "attention" not in lines[6]
    status, out = exercises("check", "attention", "causal_mask", "--project", str(copy))
    assert out.splitlines()[0].startswith("exercise attention: passed (")   # the teacher's grade: softmax solved


def test_a_check_that_fails_names_the_learner_s_exercise_it_runs_that_fails_too(fresh, tmp_path):
    """In a copy, attention's check runs the learner's softmax_backward (the teacher's grade,
    its solution): a wrong one is named beside attention's failure, a right one is not."""
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-r", str(fresh), str(copy)], check=True)
    for name in ("softmax", "attention", "matmul_backward", "topological_sort", "value_mul", "unbroadcast"):
        solve(copy, name)
    plant(copy, "softmax_backward", "    return y * dy\n")
    status, out = exercises("check", "attention", "softmax_backward", cwd=copy)
    lines = out.splitlines()
    assert status == 1 and lines[1].startswith("exercise attention: not yet: "), out
    assert lines[1].endswith("(its check runs your softmax_backward, which does not pass yet: the teacher's grade runs "
                             "the solution there; check that first)"), out
    plant(copy, "softmax_backward", "    while True:\n        pass\n")      # a time-out is named the same way
    status, out = exercises("check", "attention", "softmax_backward", "--timeout", "3", cwd=copy)
    lines = out.splitlines()
    assert lines[1].startswith("exercise attention: timed out: timed out after 3 s"), out
    assert lines[1].endswith("(its check runs your softmax_backward, which does not pass yet: the teacher's grade "
                             "runs the solution there; check that first)"), out
    solve(copy, "softmax_backward")
    status, out = exercises("check", "attention", "softmax_backward", cwd=copy)
    assert status == 0 and "its check runs your" not in out, out


def test_the_copy_test_suite_skips_what_needs_an_exercise_naming_it(fresh):
    env = {**os.environ, "PYTHONPATH": str(fresh), "AUTOGRAD_KERNELS": "numpy", "NUMBA_DISABLE_JIT": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "tests/autograd/test_scalar.py", "tests/test_learning_path.py",
                          "-k", "scalar or greedy_decode", "-p", "no:cacheprovider", "-rs"], cwd=fresh,
                         capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stdout[-3000:]
    assert "needs exercise value_mul (not done yet)" in run.stdout or "needs exercise topological_sort" in run.stdout
    assert "needs exercise greedy_decode (not done yet)" in run.stdout          # a debugger walk into a cut region
    assert "exercises outstanding: " in run.stdout and " failed" not in run.stdout


def test_the_copy_test_suite_skips_what_needs_the_teacher_a_left_out_file_or_a_child_s_exercise(fresh):
    env = {**os.environ, "PYTHONPATH": str(fresh), "AUTOGRAD_KERNELS": "numpy", "NUMBA_DISABLE_JIT": "1"}
    run = subprocess.run([sys.executable, "-m", "pytest", "tests/demos/bench/test_grading.py", "-p", "no:cacheprovider",
                          "tests/transformer/test_resume_and_inputs.py::test_ctrl_c_writes_everything_and_exits_130",
                          "-rs"], cwd=fresh, capture_output=True, text=True, env=env)
    assert run.returncode == 0 and " failed" not in run.stdout, run.stdout[-3000:]
    assert "test_grading.py:8: needs the teacher's project: not a student copy's" in run.stdout
    assert "test_resume_and_inputs.py:49: needs exercise sinusoidal (not done yet)" in run.stdout   # the child's
    assert f"exercises outstanding: {', '.join(EXERCISES)} (the tests" in run.stdout     # all, in the lectures' order
    reason = subprocess.run([sys.executable, "-c", "from exercises.outstanding import skip_reason; "
                             "print(skip_reason('ERROR: file or directory not found: tests/nn/test_optim.py'))"],
                            cwd=fresh, capture_output=True, text=True, env=env)
    assert reason.stdout == "needs tests/nn/test_optim.py, left out of this copy: it gives exercise adam_step away\n"


LOWER = "np.tril(np.ones((length, length), dtype=bool))"
OUTSIDE = {   # how an answer leans on code outside its region: (file, its text -> the new text, the region's body)
    "a helper above the region": ("transformer/masks.py", lambda text: text.replace(
        "def causal_mask(", f"def _lower(length):\n    return {LOWER}\n\n\ndef causal_mask("), "    return _lower(length)\n"),
    "an edited import": ("transformer/masks.py", lambda text: text.replace(
        "import numpy as np\n", "import numpy as np\nfrom numpy import tril\n"),
        "    return tril(np.ones((length, length), dtype=bool))\n"),
    "a module added": ("transformer/lower.py", lambda text: f"import numpy as np\n\n\ndef lower(length):\n"
                       f"    return {LOWER}\n", "    from transformer.lower import lower\n    return lower(length)\n"),
    "a comment, the answer in the region": ("transformer/masks.py", lambda text: "# mine\n" + text,
                                           f"    return {LOWER}\n"),
    "a module deleted, the answer in the region": ("autograd/graph.py", lambda text: None, f"    return {LOWER}\n"),
}


def _the_same_but_the_child_s_text(own, teacher, exercise):
    """Whether the teacher's line is the learner's own, word for word, but for what the code
    said (shown as "…" in the teacher's grade, whose child held other solutions)."""
    note = f" (…: what your code said, shown by your own check: python -m exercises check {exercise})"
    if not teacher.endswith(note):
        return own == teacher
    pattern = ".+?".join(re.escape(part) for part in teacher[: -len(note)].split("…"))
    return re.fullmatch(pattern, own) is not None and own != teacher[: -len(note)]


COMMON_CALLS = {"ones", "zeros", "sum", "sqrt", "transpose", "exp", "max", "asarray", "reshape"}


def test_the_copy_s_checks_name_no_one_line_answer_nor_its_uncommon_calls(fresh):
    """A one-line solution is its expression: the feedback texts shipped with the copy (its
    own checks) say what is wrong in words, never that expression nor a function it calls
    that is not everyday numpy (a hint naming np.tril or weight[ids] gave those answers away)."""
    from tests.exercises.helpers import SOLUTIONS
    checks = "".join(path.read_text() for path in (fresh / "exercises").rglob("*.py"))
    for name, places in SOLUTIONS.items():
        code = [line for _, _, body in places for line in body.splitlines() if line.strip()[:1] not in ("", "#")]
        if len(code) != 1:
            continue
        expression = ast.parse(code[0].strip()).body[0].value
        calls = {getattr(node.func, "attr", getattr(node.func, "id", "")) for node in ast.walk(expression)
                 if isinstance(node, ast.Call)} - COMMON_CALLS
        assert ast.unparse(expression) not in checks and not [c for c in calls if c in checks], (name, calls)


@pytest.mark.parametrize("how", list(OUTSIDE))
def test_check_in_a_copy_judges_as_the_teacher_s_grade_will(fresh, tmp_path, how):
    copy = tmp_path / "copy"
    shutil.copytree(fresh, copy)
    path, edit, body = OUTSIDE[how]
    plant(copy, "causal_mask", body)
    edited = edit((copy / path).read_text() if (copy / path).exists() else "")
    if edited is None:
        (copy / path).unlink()
    else:
        (copy / path).write_text(edited)
    _, teacher = exercises("check", "causal_mask", "--project", str(copy))
    status, own = exercises("check", "causal_mask", cwd=copy)
    lines = own.splitlines()
    assert lines[1] == f"changes outside the exercise regions are not graded: {path}", own
    assert _the_same_but_the_child_s_text(lines[2], teacher.strip(), "causal_mask"), (own, teacher)
    passed = how.endswith("the answer in the region")
    assert status == (0 if passed else 1)
    assert teacher.startswith("exercise causal_mask: passed (" if passed else "exercise causal_mask: not yet: raised ")


def test_check_in_a_copy_says_nothing_of_files_as_made(fresh):
    status, out = exercises("check", "causal_mask", cwd=fresh)
    assert status == 1 and "changes outside" not in out and "not started" in out.splitlines()[1]


def test_every_link_of_the_copy_s_readme_reaches_a_file_of_the_copy(fresh):
    """A notebook left out (it computes exercises by hand) leaves its text, not a dead link."""
    with open(fresh / "README.md", encoding="utf-8") as f:
        text = f.read()
    targets = [t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text) if "://" not in t and not t.startswith("#")]
    assert targets and all((fresh / t).exists() for t in targets), [t for t in targets if not (fresh / t).exists()]
    assert "attention by hand: scores, mask, softmax, heads (not in this copy: it gives away exercises softmax, " \
           "attention, heads)" in text


def test_an_error_s_line_is_the_learner_s_line_in_check_and_in_the_teacher_s_grade(fresh, tmp_path):
    """The learner's file has three lines more above the region than the file as made: the
    line named is where the failing line sits in the learner's file. The teacher's grade shows
    what the code said as "…" (its child held other exercises' solutions); the learner's own
    check shows it."""
    copy = tmp_path / "copy"
    shutil.copytree(fresh, copy)
    plant(copy, "causal_mask", "    size = length\n    return _lower(size)\n")
    masks = copy / "transformer" / "masks.py"
    text = "# mine\n# mine\n# mine\n" + masks.read_text()
    masks.write_text(text)
    begin = next(i for i, line in enumerate(text.splitlines(), 1) if "# BEGIN EXERCISE causal_mask" in line)
    where = f"(in transformer/masks.py line {begin + 2})"
    _, teacher = exercises("check", "causal_mask", "--project", str(copy))
    _, own = exercises("check", "causal_mask", cwd=copy)
    assert own.splitlines()[2] == f"exercise causal_mask: not yet: raised NameError: name '_lower' is not defined {where}", own
    assert teacher.strip() == (f"exercise causal_mask: not yet: raised NameError: … {where} (…: what your code said, "
                               "shown by your own check: python -m exercises check causal_mask)"), teacher


def test_make_in_a_git_checkout_copies_what_git_tracks_and_names_what_it_left_out(tmp_path):
    """A teacher's grades, notes or submissions beside the project stay theirs: in a git
    checkout make copies the tracked files (as the working tree has them) and names the rest."""
    from exercises.handout import tracked
    if tracked(ROOT) is None:
        pytest.skip("the project here is no git checkout (make copies every file then)")
    teacher = tmp_path / "teacher"
    subprocess.run(["git", "clone", "-q", ROOT, str(teacher)], check=True)
    shutil.copytree(os.path.join(ROOT, "exercises"), teacher / "exercises", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))          # this checkout's, committed or not
    (teacher / "grades.csv").write_text("ada,softmax,passed\n")
    (teacher / "submissions" / "ada").mkdir(parents=True)
    (teacher / "submissions" / "ada" / "masks.py").write_text("x = 1\n")
    (teacher / "nn" / "my_answers.py").write_text("SOFTMAX = 'np.exp(x) / ...'\n")
    with open(teacher / "README.md", "a") as f:
        f.write("\nA line of mine, not committed yet.\n")              # tracked: copied as it is
    status, out = exercises("make", str(tmp_path / "copy"), "--only", "softmax", cwd=teacher)
    assert status == 0, out
    left = [line for line in out.splitlines() if line.startswith("left out what git does not track here")]
    assert left and {"grades.csv", "submissions/", "nn/my_answers.py"} <= set(left[0].split(": ")[1].split(", ")), out
    copy = tmp_path / "copy"
    assert not any((copy / path).exists() for path in ("grades.csv", "submissions", "nn/my_answers.py"))
    assert (copy / "README.md").read_text().endswith("A line of mine, not committed yet.\n")
    assert tracked(str(tmp_path)) is None                                       # no checkout: everything is copied
