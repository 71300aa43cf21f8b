"""The student copy: what `make` writes, and what the copy can do on its own.

The copy is the whole project (demos, tests, docs, notebooks) with each exercise handed
out cut from its region (`raise NotImplementedError("exercise NAME: hint")`, the BEGIN line
carrying the exercise's version) and each one not handed out left solved, its markers
removed. It holds no solution of an exercise handed out: not the teacher's tests of the
exercises (tests/exercises/), not the tests that compare with a numpy answer of one
(catalog.TESTS_THAT_REVEAL), not the reading edition's pages that show one solved
(docs/reading/), not the faster tiers' kernels or other code that computes one too (its
twins, exercises/twins.py: cut, so that the learner's region runs in their place), not
the numpy definitions the checks compare with
(exercises/checks/definitions.py; the copy gets the expected results instead, recorded by
running the checks here), not a sealed copy of the solutions. `exercises/handout.json`
lists what was handed out, for the learner's `check` and the copy's test run;
`exercises/as_made.json` holds the source files as made (stubs, no solution), so that the
learner's `check` splices the regions into them as the teacher's grade does
(exercises/own_check.py).
"""

import json
import os
import re
import shutil
import subprocess

from exercises.catalog import EXERCISES, TESTS_THAT_REVEAL, by_item
from exercises.regions import SKIPPED, python_files, read, regions_of, rewrite
from exercises.twins import cut_twins_in_copy

HANDOUT = os.path.join("exercises", "handout.json")
TEACHER_ONLY = {os.path.join("tests", "exercises"), os.path.join("exercises", "checks", "definitions"),
                os.path.join("exercises", "classroom_test.py")}
NEEDS_TEACHER = "needs the teacher's project"       # what a command only the teacher's project runs says in a copy
IS_STUDENT_COPY = os.path.exists(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), HANDOUT))
OUTSTANDING_HOOKS = ('\n\n# Added by `python -m exercises make`: a test that needs an exercise not done yet is skipped,\n'
                     '# naming it, and the run ends with the exercises outstanding.\n'
                     'from exercises.outstanding import (pytest_configure, pytest_runtest_makereport,  # noqa: E402,F401\n'
                     '                                  pytest_terminal_summary, pytest_unconfigure)\n')


def _cut(handed_out, versions, path):
    """The rewrite (regions.rewrite) of the file at `path` that cuts the exercises handed out."""
    def replace(indent, name, version, lines):
        if name not in handed_out:
            return lines[1:-1]                                # solved, and no longer an exercise
        hint = EXERCISES[name][1]
        hint = hint[path] if isinstance(hint, dict) else hint
        return [f"{indent}# BEGIN EXERCISE {name} (version {versions[name]})\n",
                f'{indent}raise NotImplementedError("exercise {name}: {hint}")\n', lines[-1]]
    return replace


def cut_all(versions, path):
    """The rewrite (regions.rewrite) of the file at `path` that cuts every exercise, as a copy
    handing all out has them."""
    return _cut(set(EXERCISES), versions, path)


READING = "docs/reading"        # the reading edition (demos/reading/): whole functions of a step, regions solved
READING_TEST = "tests/demos/test_reading.py"
EXERCISE_SHOWN = re.compile(r"BEGIN EXERCISE (\w+)")


def files_left_out(root, handed_out):
    """{file: [exercise]}: the files a copy handing out these exercises leaves out, as each
    gives the answer of those exercises away: the tests of catalog.TESTS_THAT_REVEAL, and
    the reading edition's pages that show one of their regions solved (with the reading
    edition's test, which compares the pages with the code)."""
    left_out = by_item(TESTS_THAT_REVEAL, handed_out)
    pages = sorted(os.listdir(os.path.join(root, READING))) if os.path.isdir(os.path.join(root, READING)) else []
    for page in pages:
        shown = set(EXERCISE_SHOWN.findall(read(root, f"{READING}/{page}")))
        if names := [name for name in handed_out if name in shown]:
            left_out[f"{READING}/{page}"] = names
    if any(path.startswith(READING) for path in left_out):
        left_out[READING_TEST] = [name for name in handed_out
                                  if any(name in names for path, names in left_out.items() if path.startswith(READING))]
    return left_out


def unlink_left_out(copy, left_out):
    """The copy's README and docs/*.md without links to the files it leaves out (a notebook
    that computes an exercise by hand, a reading page): each link `[text](path)`, the path
    relative to the document, becomes its text and why the file is not there."""
    documents = ["README.md"] + [f"docs/{name}" for name in sorted(os.listdir(os.path.join(copy, "docs")))
                                 if name.endswith(".md")]
    for document in documents:
        text = read(copy, document)
        for path, names in left_out.items():
            target = os.path.relpath(path, os.path.dirname(document) or ".").replace(os.sep, "/")
            text = re.sub(r"\[([^\]]*)\]\(" + re.escape(target) + r"\)",
                          lambda link: f"{link[1]} (not in this copy: it gives away exercises {', '.join(names)})", text)
        with open(os.path.join(copy, document), "w", encoding="utf-8") as f:
            f.write(text)


