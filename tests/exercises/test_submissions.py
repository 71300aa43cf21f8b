"""Finding a student's project in what was handed in: a folder, one or two folders down, a
.zip of either; an untrusted .zip that would write outside its folder, holds a symlink or is
too large is refused whole, and nothing is ever written outside the scratch folder."""
import os
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
