"""Finding each student's project in what was handed in: a folder, a folder holding the
project one or two folders down (`alice/class-copy/...`), or a .zip of either.

What was handed in is data, and untrusted. A .zip is extracted into a temporary folder only,
and refused whole if any member's path is absolute or climbs out (`..`), if it holds a
symlink, or if it is larger or has more members than a class copy could (MAX_BYTES,
MAX_MEMBERS). A folder is refused whole if it is itself a symbolic link, or if it holds one,
a hard link (a file with more than one name, which may be a name of a file of the teacher's),
a device, a FIFO, a socket or a folder another file system is mounted on: anything that reads
as something other than the bytes the student handed in. It is walked without following any
link, bounded as zips are and MAX_DEPTH folders deep; the folders the grader never reads
(.git, .venv, __pycache__, ...: regions.SKIPPED, and any virtual environment, a folder holding
pyvenv.cfg, whatever its name: its links are Python's) are not walked, nor a zip's members
under them extracted. Nothing found is read here but names and file types: the grader reads
the regions' text later (exercises/grading.py).
"""

import os
import shutil
import stat
import zipfile

from exercises.grading import printable
from exercises.loose import loose_project
from exercises.regions import SKIPPED, SOURCES

MAX_BYTES = 200 * 2 ** 20          # the whole project with its notebooks is a few MB
MAX_MEMBERS = 20_000
DEPTH = 2                          # how many folders down a project may sit
MAX_DEPTH = 32                     # how deep a folder submission may nest (the project: 5)
SHOWN = 120                        # characters of a symbolic link's target shown
VENV_MARK = "pyvenv.cfg"           # a virtual environment's own file: the folder holding it is never read
EXPECTED = (f"expected a copy of the project (its {', '.join(p + '/' for p in SOURCES)} folders) in the folder, "
            f"one or two folders down, or in a .zip of it, or the exercise files themselves (scores.py, ...)")


def _is_project(folder):
    return any(os.path.isdir(os.path.join(folder, package)) for package in SOURCES)


def _subfolders(folder):
    return [os.path.join(folder, n) for n in sorted(os.listdir(folder)) if not n.startswith((".", "__MACOSX"))
            and n not in SKIPPED and os.path.isdir(os.path.join(folder, n)) and not os.path.islink(os.path.join(folder, n))
            and not _is_venv(os.path.join(folder, n))]


def _is_venv(folder):
    """Whether folder is a virtual environment (holds pyvenv.cfg, a file, not a link)."""
    try:
        return stat.S_ISREG(os.lstat(os.path.join(folder, VENV_MARK)).st_mode)
    except OSError:
        return False


def _outside_sources(relative):
    """Whether a folder (its path in the submission, / between parts) lies outside every
    source package: a virtual environment is skipped only there, as the grader reads every
    .py file of a package (a pyvenv.cfg in autograd/ must not hide a link from the check)."""
    return not set(relative.split("/")) & set(SOURCES)


def _kept(members):
    """A zip's members but those in a folder the grader never reads: one regions.SKIPPED names,
    or a virtual environment outside the source packages (a folder holding pyvenv.cfg)."""
    names = [m.filename.replace("\\", "/") for m in members]
    venvs = tuple(name[:-len(VENV_MARK)] for name in names
                  if name.split("/")[-1] == VENV_MARK and _outside_sources(name[:-len(VENV_MARK)]))
    return [m for m, name in zip(members, names) if not name.startswith(venvs)
            and not any(part in SKIPPED for part in name.split("/")[:-1])]


def project_in(folder):
    """(the project folder in folder or up to DEPTH folders down, the shallowest, None), or
    (None, why there is none)."""
    level = [folder]
    for _ in range(DEPTH + 1):
        found = [f for f in level if _is_project(f)]
        if len(found) > 1:
            names = ", ".join(os.path.relpath(f, folder) + "/" for f in found)
            return None, f"{len(found)} copies of the project ({names}), expected one"
        if found:
            return found[0], None
        level = [sub for f in level for sub in _subfolders(f)]
    return None, EXPECTED