def tracked(root):
    """The files git tracks in the project at root and the folders holding them (relative
    paths), or None where root is no git checkout or git is absent: then make copies every file."""
    try:
        run = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    files = {os.path.normpath(path) for path in run.stdout.decode("utf-8", "surrogateescape").split("\0") if path}
    return files | {parent for path in files for parent in _parents(path)}


def _parents(path):
    """The folders above a relative path: a/b/c.py -> a, a/b."""
    parts = path.split(os.sep)[:-1]
    return [os.sep.join(parts[:i]) for i in range(1, len(parts) + 1)]


def _ignore(root, left_out, kept, untracked):
    """copytree's ignore: the folders the grader never reads, the teacher's own (TEACHER_ONLY),
    the files left out, and, in a git checkout (`kept`: tracked), what git does not track,
    each such name added to `untracked` (a teacher's grades or notes beside the project)."""
    not_copied = TEACHER_ONLY | {os.path.normpath(path) for path in left_out}

    def ignore(folder, names):
        relative = os.path.relpath(folder, root)
        skipped = []
        for name in names:
            path = os.path.normpath(os.path.join(relative, name))
            if name in SKIPPED or name.endswith(".egg-info") or path in not_copied:
                skipped.append(name)
            elif kept is not None and path not in kept:
                skipped.append(name)
                untracked.append(path + os.sep * os.path.isdir(os.path.join(folder, name)))
        return skipped
    return ignore


def student_copy(root, destination, handed_out):
    """Write the copy of the project at root to destination, the exercises `handed_out` cut
    out and the others solved; in a git checkout only what git tracks is copied.  Returns
    (the source files an exercise was cut out of, the files and folders left out as untracked)."""
    from exercises.checks.expected import record_expectations
    from exercises.own_check import record_as_made
    from exercises.versions import versions
    if os.path.exists(destination) and not os.path.isdir(destination):
        raise FileExistsError(f"exercises make: {destination!r} is a file; expected a new or empty folder")
    if os.path.exists(destination) and os.listdir(destination):
        raise FileExistsError(f"exercises make: {destination!r} exists and is not empty")
    handed_out = [name for name in EXERCISES if name in handed_out]       # in the order of the lectures
    left_out = files_left_out(root, handed_out)
    untracked = []
    shutil.copytree(root, destination, dirs_exist_ok=True, ignore=_ignore(root, left_out, tracked(root), untracked))
    current = versions(root)
    changed = [path for path in python_files(root) if "# BEGIN EXERCISE" in read(root, path)]
    for path in changed:
        with open(os.path.join(destination, path), "w", encoding="utf-8") as f:
            f.write(rewrite(read(root, path), _cut(set(handed_out), current, path)))
    cut_twins_in_copy(destination, handed_out)
    record_as_made(destination)
    with open(os.path.join(destination, HANDOUT), "w") as f:
        json.dump({"handed_out": {name: current[name] for name in handed_out},
                   "solved": [name for name in EXERCISES if name not in handed_out],
                   "tests_left_out": left_out}, f, indent=1)
    unlink_left_out(destination, left_out)
    conftest = os.path.join(destination, "tests", "conftest.py")
    with open(conftest, "a") as f:
        f.write(OUTSTANDING_HOOKS)
    record_expectations(os.path.join(destination, "exercises", "checks", "expected.npz"))
    return [path for path in changed if "# BEGIN EXERCISE" in read(destination, path)], untracked


def handed_out_versions(root=None):
    """{exercise: version} of what this student copy (or the one at root) hands out, in the
    lectures' order."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, HANDOUT)) as f:
        handed_out = json.load(f)["handed_out"]
    return {name: str(handed_out[name]) for name in EXERCISES if name in handed_out}


def handed_out_names(root=None):
    """The exercises this student copy (or the one at root) hands out, in the lectures' order."""
    return list(handed_out_versions(root))


def outstanding(root):
    """The exercises handed out in the copy at root whose region still raises NotImplementedError."""
    with open(os.path.join(root, HANDOUT)) as f:
        handed_out = json.load(f)["handed_out"]
    regions = regions_of(root)
    return [name for name in handed_out if unwritten(name, regions.get(name, []))]


def unwritten(name, regions):
    """The files of the regions of `name` (regions_of's [(file, version, body)]) that still
    raise the stub's NotImplementedError."""
    return [path for path, _, body in regions if f'raise NotImplementedError("exercise {name}:' in body]


def not_started_or_unfinished(name, regions):
    """NOT_STARTED where every region of `name` still raises the stub's error; where only some
    do (attention's score written, its weights not), ("not yet", naming those regions' files)."""
    from exercises.checks import NOT_STARTED
    left = unwritten(name, regions)
    if len(left) == len(regions):
        return NOT_STARTED
    return "not yet", f"not finished: its region in {', '.join(dict.fromkeys(left))} still raises NotImplementedError"
