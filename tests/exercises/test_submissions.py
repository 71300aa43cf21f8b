"""Finding a student's project in what was handed in: a folder, one or two folders down, a
.zip of either; an untrusted .zip that would write outside its folder, holds a symlink or is
too large is refused whole, and nothing is ever written outside the scratch folder."""
import os
import shutil
import stat
import zipfile

import pytest

from exercises import submissions
from exercises.submissions import EXPECTED, find_project, find_projects

PROJECT = {"autograd/scalar.py": "x = 1\n", "nn/functional.py": "y = 2\n", "README.md": "mine\n"}


def _write(folder, files):
    for path, text in files.items():
        os.makedirs(os.path.dirname(os.path.join(folder, path)) or folder, exist_ok=True)
        with open(os.path.join(folder, path), "w") as f:
            f.write(text)


def _zip(path, files, symlinks=()):
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
        for name in symlinks:
            link = zipfile.ZipInfo(name)
            link.external_attr = (stat.S_IFLNK | 0o777) << 16
            archive.writestr(link, "/etc/passwd")
    return path


@pytest.mark.parametrize("packed", ["folder", "zip"])
@pytest.mark.parametrize("prefix", ["", "class-copy/", "alice/class-copy/", "a/b/class-copy/"])
def test_a_project_is_found_up_to_two_folders_down_in_a_folder_or_a_zip(tmp_path, packed, prefix):
    files = {prefix + path: text for path, text in PROJECT.items()} | {"notes/todo.txt": "later\n"}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    if packed == "zip":
        given = _zip(tmp_path / "alice.zip", files)
    else:
        given = tmp_path / "alice"
        _write(given, files)
    project, why = find_project(str(given), str(scratch))
    if prefix.count("/") > 2:
        assert (project, why) == (None, EXPECTED)
        return
    assert why is None and open(os.path.join(project, "autograd", "scalar.py")).read() == "x = 1\n"
    assert project.rstrip("/").endswith(prefix.rstrip("/") or ("alice" if packed == "folder" else "0-alice"))


def test_two_copies_at_the_same_depth_are_one_line_naming_both(tmp_path):
    _write(tmp_path / "bob", {f"{copy}/{path}": text for copy in ("v1", "v2") for path, text in PROJECT.items()})
    assert find_project(str(tmp_path / "bob"), str(tmp_path)) == (None, "2 copies of the project (v1/, v2/), "
                                                                         "expected one")


ESCAPES = ["../evil.py", "/tmp/evil.py", "a/../../evil.py", "C:/evil.py", "a\\..\\..\\evil.py", "a/../b/c.py"]


@pytest.mark.parametrize("member", ESCAPES)
def test_a_zip_that_would_write_outside_its_folder_is_refused_whole(tmp_path, member):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    archive = _zip(tmp_path / "eve.zip", {**PROJECT, member: "import os\n"})
    before = sorted(p for p in tmp_path.rglob("*"))
    assert find_project(str(archive), str(scratch)) == (None, f"eve.zip refused: the member {member!r} would be "
                                                              "written outside the folder")
    assert sorted(p for p in tmp_path.rglob("*")) == before                 # nothing extracted, anywhere


def test_a_zip_with_a_symlink_or_too_large_is_refused(tmp_path, monkeypatch):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    linked = _zip(tmp_path / "eve.zip", PROJECT, symlinks=["autograd/engine.py"])
    assert find_project(str(linked), str(scratch)) == (None, "eve.zip refused: the member 'autograd/engine.py' is "
                                                             "a symlink")
    big = _zip(tmp_path / "big.zip", {**PROJECT, "data.bin": "0" * 5000})
    monkeypatch.setattr(submissions, "MAX_BYTES", 4096)
    assert find_project(str(big), str(scratch)) == (None, "big.zip refused: it holds more than 0 MB")
    monkeypatch.setattr(submissions, "MAX_MEMBERS", 2)
    assert find_project(str(linked), str(scratch))[1] == "eve.zip refused: it has 4 members, more than 2"
    assert os.listdir(scratch) == []


