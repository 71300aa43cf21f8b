"""Grading submissions with the teacher's code only.

A submission's exercise regions are read as text; nothing else in it is read, imported or
run. For each exercise, the grader takes a pristine temporary copy of the teacher's own
source packages, splices the submission's regions of that exercise into it (in memory),
leaves every other region the teacher's solution, and runs the
teacher's check in a child process with a time limit. So the submission's exercises/,
tests, conftest.py or any other file it changed make no difference to its grade.

The grader imports the pristine project once, before the children fork; each child swaps
the learner's code into the functions it changed (exercises/hotpatch.py), or, when that
cannot be done, imports the project afresh with the spliced files.
"""

import compileall
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass

from exercises.catalog import EXERCISES
from exercises.hotpatch import patch
from exercises.regions import SKIPPED, SOURCES, find_regions, line_in_submission, read, regions_of, splice
from exercises.sandbox import MEMORY_MB, prepare_grader, run_jobs
from exercises.versions import versions

NOT_IN_COPY = "not in that copy"
NO_PROJECT = "no project found"           # a submission with nothing to grade: one Result, exercise ""
PRELOADED = ("autograd", "nn", "nn.functional", "transformer", "transformer.attention", "transformer.decoding",
             "transformer.families.decoder_only", "transformer.masks", "transformer.positional",
             "autograd.kernels.loops", "autograd.kernels.reference")


@dataclass(frozen=True)
class Result:
    """One exercise of one submission: status is passed, not yet, timed out or not in that copy;
    or, exercise "", no project found in the submission."""
    student: str
    exercise: str
    status: str
    message: str

    def line(self):
        if self.status == NO_PROJECT:
            return f"{self.status}: {self.message}"
        if self.status == "passed":
            return f"exercise {self.exercise}: passed ({self.message})"
        return f"exercise {self.exercise}: {self.status}: {self.message}"


class Teacher:
    """The teacher's project as the grader sees it: a pristine copy of its source packages
    (made once per grading run), its regions, and the current version of each exercise."""

    def __init__(self, root, folder):
        for package in SOURCES:
            shutil.copytree(os.path.join(root, package), os.path.join(folder, package),
                            ignore=lambda _, names: [n for n in names if n in SKIPPED])
        compileall.compile_dir(folder, quiet=2)        # each check then imports the rest from .pyc
        self.root = folder
        self.regions = regions_of(folder)
        self.versions = versions(folder)

    def overrides(self, name, submitted):
        """{file: text} of the pristine files holding `name`, with the submitted bodies spliced in;
        or a str saying why this exercise is not in the submission."""
        own = self.regions[name]
        if not submitted:
            return (f"the copy has no region for {name}: it was made before {name} was added, or without it "
                    "(make --only), or its # BEGIN EXERCISE and # END EXERCISE lines were removed")
        old = sorted({v for _, v, _ in submitted if v and v != self.versions[name]})
        if old:
            return (f"the copy has version {old[0]} of {name}, the grader {self.versions[name]}: it changed since "
                    "the copy was made, or the version on its # BEGIN EXERCISE line was edited")
        if len(submitted) != len(own):
            return (f"the copy has {len(submitted)} regions for {name}, the grader {len(own)}: it changed since "
                    "the copy was made, or some of its # BEGIN EXERCISE and # END EXERCISE lines were removed")
        bodies = iter(body for _, _, body in submitted)
        out = {}
        for path in dict.fromkeys(f for f, _, _ in own):
            count = sum(f == path for f, _, _ in own)
            out[path] = splice(read(self.root, path), name, [next(bodies) for _ in range(count)])
        return out


def syntax_error(overrides, origins):
    """The first syntax error of the spliced files {file: text}, at its line in the submission
    (origins {file: {name: [(submission's file, first, last)]}}: where the bodies spliced in
    came from), or None."""
    for path, text in overrides.items():
        try:
            compile(text, path, "exec", dont_inherit=True)
        except SyntaxError as err:
            file, line = line_in_submission(text, err.lineno or 0, origins.get(path, {})) or (path, err.lineno)
            return f"syntax error in {file} line {line}: {err.msg}"
    return None


