"""What the grader's children are given and what comes back from them, beyond the checks:
the tree holds no twin of any exercise, a message shows no terminal escape, and a source
file too large to be a project's is not parsed."""

import os

import pytest

from exercises.catalog import EXERCISES, TWIN_KERNELS
from exercises.grading import MAX_SOURCE_BYTES, Result, Teacher, tasks_for
from tests.exercises.helpers import ROOT, region_files


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    return Teacher(ROOT, str(tmp_path_factory.mktemp("grader")))


def test_the_childs_tree_has_every_twin_cut_and_the_registry_told(teacher):
    """A region once passed softmax by calling the loops tier's or the engine room's own."""
    assert [path for path, text in teacher.cut.items() if "# BEGIN TWIN" in text] == []
    assert "twin of exercise" in teacher.cut["autograd/engine_room/rowwise.py"]
    listed = teacher.cut["autograd/kernels/twins_cut.py"]
    assert all(kernel in listed for kernels in TWIN_KERNELS.values() for kernel in kernels)
    assert all(f"# BEGIN EXERCISE {name}" in "".join(teacher.cut.values()) for name in EXERCISES)


@pytest.mark.parametrize("raw,shown", [("\x1b[2J\x1b]0;title\x07exercise softmax: passed", "?[2J?]0;title?exercise softmax: passed"),
                                       ("line one\nline two\ttab", "line one\nline two\ttab"),
                                       ("\x9b31m red \x00", "?31m red ?")])
def test_a_message_shows_no_control_character(raw, shown):
    assert Result("s", "softmax", "not yet", raw).message == shown


def test_a_source_file_over_the_limit_is_not_parsed(teacher, tmp_path):
    """A 100 MB region once took the grader to 4 GB before any check ran."""
    region_files(ROOT, tmp_path)
    with open(tmp_path / "autograd" / "big.py", "w") as f:
        f.write("# BEGIN EXERCISE softmax\n" + "a\n" * (MAX_SOURCE_BYTES // 2 + 1) + "# END EXERCISE\n")
    tasks, known = tasks_for(teacher, "s", str(tmp_path), ["softmax", "attention"])
    assert tasks == [] and [r.exercise for r in known] == ["softmax", "attention"]
    assert all(r.status == "not yet" and r.message.startswith(f"{os.path.join('autograd', 'big.py')} is over 1024 KB")
               for r in known)


def test_a_message_cannot_print_a_line_of_another_result():
    line = Result("s", "softmax", "not yet", "raised ValueError: x\nexercise attention: passed (all)").line()
    assert line.splitlines() == ["exercise softmax: not yet: raised ValueError: x", "    exercise attention: passed (all)"]