def test_every_entry_is_a_student_and_what_holds_no_project_says_why(tmp_path):
    folder, scratch = tmp_path / "submissions", tmp_path / "scratch"
    scratch.mkdir()
    _write(folder / "ada", PROJECT)
    _zip(folder / "bob.zip", {f"copy/{p}": t for p, t in PROJECT.items()})
    _write(folder, {"cy/README.md": "forgot\n", "dee.txt": "my answers\n", ".DS_Store": ""})
    (folder / "eve.zip").write_bytes(b"PK\x03\x04 not really")
    found = find_projects(str(folder), str(scratch))
    assert list(found) == ["ada", "bob", "cy", "dee.txt", "eve"]
    assert found["ada"] == (str(folder / "ada"), None) and found["bob"][1] is None
    assert found["cy"] == (None, EXPECTED)
    assert found["dee.txt"] == (None, f"dee.txt is neither a folder nor a .zip; {EXPECTED}")
    assert found["eve"][0] is None and found["eve"][1].startswith("eve.zip is not a .zip that can be read: ")


# Folder submissions are data too: anything that reads as other than the bytes handed in is refused whole.

def _honest(tmp_path):
    """A teacher's checkout and an honest student folder beside it."""
    _write(tmp_path / "teacher", {**PROJECT, "exercises/checks/__init__.py": "CHECKS = {}\n"})
    _write(tmp_path / "eve", PROJECT)
    return tmp_path / "teacher", tmp_path / "eve"


def _refusal(eve):
    project, why = find_project(str(eve), str(eve.parent))
    assert project is None, f"{eve} was accepted"
    return why


def test_an_honest_folder_passes_the_walk_and_the_folders_never_read_are_not_walked(tmp_path):
    _, eve = _honest(tmp_path)
    _write(eve, {"notes/deep/er/todo.txt": "later\n", ".hidden/x.py": "z = 3\n"})
    os.makedirs(eve / ".git" / "objects")
    os.symlink("/etc/passwd", eve / ".git" / "objects" / "linked")          # .git is never read by the grader
    assert submissions.folder_refusal(str(eve)) is None
    assert find_project(str(eve), str(tmp_path)) == (str(eve), None)


@pytest.mark.parametrize("kind", ["absolute symlink to a file", "relative symlink into the teacher's checkout",
                                  "symlinked folder", "symlink left dangling"])
def test_a_folder_holding_a_symbolic_link_is_refused_whole_naming_it(tmp_path, kind):
    teacher, eve = _honest(tmp_path)
    member, target = {
        "absolute symlink to a file": ("autograd/engine.py", str(teacher / "autograd" / "scalar.py")),
        "relative symlink into the teacher's checkout": ("nn/layers.py", "../../teacher/nn/functional.py"),
        "symlinked folder": ("transformer", str(teacher / "exercises")),
        "symlink left dangling": ("autograd/gone.py", "nowhere.py"),
    }[kind]
    os.makedirs(os.path.dirname(eve / member), exist_ok=True)
    os.symlink(target, eve / member)
    assert _refusal(eve) == f"eve refused: the member {member!r} is a symbolic link (to {target!r})"


def test_a_hard_link_a_fifo_a_socket_and_a_device_are_refused_naming_each(tmp_path):
    import socket
    teacher, eve = _honest(tmp_path)
    os.link(teacher / "autograd" / "scalar.py", eve / "autograd" / "engine.py")
    assert _refusal(eve) == "eve refused: the member 'autograd/engine.py' is a hard link (one of 2 names of one file)"
    os.unlink(eve / "autograd" / "engine.py")
    os.mkfifo(eve / "nn" / "pipe.py")
    assert _refusal(eve) == "eve refused: the member 'nn/pipe.py' is a FIFO"
    os.unlink(eve / "nn" / "pipe.py")
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(eve / "nn" / "sock"))
        assert _refusal(eve) == "eve refused: the member 'nn/sock' is a socket"
    os.unlink(eve / "nn" / "sock")
    assert find_project(str(eve), str(tmp_path)) == (str(eve), None)          # each refusal was that member's