def origins_of(own, places):
    """{file: [(submission's file, first, last)]}: where the bodies spliced into each of the
    teacher's files `own` ([(file, version, body)]) came from, `places` the submission's regions."""
    origins = {}
    for (path, _, _), place in zip(own, places):
        origins.setdefault(path, []).append(place)
    return origins


def _module_name(path):
    return path[:-len(".py")].replace(os.sep, ".").removesuffix(".__init__")


def _check_job(name, root, overrides, origins):
    """What the child runs: the learner's regions swapped into the imported project's
    functions (exercises/hotpatch.py), or, where that cannot be done, the project imported
    afresh with the spliced files (an error there is an import-time error); then the check."""
    def job():
        import importlib
        patched = all(patch(_module_name(path), os.path.join(root, path), read(root, path), text)
                      for path, text in overrides.items())
        if not patched:
            _forget_project()
            for path in overrides:
                try:
                    importlib.import_module(_module_name(path))
                except BaseException as err:             # noqa: BLE001  reported, not raised
                    return "not yet", f"importing {path} raised {type(err).__name__}: {err}"
        from exercises.checks import run
        status, message = run(name)
        return status, at_submission_lines(message, overrides, origins)
    return job


def at_submission_lines(message, overrides, origins):
    """The message with a line of a spliced file it names, "(in transformer/masks.py line 12)",
    told as the submission's file and line, where that line came from the submission."""
    def moved(found):
        for path, text in overrides.items():
            if path.endswith(found[1]):
                place = line_in_submission(text, int(found[2]), origins.get(path, {}))
                return f"(in {place[0]} line {place[1]})" if place else found[0]
        return found[0]
    return re.sub(r"\(in (\S+) line (\d+)\)", moved, message)


def _forget_project():
    for module in [m for m in sys.modules if m.split(".")[0] in SOURCES]:
        del sys.modules[module]


def _import_pristine(folder):
    """Import the pristine copy's modules that the regions and the checks live in, once,
    before the children fork."""
    import importlib
    sys.path.insert(0, folder)
    for module in PRELOADED + tuple(_module_name(p) for places in regions_of(folder).values() for p, _, _ in places):
        importlib.import_module(module)


def tasks_for(teacher, student, folder, names):
    """(tasks for run_jobs, results known without running anything) of one submission."""
    submitted, places = regions_of(folder), find_regions(folder)
    tasks, known = [], []
    for name in names:
        overrides = teacher.overrides(name, submitted.get(name, []))
        if isinstance(overrides, str):
            known.append(Result(student, name, NOT_IN_COPY, overrides))
            continue
        origins = {path: {name: spots} for path, spots in origins_of(teacher.regions[name], places.get(name, [])).items()}
        if (problem := syntax_error(overrides, origins)):
            known.append(Result(student, name, "not yet", problem))
        else:
            tasks.append(((student, name), teacher.root, overrides, _check_job(name, teacher.root, overrides, origins)))
    return tasks, known


def grade(teacher_root, submissions, names=None, timeout=20.0, jobs=None, memory_mb=MEMORY_MB):
    """[Result] of the exercises `names` (default: all; or {student: names}) of every
    submission ({student: folder}), checked in parallel over `jobs` processes (default:
    every core), each in at most `memory_mb` of memory."""
    if any(m == p or m.startswith(p + ".") for m in sys.modules for p in SOURCES):
        raise RuntimeError("exercises: the grader must not have imported the project before grading")
    wanted = names if isinstance(names, dict) else {student: list(names or EXERCISES) for student in submissions}
    prepare_grader()
    with tempfile.TemporaryDirectory(prefix="exercises-teacher-") as folder:
        teacher = Teacher(teacher_root, folder)
        _import_pristine(folder)
        tasks, results = [], []
        for student, path in submissions.items():
            more, known = tasks_for(teacher, student, path, wanted[student])
            tasks += more
            results += known
        try:
            for (student, name), (status, message) in run_jobs(tasks, timeout, jobs or os.cpu_count() or 1, memory_mb):
                results.append(Result(student, name, status, message))
        finally:
            _forget_project()
            sys.path.remove(folder)
    order = {(s, n): i for i, (s, n) in enumerate((s, n) for s in submissions for n in wanted[s])}
    return sorted(results, key=lambda r: order[(r.student, r.exercise)])