def _refusal(archive):
    """Why the members of a zip may not be extracted (those _kept), or None."""
    members = _kept(archive.infolist())
    if len(members) > MAX_MEMBERS:
        return f"it has {len(members)} members, more than {MAX_MEMBERS}"
    if sum(m.file_size for m in members) > MAX_BYTES:
        return f"it holds more than {MAX_BYTES // 2 ** 20} MB"
    for member in members:
        name = member.filename.replace("\\", "/")
        if name.startswith("/") or (len(name) > 1 and name[1] == ":") or ".." in name.split("/"):
            return f"the member {member.filename!r} would be written outside the folder"
        if stat.S_ISLNK(member.external_attr >> 16):
            return f"the member {member.filename!r} is a symlink"
        if len([part for part in name.split("/") if part]) > MAX_DEPTH + 1:
            return f"the member {member.filename[:SHOWN]!r}... is more than {MAX_DEPTH} folders deep"
    return None


def _kind(path, info):
    """What a member that is neither a regular file nor a folder is, in words."""
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(path)
        return f"a symbolic link (to {target[:SHOWN]!r}{'...' if len(target) > SHOWN else ''})"
    kinds = {stat.S_IFCHR: "a device", stat.S_IFBLK: "a device", stat.S_IFIFO: "a FIFO", stat.S_IFSOCK: "a socket"}
    return kinds.get(stat.S_IFMT(info.st_mode), "neither a file nor a folder")


