"""The marked regions of the source: finding them, reading their bodies, cutting them out
and splicing other bodies in.

A region is the lines between `# BEGIN EXERCISE name` and `# END EXERCISE`. In a student
copy the BEGIN line also carries the exercise's version, `# BEGIN EXERCISE name (version
1f3a9c0e2b7d4a15)`, so that a copy says, in the very place the learner writes, which version
of the exercise it was handed (exercises/versions.py).
"""

import os
import re

BEGIN = re.compile(r"^(\s*)# BEGIN EXERCISE (\w+)(?: \(version (\w+)\))?\s*$")
END = re.compile(r"^\s*# END EXERCISE\s*$")
SKIPPED = {".git", ".venv", "runs", "__pycache__", ".pytest_cache", ".hypothesis", "build", "dist"}
SOURCES = ("autograd", "nn", "transformer")


def python_files(root):
    """The .py files of the source packages under root, relative to root, in a fixed order."""
    for package in SOURCES:
        for folder, subfolders, files in os.walk(os.path.join(root, package)):
            subfolders[:] = sorted(s for s in subfolders if s not in SKIPPED)
            yield from (os.path.relpath(os.path.join(folder, name), root)
                        for name in sorted(files) if name.endswith(".py"))


def read(root, relative):
    with open(os.path.join(root, relative), encoding="utf-8", errors="replace") as f:
        return f.read()


def parse(text):
    """[(name, version or None, first line number, last line number, body lines)] of a text's regions."""
    found, current = [], None
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        if (match := BEGIN.match(line)):
            current = (match.group(2), match.group(3), number, [])
        elif END.match(line) and current:
            found.append((*current[:3], number, current[3]))
            current = None
        elif current:
            current[3].append(line)
    return found


def regions_of(root):
    """{name: [(file, version, body text)]} over the source packages of a project, in file order."""
    regions = {}
    for relative in python_files(root):
        text = read(root, relative)
        if "# BEGIN EXERCISE" in text:
            for name, version, _, _, body in parse(text):
                regions.setdefault(name, []).append((relative, version, "".join(body)))
    return regions


def find_regions(root):
    """{name: [(file, first line number, last line number)]}, from the markers."""
    found = {}
    for relative in python_files(root):
        text = read(root, relative)
        for name, _, first, last, _ in parse(text):
            found.setdefault(name, []).append((relative, first, last))
    return found


def rewrite(text, replace):
    """text with each region rewritten by replace(indent, name, version, body lines) -> lines
    (the markers included, or not, as replace returns them)."""
    out, current = [], None
    for line in text.splitlines(keepends=True):
        if current is None and (match := BEGIN.match(line)):
            current = (match.group(1), match.group(2), match.group(3), [line])
        elif current is not None and END.match(line):
            indent, name, version, lines = current
            out += replace(indent, name, version, lines + [line])
            current = None
        elif current is not None:
            current[3].append(line)
        else:
            out.append(line)
    return "".join(out)


def splice(text, name, bodies):
    """text with the bodies of its regions called `name`, in order, replaced by `bodies`."""
    remaining = list(bodies)

    def replace(indent, region, version, lines):
        if region != name:
            return lines
        return [lines[0], remaining.pop(0), lines[-1]]

    return rewrite(text, replace)


def line_in_submission(spliced, lineno, origins):
    """(file, line) in the submission of line `lineno` of a spliced text, or None. origins
    {name: [(file, first, last)]}: where the bodies spliced into the text's regions of each
    name, in order, sit in the submission (find_regions). A line after a spliced body and
    outside any other (a region that left a bracket open) is put on that region's END line."""
    seen, after = {}, None
    for name, _, first, last, _ in parse(spliced):
        index = seen[name] = seen.get(name, -1) + 1
        if name not in origins or index >= len(origins[name]) or first >= lineno:
            continue
        file, origin_first, origin_last = origins[name][index]
        if lineno < last:
            return file, origin_first + lineno - first
        after = (file, origin_last)
    return after
