"""Finding the marked regions, and writing the student copy that has them cut out."""

import gzip
import json
import os
import re
import shutil

BEGIN = re.compile(r"^(\s*)# BEGIN EXERCISE (\w+)\s*$")
END = re.compile(r"^\s*# END EXERCISE\s*$")
SKIPPED = {".git", ".venv", "runs", "__pycache__", ".pytest_cache", ".hypothesis", "build", "dist"}
SOURCES = ("autograd", "nn", "transformer")
SEALED = os.path.join("exercises", "solutions.sealed")     # in a student copy: the solutions, gzipped


def python_files(root):
    for package in SOURCES:
        for folder, subfolders, files in os.walk(os.path.join(root, package)):
            subfolders[:] = sorted(s for s in subfolders if s not in SKIPPED)
            yield from (os.path.join(folder, name) for name in sorted(files) if name.endswith(".py"))


def find_regions(root):
    """{exercise name: [(file relative to root, first line number, last line number)]}, from the markers."""
    regions = {}
    for path in python_files(root):
        with open(path) as f:
            lines = f.read().splitlines()
        start = None
        for number, line in enumerate(lines, 1):
            if (match := BEGIN.match(line)):
                start = (number, match.group(2))
            elif END.match(line) and start:
                regions.setdefault(start[1], []).append((os.path.relpath(path, root), start[0], number))
                start = None
    return regions


def cut(text, hints):
    """text with each marked region's body replaced by a NotImplementedError naming it."""
    out, inside = [], False
    for line in text.splitlines(keepends=True):
        if (match := BEGIN.match(line)):
            indent, name = match.groups()
            out += [line, f'{indent}raise NotImplementedError("exercise {name}: {hints[name]}")\n']
            inside = True
        elif END.match(line):
            out.append(line)
            inside = False
        elif not inside:
            out.append(line)
    return "".join(out)


def student_copy(root, destination, hints):
    """Copy the project to destination with every exercise region cut out; returns the
    files changed."""
    if os.path.exists(destination) and not os.path.isdir(destination):
        raise FileExistsError(f"exercises make: {destination!r} is a file; expected a new or empty folder")
    if os.path.exists(destination) and os.listdir(destination):
        raise FileExistsError(f"exercises make: {destination!r} exists and is not empty")
    shutil.copytree(root, destination, dirs_exist_ok=True,
                    ignore=lambda folder, names: [n for n in names if n in SKIPPED or n.endswith(".egg-info")])
    changed = sorted({path for places in find_regions(root).values() for path, _, _ in places})
    with gzip.open(os.path.join(destination, SEALED), "wt") as f:
        json.dump(solutions_of(root), f)
    for path in changed:
        full = os.path.join(destination, path)
        with open(full) as f:
            text = f.read()
        with open(full, "w") as f:
            f.write(cut(text, hints))
    return changed


def bodies(text):
    """[(name, body lines)] of the regions of a file's text, in order."""
    found, current = [], None
    for line in text.splitlines(keepends=True):
        if (match := BEGIN.match(line)):
            current = (match.group(2), [])
        elif END.match(line) and current:
            found.append(current)
            current = None
        elif current:
            current[1].append(line)
    return found


def solutions_of(root):
    """{file: [(exercise name, solution lines)]} of a project: read from its source, or, in
    a student copy (whose source has the regions cut out), from the sealed file that `make`
    wrote there, so that the copy can still grade each exercise on its own."""
    sealed = os.path.join(root, SEALED)
    if os.path.exists(sealed):
        with gzip.open(sealed, "rt") as f:
            return json.load(f)
    solved = {}
    for path in python_files(root):
        with open(path) as f:
            regions = bodies(f.read())
        if regions:
            solved[os.path.relpath(path, root)] = regions
    return solved


def isolate(project, solutions, name, destination):
    """Copy the source packages of `project` to destination with every region but `name`'s
    taken from `solutions` (solutions_of), so that exercise `name` is graded on its own,
    whichever others the learner has done."""
    for package in SOURCES + ("exercises",):
        shutil.copytree(os.path.join(project, package), os.path.join(destination, package),
                        ignore=lambda folder, names: [n for n in names if n in SKIPPED])
    for relative, solved in solutions.items():
        if not os.path.exists(os.path.join(destination, relative)):
            continue
        with open(os.path.join(destination, relative)) as f:
            text = f.read()
        if [n for n, _ in bodies(text)] != [n for n, _ in solved]:
            raise ValueError(f"exercises: {relative} has regions {[n for n, _ in bodies(text)]} in the project, "
                             f"{[n for n, _ in solved]} in the solutions: the markers were changed")
        out, index, inside = [], 0, False
        for line in text.splitlines(keepends=True):
            if BEGIN.match(line):
                region, inside = solved[index], True
                out.append(line)
                keep_own = region[0] == name
            elif END.match(line) and inside:
                if not keep_own:
                    out += region[1]
                out.append(line)
                index, inside = index + 1, False
            elif not inside or keep_own:
                out.append(line)
        with open(os.path.join(destination, relative), "w") as f:
            f.write("".join(out))
