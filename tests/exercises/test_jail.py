"""The child's root (exercises/jail.py) wherever Python and its packages lie: a venv under
/tmp (where `python3 -m venv .venv` in a clone there puts it, as CI does) must not be hidden
by the child's own /tmp, or the grader falls back to isolation by process only."""
import os
import subprocess
import sys
import sysconfig

import pytest

from exercises import jail
from exercises.sandbox import isolation
from tests.exercises.helpers import ROOT
from tests.exercises.test_hostile import SOLUTION, _lines


@pytest.mark.parametrize("path, seen", [
    ("/tmp/ci/.venv", "/outside/tmp/ci/.venv"), ("/tmp", "/outside/tmp"), ("/dev/shm/py", "/outside/dev/shm/py"),
    ("/grading/x", "/outside/grading/x"), ("/usr/lib/python3.11", "/usr/lib/python3.11"),
    ("/tmpfiles/py", "/tmpfiles/py"), ("/root/.pyenv/versions/3.11.7", "/root/.pyenv/versions/3.11.7")])
def test_a_bound_path_in_a_place_the_child_has_its_own_of_is_shown_under_outside(path, seen):
    assert jail.shown(path) == seen


def _venv_under(folder):
    """A venv in folder whose site-packages holds (as links) every package this Python has."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True, timeout=120)
    here = sysconfig.get_paths()["purelib"]
    there = subprocess.run([str(folder / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    for name in os.listdir(here):
        os.symlink(os.path.join(here, name), os.path.join(there, name))
    return folder / "bin" / "python"


@pytest.mark.skipif(not sys.platform.startswith("linux") or isolation() == "process",
                    reason="this system gives the grader no namespaces: there is no child's root to build")
def test_a_venv_under_tmp_is_seen_by_the_child_and_the_check_runs_in_namespaces(tmp_path):
    assert str(tmp_path).startswith("/tmp/"), tmp_path
    python = _venv_under(tmp_path / ".venv")
    run = subprocess.run([str(python), "-m", "exercises", "check", "value_mul", "softmax"], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env={**os.environ, "PYTHONPATH": ROOT})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "isolation by process only" not in run.stdout, run.stdout
    assert [line.split(":")[0] for line in run.stdout.splitlines()] == ["exercise value_mul", "exercise softmax"], run.stdout


def _answers_if_it_can_read(path):
    """softmax's region: the right answer only if it can open path."""
    return _lines("try:", f"    open({path!r}, 'rb').read(1)", "except OSError:", "    return np.zeros_like(x)", *SOLUTION)


@pytest.mark.skipif(not sys.platform.startswith("linux") or isolation() == "process",
                    reason="this system gives the grader no namespaces: there is no child's root to build")
def test_a_task_reads_only_the_warm_files_it_needs(tmp_path):
    """Hostile trial 11 read a solution from the page cache of a cold file under /usr, timing
    its first reads: a task may read its tree, Python's and the packages' files (warmed by its
    zygote), /proc and /dev, and nothing else of /usr; nor its zygote's /proc entry (hidepid),
    where trial 13 left a solution in the inode numbers of entries it looked up."""
    from exercises.readable import version
    if not version():
        pytest.skip("this kernel has no Landlock (Linux 5.13+): a task may read all of /usr (docs/TEACHING.md)")
    from tests.exercises.helpers import grade_pairs, plant, region_files
    import numpy
    readable = {"/usr/bin/env": False, jail.shown(os.path.realpath(sys.executable)): False,   # as the child sees them
                jail.shown(os.__file__): True, jail.shown(numpy.__file__): True, "/proc/self/status": True,
                "/dev/null": True, "/proc/1/stat": False}   # its zygote, PID 1, hidden (hostile trial 13)
    students = {}
    for index, path in enumerate(readable):
        region_files(ROOT, tmp_path / f"s{index}")
        plant(tmp_path / f"s{index}", "softmax", _answers_if_it_can_read(path))
        students[f"s{index}"] = tmp_path / f"s{index}"
    lines = grade_pairs(students, {student: ["softmax"] for student in students})
    read = {path: lines[(f"s{index}", "softmax")].startswith("exercise softmax: passed")
            for index, path in enumerate(readable)}
    assert read == readable, lines


ANSWERS_IF_ON_TMPFS = _lines(
    "def kind(path):                                    # the file system of the mount that holds path",
    "    best = ('', '')", "    for line in open('/proc/self/mountinfo'):", "        fields = line.split()",
    "        point, kind = fields[4], fields[fields.index('-') + 1]",
    "        if (path == point or path.startswith(point.rstrip('/') + '/')) and len(point) >= len(best[0]):",
    "            best = (point, kind)", "    return best[1]", "import os",
    "if any(kind(os.path.dirname(where)) != 'tmpfs' for where in (os.__file__, np.__file__, __file__)):",
    "    return np.zeros_like(x)", *SOLUTION)


@pytest.mark.skipif(not sys.platform.startswith("linux") or isolation() == "process",
                    reason="this system gives the grader no namespaces: there is no child's root to build")
def test_every_folder_a_task_looks_in_is_its_own_tmpfs(tmp_path):
    """The kernel remembers, for a shared file system, names looked up and not found: hostile
    trial 12 timed such misses to carry a solution between classmates. The child's standard
    library, numpy and its tree are folders of its root's own tmpfs (files copied, or bound one
    by one), which remembers no miss."""
    from tests.exercises.helpers import grade_pairs, plant, region_files
    region_files(ROOT, tmp_path / "s")
    plant(tmp_path / "s", "softmax", ANSWERS_IF_ON_TMPFS)
    line = grade_pairs({"s": tmp_path / "s"}, {"s": ["softmax"]})[("s", "softmax")]
    assert line.startswith("exercise softmax: passed"), line


def test_where_namespaces_exist_but_the_child_cannot_start_in_them_a_grade_refuses(monkeypatch):
    """A hostile trial's teacher set-up (a Python the child's root did not hold) fell back to
    isolation by process only, and graded a class with the teacher's rights: a class's grade
    now refuses, naming why; a student's check of their own code still falls back, saying so."""
    from exercises import sandbox

    class Zygote:
        def __init__(self, tree, scratch, mode, *args, **kwargs):
            if mode != "process":
                raise RuntimeError("the check's child did not start (userns): EOFError; no numpy")
            self.mode = mode
    monkeypatch.setattr(sandbox, "isolation", lambda: "userns")
    monkeypatch.setattr(sandbox, "Zygote", Zygote)
    with pytest.raises(sandbox.Unisolated, match=r"^not graded: this machine has namespaces, but the check's child "
                                                 r"did not start in them \(the check's child did not start .*no numpy\)"):
        sandbox.first_zygote("tree", "scratch", [], [], None, as_root=False)
    notes = []
    assert sandbox.first_zygote("tree", "scratch", [], notes, None, as_root=True).mode == "process"
    assert notes and "isolation by process only" in notes[0] and "no numpy" in notes[0], notes