def test_the_first_member_refused_in_name_order_is_named_folder_by_folder(tmp_path):
    _, eve = _honest(tmp_path)
    for member in ("nn/b.py", "nn/a.py", "autograd/z/y.py", "transformer.py"):
        os.makedirs(os.path.dirname(eve / member), exist_ok=True)
        os.symlink("/etc/passwd", eve / member)
    for first in ("transformer.py", "autograd/z/y.py", "nn/a.py", "nn/b.py"):   # a folder's own members first
        assert _refusal(eve) == f"eve refused: the member {first!r} is a symbolic link (to '/etc/passwd')"
        os.unlink(eve / first)
    assert find_project(str(eve), str(tmp_path)) == (str(eve), None)


def test_a_device_is_refused(tmp_path):
    _, eve = _honest(tmp_path)
    try:
        os.mknod(eve / "autograd" / "null.py", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making a device node needs root (CAP_MKNOD); the refusal of other kinds is tested")
    assert _refusal(eve) == "eve refused: the member 'autograd/null.py' is a device"


def test_a_mount_point_is_refused():
    here = os.lstat(".")
    other = os.stat_result((stat.S_IFDIR | 0o755, 1, here.st_dev + 1, 2, 0, 0, 4096, 0, 0, 0))
    assert submissions._member_refusal("x", "nn", other, here.st_dev) == ("the member 'nn' is on another file "
                                                                          "system (mounted there)")


def test_a_submission_that_is_itself_a_symlink_is_refused(tmp_path):
    teacher, _ = _honest(tmp_path)
    (tmp_path / "class").mkdir()
    os.symlink(teacher, tmp_path / "class" / "mallory")
    os.symlink(teacher / "README.md", tmp_path / "class" / "trent.zip")
    found = find_projects(str(tmp_path / "class"), str(tmp_path))
    assert found == {"mallory": (None, f"mallory refused: it is a symbolic link (to {str(teacher)!r})"),
                     "trent": (None, f"trent.zip refused: it is a symbolic link (to {str(teacher / 'README.md')!r})")}
    assert find_project(str(tmp_path / "class" / "mallory") + "/", str(tmp_path))[1].startswith("mallory refused")


def test_a_folder_too_large_too_many_or_too_deep_is_refused(tmp_path, monkeypatch):
    _, eve = _honest(tmp_path)
    _write(eve, {"a/b/c/d/e.txt": "0" * 5000})
    monkeypatch.setattr(submissions, "MAX_DEPTH", 3)
    assert _refusal(eve) == "eve refused: the member 'a/b/c/d' is more than 3 folders deep"
    monkeypatch.setattr(submissions, "MAX_DEPTH", 4)
    monkeypatch.setattr(submissions, "MAX_BYTES", 4096)
    assert _refusal(eve) == "eve refused: it holds more than 0 MB"
    monkeypatch.setattr(submissions, "MAX_BYTES", 5000 + 6 + 6 + 5)                # e.txt, the two .py, README
    monkeypatch.setattr(submissions, "MAX_MEMBERS", 9)
    assert _refusal(eve) == "eve refused: it has more than 9 members"
    monkeypatch.setattr(submissions, "MAX_MEMBERS", 10)                            # 4 folders a..d, e.txt, 5 of PROJECT
    monkeypatch.setattr(submissions, "MAX_BYTES", 5000 + 6 + 6 + 5 - 1)
    assert _refusal(eve) == "eve refused: it holds more than 0 MB"
    monkeypatch.setattr(submissions, "MAX_BYTES", 5000 + 6 + 6 + 5)
    assert find_project(str(eve), str(tmp_path)) == (str(eve), None)          # exactly at every bound: read


def test_the_command_line_refuses_a_linked_submission_before_grading_anything(tmp_path):
    from tests.exercises.helpers import ROOT, exercises
    eve = tmp_path / "eve"
    shutil.copytree(os.path.join(ROOT, "autograd"), eve / "autograd", ignore=shutil.ignore_patterns("__pycache__"))
    os.unlink(eve / "autograd" / "scalar.py")
    os.symlink(os.path.join(ROOT, "autograd", "scalar.py"), eve / "autograd" / "scalar.py")
    status, out = exercises("check", "all", "--project", str(eve))
    assert status == 2 and out.strip().endswith("no project found: eve refused: the member 'autograd/scalar.py' is "
                                                f"a symbolic link (to {os.path.join(ROOT, 'autograd', 'scalar.py')!r})")


def test_a_folder_and_a_zip_of_one_name_are_two_students_each_graded(tmp_path):
    """ana/ and ana.zip both once gave student "ana": the .zip's grade replaced the folder's."""
    folder, scratch = tmp_path / "submissions", tmp_path / "scratch"
    scratch.mkdir()
    _write(folder / "ana", PROJECT)
    _zip(folder / "ana.zip", {f"copy/{p}": t for p, t in PROJECT.items()})
    _zip(folder / "ben.zip", {f"copy/{p}": t for p, t in PROJECT.items()})
    found = find_projects(str(folder), str(scratch))
    assert list(found) == ["ana", "ana.zip", "ben"]
    assert all(why is None for _, why in found.values())


def test_an_entry_whose_name_starts_with_a_dot_is_a_student_too(tmp_path):
    """'.eve' and '..zip' were skipped without a line; only an OS's or git's own files are. A
    .zip whose name without .zip is only dots keeps its whole name: '...zip' was student '..',
    whose results.json went to the folder above --gradescope's."""
    folder, scratch = tmp_path / "submissions", tmp_path / "scratch"
    scratch.mkdir()
    _write(folder / ".eve", PROJECT)
    _zip(folder / "..zip", {f"copy/{p}": t for p, t in PROJECT.items()})
    _write(folder, {".DS_Store": "", "Thumbs.db": ""})
    found = find_projects(str(folder), str(scratch))
    assert list(found) == ["..zip", ".eve"] and all(why is None for _, why in found.values())


def test_an_entry_named_as_the_gradescope_script_is_refused_naming_why(tmp_path):
    """A student folder run_autograder once made --gradescope fail (IsADirectoryError)."""
    folder, scratch = tmp_path / "submissions", tmp_path / "scratch"
    scratch.mkdir()
    _write(folder / "run_autograder", PROJECT)
    found = find_projects(str(folder), str(scratch))
    assert found["run_autograder"][0] is None and "rename the entry" in found["run_autograder"][1]


def test_a_zip_nested_deeper_than_a_folder_may_be_is_refused_before_extracting(tmp_path):
    """1,500 nested folder entries once crashed the grader (RecursionError) with no grades."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    deep = "/".join(["d"] * (submissions.MAX_DEPTH + 2))
    archive = _zip(tmp_path / "eve.zip", {**PROJECT, f"{deep}/x.py": "x = 1\n"})
    project, why = find_project(str(archive), str(scratch))
    assert project is None and why.startswith("eve.zip refused: the member 'd/d/") and why.endswith(
        f"is more than {submissions.MAX_DEPTH} folders deep") and os.listdir(scratch) == []
    shallow = _zip(tmp_path / "ada.zip", {**PROJECT, "/".join(["d"] * submissions.MAX_DEPTH) + "/x.py": "x = 1\n"})
    assert find_project(str(shallow), str(scratch))[1] is None


def test_a_students_name_is_printable_whatever_the_entry_is_called(tmp_path):
    """An entry named with terminal escapes, a newline, a mark that reverses text or bytes
    that are not UTF-8 is a student whose name shows those as '?' or escapes; names shown
    alike stay two students."""
    folder, scratch = tmp_path / "submissions", tmp_path / "scratch"
    scratch.mkdir()
    folder.mkdir()
    copy = _zip(tmp_path / "copy.zip", {f"copy/{p}": t for p, t in PROJECT.items()})
    for name in ["\x1b[2J\x1b[32mbob: passed\n.zip", "eve\u202e.zip", "eve\u202d.zip", "...zip"]:
        shutil.copy(copy, folder / name)
    shutil.copy(copy, os.path.join(str(folder).encode(), b"\xfe\xff.zip"))
    found = find_projects(str(folder), str(scratch))
    assert sorted(found) == sorted(["?[2J?[32mbob: passed?", "...zip", "eve?", "eve?'", "\\udcfe\\udcff"])
    assert all(why is None for _, why in found.values())


def test_an_unreadable_source_file_refuses_its_submission_not_the_class_s_grade(tmp_path, monkeypatch):
    """A .py file the grader may not read (a member of mode 000, as `unzip` keeps it) stopped a
    teacher's whole grade, not root, with a PermissionError: it refuses that submission only.
    As root, who reads anything, the file's refusal by the kernel is played by os.access."""
    from tests.exercises.helpers import ROOT, SOLUTIONS, region_files
    student = tmp_path / "class" / "eve"
    region_files(ROOT, student)
    relative = SOLUTIONS["softmax"][0][0]
    if os.geteuid() == 0:
        real = os.access
        monkeypatch.setattr(os, "access", lambda path, mode: not str(path).endswith(relative) and real(path, mode))
    else:
        os.chmod(student / relative, 0)
    (tmp_path / "scratch").mkdir()
    project, why = find_project(str(student), str(tmp_path / "scratch"))
    assert project is None and why.startswith(f"eve refused: the member {relative!r} cannot be read by the grader "
                                              "(mode -"), why


@pytest.mark.parametrize("venv", ["venv", "env", ".venv", "class-copy/my-python"])
def test_a_virtual_environment_handed_in_is_skipped_whatever_its_name_in_a_folder_or_a_zip(tmp_path, venv):
    """A student's own venv (any folder holding pyvenv.cfg: `python -m venv venv`, the most
    common habit) holds links of its own (lib64 -> lib, bin/python): the grader never reads
    it, so it does not refuse the submission (teacher trial 5 saw 0 for a right student), in
    a folder or a zip, and nothing of it is extracted."""
    teacher, eve = _honest(tmp_path)
    _write(eve / venv, {"pyvenv.cfg": "home = /usr/bin\n", "lib/python3.11/site-packages/x.py": "x = 1\n"})
    os.symlink("lib", eve / venv / "lib64")
    os.makedirs(eve / venv / "bin")
    os.symlink("/usr/bin/python3", eve / venv / "bin" / "python")
    assert submissions.folder_refusal(str(eve)) is None and find_project(str(eve), str(tmp_path)) == (str(eve), None)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    files = {**PROJECT, f"{venv}/pyvenv.cfg": "home = /usr/bin\n", f"{venv}/lib/python3.11/site-packages/x.py": "x\n"}
    packed = _zip(tmp_path / "eve.zip", files, symlinks=[f"{venv}/lib64", f"{venv}/bin/python"])
    found, why = find_project(str(packed), str(scratch))
    assert why is None and os.path.isdir(os.path.join(found, "autograd"))
    assert not os.path.exists(os.path.join(found, venv))


def test_a_pyvenv_cfg_inside_a_source_package_hides_no_link(tmp_path):
    """The grader reads every .py file of autograd/, nn/ and transformer/: a folder there is
    walked (and its links refused) even if it holds a pyvenv.cfg, in a folder or a zip."""
    teacher, eve = _honest(tmp_path)
    _write(eve / "autograd" / "ops2", {"pyvenv.cfg": "home = /usr/bin\n"})
    os.symlink(str(teacher / "autograd" / "scalar.py"), eve / "autograd" / "ops2" / "answers.py")
    assert _refusal(eve).startswith("eve refused: the member 'autograd/ops2/answers.py' is a symbolic link")
    packed = _zip(tmp_path / "eve.zip", {**PROJECT, "autograd/ops2/pyvenv.cfg": "x\n"},
                  symlinks=["autograd/ops2/answers.py"])
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    assert find_project(str(packed), str(scratch)) == (None, "eve.zip refused: the member 'autograd/ops2/answers.py' "
                                                             "is a symlink")
