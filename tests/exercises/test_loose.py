"""Loose files handed in (Gradescope's "upload files", flat): each put where the teacher's file of
its name is (a browser's `masks (1).py` too), over the other files' stubs; an exercise whose
file was not handed in says so, and the stubs hand nothing out when a class is graded."""
import csv
import os
import shutil

import pytest

from exercises.loose import HANDED_IN, handed_in, loose_project, stubs_of
from exercises.regions import read, regions_of
from exercises.submissions import EXPECTED, find_project
from exercises.versions import versions
from tests.exercises.helpers import ROOT, exercises, solve


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """A copy handing out softmax and causal_mask, both solved."""
    copy = tmp_path_factory.mktemp("loose") / "copy"
    status, out = exercises("make", str(copy), "--only", "softmax", "causal_mask")
    assert status == 0, out
    for name in ("softmax", "causal_mask"):
        solve(copy, name)
    return copy


def _flat(solved, folder, *paths):
    os.makedirs(folder)
    for path in paths:
        shutil.copy(os.path.join(solved, path), folder)


def test_a_loose_file_goes_where_the_teacher_s_file_of_its_name_is_over_the_others_stubs(solved, tmp_path):
    stubs = stubs_of(str(ROOT), versions(str(ROOT)))
    _flat(solved, tmp_path / "lia", "transformer/masks.py")
    (tmp_path / "lia" / "notes.py").write_text("print('not a file of the project')\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    project = loose_project(str(tmp_path / "lia"), str(scratch), stubs)
    assert handed_in(project) == {"transformer/masks.py"} and handed_in(str(solved)) is None
    assert read(project, "transformer/masks.py") == read(solved, "transformer/masks.py")
    assert sorted(os.listdir(project)) == sorted({path.split("/")[0] for path in stubs} | {HANDED_IN})
    regions = regions_of(project)
    assert regions["causal_mask"] == regions_of(str(solved))["causal_mask"]
    assert all("raise NotImplementedError" in body for name, places in regions.items() if name != "causal_mask"
               for _, _, body in places)                          # every other exercise its stub: no solution
    os.makedirs(tmp_path / "ned")
    (tmp_path / "ned" / "answers.py").write_text("def softmax(x): ...\n")
    assert loose_project(str(tmp_path / "ned"), str(scratch), stubs) is None
    assert find_project(str(tmp_path / "ned"), str(scratch), stubs) == (None, EXPECTED)
    assert find_project(str(tmp_path / "lia"), str(scratch))[1] == EXPECTED        # without stubs: no loose files


def test_loose_files_are_graded_and_their_stubs_hand_nothing_out(solved, tmp_path):
    folder = tmp_path / "submissions"
    _flat(solved, folder / "lia", "transformer/masks.py")
    _flat(solved, tmp_path / "max", "autograd/kernels/reference.py")
    shutil.make_archive(str(folder / "max"), "zip", root_dir=tmp_path / "max")          # a .zip of loose files
    _flat(solved, folder / "kai", "transformer/masks.py", "autograd/kernels/reference.py")
    os.rename(folder / "kai" / "masks.py", folder / "kai" / "masks (1).py")       # a browser's second download
    status, out = exercises("make", str(folder / "tom"), "--only", "softmax", "causal_mask")   # nothing done
    assert status == 0, out
    (folder / "ned").mkdir()
    (folder / "ned" / "answers.py").write_text("def softmax(x): ...\n")
    (folder / "submission_metadata.yml").write_text(":lia:\n")                 # Gradescope's export, no student
    status, out = exercises("grade", str(folder), "--out", str(tmp_path / "grades.csv"), "--jobs", "2")
    assert status == 0, out
    assert "not graded, in no more than half the submissions at its version: not handed out, or changed since: " \
           "17 exercises" in out, out                          # three loose of four projects: their stubs count not
    with open(tmp_path / "grades.csv", newline="") as f:
        rows = {(r["student"], r["exercise"]): (r["result"], r["message"]) for r in csv.DictReader(f)}
    not_started = ("not yet", "not started: the region still raises NotImplementedError")
    missing = {name: ("not yet", f"not handed in: {path}, where {name} is written")
               for name, path in (("softmax", "autograd/kernels/reference.py"), ("causal_mask", "transformer/masks.py"))}
    assert rows["lia", "causal_mask"][0] == "passed" and rows["lia", "softmax"] == missing["softmax"]
    assert rows["max", "softmax"][0] == "passed" and rows["max", "causal_mask"] == missing["causal_mask"]
    assert rows["kai", "softmax"][0] == rows["kai", "causal_mask"][0] == "passed"
    assert rows["tom", "softmax"] == rows["tom", "causal_mask"] == not_started
    assert rows["ned", ""] == ("no project found", EXPECTED)
    assert "submission_metadata.yml" not in {student for student, _ in rows}
    status, out = exercises("check", "softmax", "causal_mask", "--project", str(folder / "lia"))   # Gradescope's way
    assert status == 1 and out.splitlines()[:2] == [
        "exercise softmax: not yet: not handed in: autograd/kernels/reference.py, where softmax is written",
        "exercise causal_mask: passed (lengths 3, 5, 2 and 1)"], out


def test_an_exercise_most_uploads_lack_is_named_and_like_grades_what_was_handed_out(solved, tmp_path):
    """Two students upload masks.py alone, one hands in a whole copy: softmax is in one of three
    submissions, so the majority rule leaves it out, saying so; --like COPY grades it."""
    folder = tmp_path / "submissions"
    for student in ("lia", "gus"):
        _flat(solved, folder / student, "transformer/masks.py")
    shutil.copytree(solved, folder / "tom")
    status, out = exercises("grade", str(folder), "--out", str(tmp_path / "g.csv"))
    assert status == 0 and "held at the grader's version by some submissions but not graded: softmax; if you " \
        "handed them out, grade with --like COPY" in out, out
    status, out = exercises("grade", str(folder), "--out", str(tmp_path / "g.csv"), "--like", str(solved))
    with open(tmp_path / "g.csv", newline="") as f:
        graded = {(r["student"], r["exercise"]): r["result"] for r in csv.DictReader(f)}
    assert status == 0 and graded == {(s, n): "passed" if s == "tom" or n == "causal_mask" else "not yet"
                                      for s in ("gus", "lia", "tom") for n in ("softmax", "causal_mask")}, out


def test_check_all_of_a_solved_copy_that_hands_out_some_exits_0(solved):
    """The exercises a copy does not hand out are no checks: `not in that copy`, and exit 0."""
    status, out = exercises("check", "all", "--project", str(solved))
    lines = out.splitlines()
    assert status == 0 and sum(": not in that copy: " in line for line in lines) == 17, out
    assert [line.split(" (")[0] for line in lines if ": passed" in line] == ["exercise softmax: passed",
                                                                             "exercise causal_mask: passed"], out


def test_grade_like_a_folder_that_is_no_copy_is_refused_in_one_line(solved, tmp_path):
    folder = tmp_path / "submissions"
    _flat(solved, folder / "lia", "transformer/masks.py")
    status, out = exercises("grade", str(folder), "--like", str(tmp_path / "nowhere"))
    assert status == 2 and out.strip().splitlines()[-1] == (
        f"python -m exercises: error: --like {str(tmp_path / 'nowhere')!r}: not a student copy made by make "
        "(no readable exercises/handout.json)"), out
    status, out = exercises("grade", str(folder), "--like", str(solved), "--only", "softmax")
    assert status == 2 and "not allowed with argument" in out, out
    status, out = exercises("check", "softmax", "--project", str(solved), "--like", str(tmp_path / "nowhere"))
    assert status == 2 and out.strip().splitlines()[-1] == (
        f"python -m exercises: error: --like {str(tmp_path / 'nowhere')!r}: not a student copy made by make "
        "(no readable exercises/handout.json)"), out


def test_a_version_edited_on_a_begin_line_is_not_yet_and_counted_when_graded_like_the_copy(solved, tmp_path):
    """A student who changes the version on a region's BEGIN line made it `not in that copy`,
    which the totals leave out of `of` (teacher trial 5: a wrong answer's 0 of 1 became 0 of 0).
    Graded --like the copy handed out, whose versions are known, it is `not yet`, saying why,
    and counted; without --like, as before (the copy may be an older one)."""
    import re
    folder = tmp_path / "submissions"
    shutil.copytree(solved, folder / "jo")
    masks = folder / "jo" / "transformer" / "masks.py"
    text = masks.read_text()
    version = re.search(r"# BEGIN EXERCISE causal_mask \(version (\w+)\)", text)[1]
    edited = version[:-1] + ("0" if version[-1] != "0" else "1")
    masks.write_text(text.replace(f"(version {version})", f"(version {edited})"))
    status, out = exercises("grade", str(folder), "--out", str(tmp_path / "g.csv"), "--like", str(solved))
    with open(tmp_path / "g.csv", newline="") as f:
        rows = {r["exercise"]: r for r in csv.DictReader(f)}
    assert rows["softmax"]["result"] == "passed" and rows["causal_mask"]["result"] == "not yet", out
    assert f"is {edited}, not {version} as in the copy handed out" in rows["causal_mask"]["message"]
    with open(tmp_path / "g-totals.csv", newline="") as f:
        total = next(csv.DictReader(f))
    assert (total["passed"], total["of"]) == ("1", "2"), total
    exercises("grade", str(folder), "--out", str(tmp_path / "h.csv"), "--only", "softmax", "causal_mask")
    with open(tmp_path / "h.csv", newline="") as f:
        assert {r["exercise"]: r["result"] for r in csv.DictReader(f)}["causal_mask"] == "not in that copy"


@pytest.mark.parametrize("breaking", ["a word after the name", "the BEGIN and END lines removed"])
def test_a_begin_line_broken_past_reading_is_not_yet_and_counted_when_graded_like_the_copy(solved, tmp_path, breaking):
    """A BEGIN line the grader cannot read made the exercise `not in that copy`, out of the
    totals (hostile replay 17: 18 of 18 for a class of 19): graded --like the copy, whose
    exercises are known, it is `not yet`, counted."""
    import re
    folder = tmp_path / "submissions"
    shutil.copytree(solved, folder / "jo")
    masks = folder / "jo" / "transformer" / "masks.py"
    text = masks.read_text()
    if breaking == "a word after the name":
        text = re.sub(r"(# BEGIN EXERCISE causal_mask) \(version \w+\)", r"\1 edited", text)
    else:
        text = re.sub(r"^\s*# (BEGIN EXERCISE causal_mask.*|END EXERCISE)\n", "", text, flags=re.M)
    masks.write_text(text)
    status, out = exercises("grade", str(folder), "--out", str(tmp_path / "g.csv"), "--like", str(solved))
    with open(tmp_path / "g.csv", newline="") as f:
        rows = {r["exercise"]: r for r in csv.DictReader(f)}
    assert rows["causal_mask"]["result"] == "not yet" and "put them back" in rows["causal_mask"]["message"], out
    with open(tmp_path / "g-totals.csv", newline="") as f:
        total = next(csv.DictReader(f))
    assert (total["passed"], total["of"]) == ("1", "2"), total