def _member_refusal(path, relative, info, device):
    """Why one member (lstat info) of a folder submission on file system `device` may not be read, or None."""
    if not (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        return f"the member {relative!r} is {_kind(path, info)}"
    if info.st_dev != device:
        return f"the member {relative!r} is on another file system (mounted there)"
    if stat.S_ISREG(info.st_mode) and info.st_nlink > 1:
        return f"the member {relative!r} is a hard link (one of {info.st_nlink} names of one file)"
    return None


def folder_refusal(folder):
    """Why the members of a folder submission may not be read, or None: walked with lstat,
    never following a link, folder by folder in name order (a folder's own members, then its
    subfolders'), the first member refused named; bounded by MAX_MEMBERS, MAX_BYTES and MAX_DEPTH."""
    device = os.lstat(folder).st_dev
    pending, members, size = [(folder, 0)], 0, 0
    while pending:
        current, depth = pending.pop()
        entries = []
        with os.scandir(current) as listing:
            for entry in listing:
                entries.append(entry)
                if members + len(entries) > MAX_MEMBERS:
                    return f"it has more than {MAX_MEMBERS} members"
        members += len(entries)
        subfolders = []
        for entry in sorted(entries, key=lambda e: e.name):
            relative = os.path.relpath(entry.path, folder)
            info = entry.stat(follow_symlinks=False)
            if (refused := _member_refusal(entry.path, relative, info, device)):
                return refused
            if stat.S_ISREG(info.st_mode) and (size := size + info.st_size) > MAX_BYTES:
                return f"it holds more than {MAX_BYTES // 2 ** 20} MB"
            if stat.S_ISREG(info.st_mode) and entry.name.endswith(".py") and not os.access(entry.path, os.R_OK):
                return f"the member {relative!r} cannot be read by the grader (mode {stat.filemode(info.st_mode)})"
            if stat.S_ISDIR(info.st_mode) and entry.name not in SKIPPED and not (
                    _is_venv(entry.path) and _outside_sources(relative.replace(os.sep, "/"))):
                if depth + 1 > MAX_DEPTH:
                    return f"the member {relative!r} is more than {MAX_DEPTH} folders deep"
                subfolders.append((entry.path, depth + 1))
        pending += reversed(subfolders)                                 # popped in name order
    return None


def _extract(archive, destination):
    """Extract every member _kept, refusing (ValueError) one that writes more than it declared."""
    for member in _kept(archive.infolist()):
        target = os.path.join(destination, *member.filename.replace("\\", "/").split("/"))
        if member.is_dir():
            os.makedirs(target, exist_ok=True)
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with archive.open(member) as source, open(target, "wb") as out:
            shutil.copyfileobj(source, out)
            if out.tell() > member.file_size:
                raise ValueError(f"the member {member.filename!r} is larger than it says")


def unzip(path, destination):
    """Extract the .zip at path into destination (a new folder); a str saying why not."""
    name = os.path.basename(path)
    try:
        with zipfile.ZipFile(path) as archive:
            if (refused := _refusal(archive)):
                return f"{name} refused: {refused}"
            os.makedirs(destination)
            _extract(archive, destination)
    except Exception as err:                     # noqa: BLE001  any damage (zlib's, lzma's errors too) is the zip's
        return f"{name} is not a .zip that can be read: {str(err)[:200] or type(err).__name__}"
    return None


def find_project(path, scratch, stubs=None):
    """(the project folder, None) in path, a folder or a .zip (extracted into a new folder in
    scratch); or (None, why there is none, or why what is there is refused). With `stubs`
    (the teacher's: loose.stubs_of), a folder or .zip holding no project but loose exercise
    files (`scores.py`, ...) is a project built from them in scratch (exercises/loose.py)."""
    folder, why = _opened(path, scratch)
    if why:
        return None, why
    project, why = project_in(folder)
    if why == EXPECTED and stubs:
        project = loose_project(folder, scratch, stubs)
    return (project, None) if project else (None, why)


def _opened(path, scratch):
    """(the folder to look in: path, or the .zip at path extracted into scratch, None), or
    (None, why path is refused or is neither)."""
    path = os.path.normpath(path)                           # "alice/" -> "alice": the link itself, not its target
    name = os.path.basename(path)
    try:
        if os.path.islink(path):
            return None, f"{name} refused: it is {_kind(path, os.lstat(path))}"
        refused = folder_refusal(path) if os.path.isdir(path) else None
    except OSError as err:
        return None, f"{name} cannot be read: {err.strerror or err}"
    if refused:
        return None, f"{name} refused: {refused}"
    if os.path.isfile(path) and path.lower().endswith(".zip"):
        destination = os.path.join(scratch, f"{len(os.listdir(scratch))}-{os.path.basename(path)[:-4]}")
        refused = unzip(path, destination)
        return (None, refused) if refused else (destination, None)
    if os.path.isdir(path):
        return path, None
    return None, f"{name} is neither a folder nor a .zip; {EXPECTED}"


SCRIPT = "run_autograder"                  # what write_gradescope_class writes beside DIR/STUDENT/
SYSTEM_FILES = {".DS_Store", ".git", ".gitignore", "Thumbs.db", "desktop.ini",   # an OS's or git's, no student's
                "submission_metadata.yml"}        # beside the students' folders in Gradescope's "Download submissions"


def find_projects(folder, scratch, stubs=None):
    """{student: (project folder, None) or (None, why none was found)} for each entry of
    folder (a sub-folder or a file; a .zip's student is its name without .zip, unless a folder
    has that name too: then each keeps its whole name), in name order; `stubs`: as
    find_project takes them, for loose files. A student's name is
    shown printable (grading.printable), primed (ana') if another was shown alike."""
    found, entries = {}, [entry for entry in sorted(os.listdir(folder)) if entry not in SYSTEM_FILES]
    students = [entry[:-4] if entry.lower().endswith(".zip") and entry[:-4].strip(".") else entry
                for entry in entries]                # "...zip" is student "...zip", not ".."
    for entry, student in zip(entries, students):
        if students.count(student) > 1:             # both "ana" and "ana.zip": each graded under its own name
            student = entry
        student = printable(student).replace("\n", "?").replace("\t", "?")   # would redraw the terminal
        while student in found:                     # two names printed alike
            student += "'"
        if student == SCRIPT:
            found[student] = (None, f"{entry}: the name of the script --gradescope writes beside the students' "
                                    "folders; rename the entry to grade it")
            continue
        found[student] = find_project(os.path.join(folder, entry), scratch, stubs)
    return found
