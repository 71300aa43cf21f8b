"""Grading loose files: a submission of the exercise files themselves, not the project.

Gradescope's "upload files" puts what a student dragged in (`scores.py`, `attention.py`) flat in
/autograder/submission, and a class's downloads often look the same. The files that hold
exercise regions have names no other file of the project shares (autograd/engine.py,
transformer/scores.py, ...), so each loose file is put where the teacher's file of its name
is, in a project built in the grader's scratch folder. The teacher's other files that hold
regions are put there as a copy has them, every exercise cut to its stub, so that an
exercise whose file was not handed in is `not started` (0 of 1), not left out of the grade.

A browser's renamed second download (`scores (1).py`) counts as `scores.py` where there is no
`scores.py` itself. The grader reads only the regions' text (exercises/grading.py), so nothing else of a loose
file matters. HANDED_IN, beside the built project's packages, lists the files that were
handed in: which exercises a class was handed counts only those (grading.handed_out_in),
so the stubs of a class of loose files hand nothing out.
"""

import os
import re

from exercises.regions import read

HANDED_IN = "HANDED_IN"                  # in a project built from loose files: the files that were handed in
BROWSER_COPY = re.compile(r" \(\d+\)(?=\.py$)")     # what a browser adds to a file downloaded twice: scores (1).py


def _renamed_last(entry):
    """Sort key: a file's own name before a browser's renamed copies of it."""
    return bool(BROWSER_COPY.search(entry)), entry


def stubs_of(root, versions):
    """{file: text} of the teacher's files at root that hold exercise regions, every exercise
    cut as a copy handing it out has it (`versions`: the teacher's, {name: version})."""
    from exercises.handout import cut_all
    from exercises.regions import find_regions, rewrite
    files = dict.fromkeys(path for places in find_regions(root).values() for path, *_ in places)
    return {path: rewrite(read(root, path), cut_all(versions, path)) for path in files}


def by_name(stubs):
    """{file name: the project file of that name} of the files in stubs."""
    return {os.path.basename(path): path for path in stubs}


def loose_project(folder, scratch, stubs):
    """A project built in scratch from the loose files at folder's top, or None if no file
    there has the name of one holding exercise regions (`stubs`: stubs_of)."""
    names = by_name(stubs)
    entries = [entry for entry in sorted(os.listdir(folder), key=_renamed_last)
               if os.path.isfile(os.path.join(folder, entry))]
    handed_in = {}
    for entry in entries:
        name = BROWSER_COPY.sub("", entry)               # scores (1).py: a browser's second download of scores.py
        if name in names and names[name] not in handed_in:
            handed_in[names[name]] = entry
    if not handed_in:
        return None
    project = os.path.join(scratch, f"{len(os.listdir(scratch))}-loose")
    for path, stub in stubs.items():
        os.makedirs(os.path.join(project, os.path.dirname(path)), exist_ok=True)
        text = read(folder, handed_in[path]) if path in handed_in else stub
        with open(os.path.join(project, path), "w", encoding="utf-8") as f:
            f.write(text)
    with open(os.path.join(project, HANDED_IN), "w", encoding="utf-8") as f:
        f.write("".join(f"{path}\n" for path in handed_in))
    return project


def handed_in(project):
    """The files of a project built from loose files that were handed in, or None (a whole project)."""
    path = os.path.join(project, HANDED_IN)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8", errors="replace") as f:
        return set(f.read().splitlines())
