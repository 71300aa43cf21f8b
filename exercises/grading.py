"""Grading submissions with the teacher's code only, the student's code isolated from it.

A submission's exercise regions are read as text; nothing else in it is read, imported or
run. The grader writes, once per run, the child's tree: the teacher's source packages with
every exercise cut (no solution at all). For each exercise of each submission, it takes the
files holding that exercise's regions from that tree, splices the submission's regions in
(and, in the files of the exercises its check needs, their solutions: NEEDS), and sends these
texts to a task child (exercises/sandbox.py), which runs the submission's code on the inputs
the check chooses and sends back data. The check, the judge, runs here, in the grader,
with the definitions: nothing that judges and no answer of the exercise is in the child. So
the submission's exercises/, tests, conftest.py or any other file it changed make no
difference to its grade, and its code cannot reach the judge, the teacher's files or another
student's check.
"""

import collections
import os
import re
import tempfile
from dataclasses import dataclass

from exercises.catalog import EXERCISES
from exercises.child_text import shown
from exercises.handout import not_started_or_unfinished
from exercises.loose import handed_in
from exercises.regions import find_regions, line_in_submission, python_files, read, regions_of, rewrite, splice
from exercises.sandbox import MEMORY_MB, run_jobs
from exercises.tree import write_tree
from exercises.twins import CUT_LIST, cut_list, cut_twins, kernels_cut
from exercises.versions import versions

NOT_IN_COPY = "not in that copy"
NO_PROJECT = "no project found"           # a submission with nothing to grade: one Result, exercise ""
MAX_REGION_CHARS = 200_000                # a region is a few lines; a larger one is refused, not sent
MAX_SOURCE_BYTES = 2 ** 20                # a source file of the project is a few KB; a larger one is not parsed
WITHHELD = "<a line of the teacher's code, withheld>"
# terminal escapes and other controls (not \t or \n), and the marks that turn text around (bidi)
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# The exercises whose solutions a check needs in its child besides its own (the smallest sets
# with which every solution passes: the end-to-end training runs an Embedding, a LayerNorm, a
# Linear, a matmul, cross-entropy and Adam; the cache a whole attention layer and a GPT);
# every other exercise is cut there. A decoder may take its argmax after a softmax. Every check
# but topological_sort's own gets topological_sort too: a Tensor's backward walks its graph with
# the scalar engine's topological_order, that exercise's region (engine.graph_nodes); value_mul's
# check walks its graphs itself, in the order the program made them, so that it needs nothing.
TRAINING = ("matmul_backward", "log_softmax", "layer_norm_backward", "linear", "embedding", "adam_step")
_OWN_NEEDS = {"value_mul": (), "topological_sort": ("value_mul",),
              **{name: tuple(n for n in TRAINING if n != name) for name in TRAINING},
              "matmul_backward": ("unbroadcast",) + TRAINING[1:],
              "attention": ("matmul_backward", "softmax", "softmax_backward"),      # its check runs a backward
              "greedy_decode": ("softmax",), "beam_search": ("softmax", "log_softmax"),
              "log_softmax": ("softmax",) + TRAINING[:1] + TRAINING[2:],     # log(softmax(x)) is a classic mistake
              "kv_cache": ("softmax", "linear", "attention", "heads", "causal_mask", "embedding", "greedy_decode")}
NEEDS = {name: _OWN_NEEDS.get(name, ()) + (() if name in ("topological_sort", "value_mul") else ("topological_sort",))
         for name in EXERCISES}


def printable(text):
    """text with its control characters (escapes that would redraw a teacher's or student's
    terminal) and the marks that reverse text shown as '?', and what is not Unicode (a file
    name's undecodable bytes) as its escape, so that every report can write it and show it."""
    return CONTROL.sub("?", text.encode("utf-8", "backslashreplace").decode("utf-8"))


@dataclass(frozen=True)
class Result:
    """One exercise of one submission: status is passed, not yet, timed out or not in that copy;
    or, exercise "", no project found in the submission."""
    student: str
    exercise: str
    status: str
    message: str

    def __post_init__(self):
        """A message may quote a submission's exception: shown printable (printable)."""
        object.__setattr__(self, "message", printable(self.message))

    def line(self):
        """The result as printed; a message's later lines indented, so that none can pass for
        another result's line (a submission's exception may hold "exercise X: passed")."""
        message = self.message.replace("\n", "\n    ")
        if self.status == NO_PROJECT:
            return f"{self.status}: {message}"
        if self.status == "passed":
            return f"exercise {self.exercise}: passed ({message})"
        return f"exercise {self.exercise}: {self.status}: {message}"


class Teacher:
    """The teacher's project as the grader sees it: its regions, the current version of each
    exercise, and the child's tree (every exercise cut), written once per grading run."""

    def __init__(self, root, folder, handed=None):
        """handed: {exercise: version} of the copy handed out, where the teacher names it (--like)."""
        from exercises.handout import cut_all
        self.handed = handed or {}
        self.regions = regions_of(root)
        self.versions = versions(root)
        texts = {path: read(root, path) for path in python_files(root)}
        # every region cut, and every twin (the faster tiers' code that answers an exercise too)
        self.cut = {path: cut_twins(rewrite(text, cut_all(self.versions, path)), list(EXERCISES))
                    for path, text in texts.items()}
        self.cut[CUT_LIST.replace(os.sep, "/")] = cut_list(kernels_cut(list(EXERCISES)))
        self.tree = os.path.join(folder, "tree")
        write_tree(self.tree, self.cut)

    def refusal(self, name, submitted):
        """(status, message) of an exercise whose submitted regions (`submitted`: [(file, version,
        body)]) cannot be graded: NOT_IN_COPY and why (no region, another version, another
        count of regions), or "not yet" where one region of a copy at the grader's version was
        removed, or, graded against the copy handed out (self.handed), where a region's lines
        or version differ from that copy's; None where they can."""
        own = self.regions[name]
        if name in self.handed and (not submitted or len(submitted) != len(own)):
            return "not yet", (f"the copy has {len(submitted)} region{'s' * (len(submitted) != 1)} for {name} that the "
                               f"grader can read, the copy handed out {len(own)}: a # BEGIN EXERCISE or # END "
                               "EXERCISE line was changed or removed; put them back as the copy had them")
        if not submitted:
            return NOT_IN_COPY, (f"the copy has no region for {name}: it was made before {name} was added, or "
                                 "without it (make --only), or its # BEGIN EXERCISE and # END EXERCISE lines were "
                                 "removed")
        edited = sorted({v for _, v, _ in submitted if v and name in self.handed and v != self.handed[name]})
        if edited:
            return "not yet", (f"the version on its # BEGIN EXERCISE line is {edited[0]}, not {self.handed[name]} as "
                               "in the copy handed out: put the line back as the copy had it")
        old = sorted({v for _, v, _ in submitted if v and v != self.versions[name]})
        if old:
            return NOT_IN_COPY, (f"the copy has version {old[0]} of {name}, the grader {self.versions[name]}: it "
                                 "changed since the copy was made, or the version on its # BEGIN EXERCISE line was "
                                 "edited")
        if len(submitted) != len(own) and any(v == self.versions[name] for _, v, _ in submitted):
            missing = list((collections.Counter(f for f, _, _ in own) - collections.Counter(f for f, _, _ in submitted)))
            return "not yet", (f"its region in {', '.join(missing) or 'a file'} is missing: the copy's other region of "
                               f"{name} is at the grader's version, so the file or the region's # BEGIN EXERCISE and "
                               "# END EXERCISE lines were removed")
        if len(submitted) != len(own):
            return NOT_IN_COPY, (f"the copy has {len(submitted)} region{'s' * (len(submitted) != 1)} for {name}, the "
                                 f"grader {len(own)}: it changed since the copy was made, or some of its # BEGIN "
                                 "EXERCISE and # END EXERCISE lines were removed")
        return None

    def overrides(self, name, submitted):
        """{file: text} of the files holding `name` or an exercise its check needs, from the tree,
        the submitted bodies of `name` (regions refusal found nothing wrong with) and the
        solutions of those needed spliced in."""
        bodies = {name: [body for _, _, body in submitted]}
        bodies.update({needed: [body for _, _, body in self.regions[needed]] for needed in NEEDS.get(name, ())})
        out = {}
        for exercise, places in ((n, self.regions[n]) for n in bodies):
            for path in dict.fromkeys(f for f, _, _ in places):
                out.setdefault(path, self.cut[path])
        for exercise, texts in bodies.items():
            queue = list(texts)
            for path in dict.fromkeys(f for f, _, _ in self.regions[exercise]):
                count = sum(f == path for f, _, _ in self.regions[exercise])
                out[path] = splice(out[path], exercise, [queue.pop(0) for _ in range(count)])
        return out


def syntax_error(overrides, origins):
    """The first syntax error of the spliced files {file: text}, at its line in the submission
    (origins {file: {name: [(submission's file, first, last)]}}: where the bodies spliced in
    came from), or None."""
    for path, text in overrides.items():
        try:
            compile(text, path, "exec", dont_inherit=True)
        except SyntaxError as err:
            if not err.lineno:                                        # a NUL byte: Python 3.12 names no line
                return f"syntax error in {path}: {err.msg}"
            file, line = line_in_submission(text, err.lineno, origins.get(path, {})) or (path, err.lineno)
            return f"syntax error in {file} line {line}: {err.msg}"
        except (ValueError, MemoryError, RecursionError) as err:      # a NUL byte; nesting past the parser's limits
            return (f"{path} cannot be compiled ({type(err).__name__}): Python's parser gave up on a region (a NUL "
                    "byte, or an expression too long or nested too deep)")
    return None


def origins_of(own, places):
    """{file: [(submission's file, first, last)]}: where the bodies spliced into each of the
    teacher's files `own` ([(file, version, body)]) came from, `places` the submission's regions."""
    origins = {}
    for (path, _, _), place in zip(own, places):
        origins.setdefault(path, []).append(place)
    return origins


def judge_of(name, overrides, origins, teacher=True, withheld=()):
    """What the grader runs for this task: the check, on the task child once it is ready, its
    message telling lines as the submission has them, and without the lines `withheld` (the
    solutions the child was given, which its code could put into an error message) nor, if
    there are any, the child's own texts (exercises/child_text.py). In the teacher's grade
    (teacher), an exercise the code calls that the check's child does not have (not in
    NEEDS) is not the copy's to do first."""
    def judge(task):
        from exercises.checks import run
        from exercises.zygote import Crashed
        try:
            task.ready()
            status, message = run(name, task)
        except Crashed as crash:
            status, message = crash.verdict
        needed = re.match(r"needs exercise (\w+),", message)
        if teacher and needed:
            message = (f"calls exercise {needed[1]}, which {name}'s check does not run with: write {name} without "
                       f"calling {needed[1]}'s code")
        return status, shown(without_lines(at_submission_lines(message, overrides, origins), withheld), bool(withheld),
                             name)
    return judge


def without_lines(message, withheld):
    """The message with each of the lines `withheld` it holds (whitespace aside) shown as
    WITHHELD; lines under 8 characters are too common to withhold."""
    for line in sorted({" ".join(line.split()) for line in withheld}, key=len, reverse=True):
        if len(line) >= 8:
            pattern = r"\s+".join(map(re.escape, line.split()))
            message = re.sub(pattern, WITHHELD, message)
    return message


def at_submission_lines(message, overrides, origins):
    """The message with a line of a spliced file it names, "(in transformer/masks.py line 12)",
    told as the submission's file and line, where that line came from the submission."""
    def moved(found):
        for path, text in overrides.items():
            if path.endswith(found[1]):
                place = line_in_submission(text, int(found[2]), origins.get(path, {}))
                return f"(in {place[0]} line {place[1]})" if place else found[0]
        return found[0]
    return re.sub(r"\(in (\S+) line (\d{1,9})\)", moved, message)


def _outside_its_function(submitted, own):
    """Why a submitted region of an exercise reaches outside the function it lies in (a line
    indented less than the teacher's region: code there would run when the module is
    imported, before any check), or None."""
    for (path, _, body), (_, _, solution) in zip(submitted, own):
        indent = min(len(line) - len(line.lstrip()) for line in solution.splitlines() if line.strip())
        for line in body.splitlines():
            if line.strip() and not line.lstrip().startswith("#") and len(line) - len(line.lstrip()) < indent:
                return (f"a line of the region in {path} is indented less than the region ({line.strip()[:60]!r}): "
                        "it would run outside its function, when the module is imported")
    return None


def _too_large(folder):
    """The source files of a submission too large to be the project's, not read."""
    return [path for path in python_files(folder) if os.path.getsize(os.path.join(folder, path)) > MAX_SOURCE_BYTES]


def not_handed_in(regions, folder, files):
    """The files holding an exercise's regions (the teacher's `regions`) that the submission at
    folder lacks: not in its project, or, for loose files, not among those handed in (`files`:
    loose.handed_in's, None for a whole project)."""
    paths = list(dict.fromkeys(path for path, _, _ in regions))
    return [p for p in paths if (p not in files if files is not None else not os.path.isfile(os.path.join(folder, p)))]


def tasks_for(teacher, student, folder, names):
    """(tasks for run_jobs, results known without running anything) of one submission."""
    if (too_large := _too_large(folder)):
        return [], [Result(student, name, "not yet", f"{too_large[0]} is over {MAX_SOURCE_BYTES // 1024} KB, "
                           "not read (the project's source files are a few KB)") for name in names]
    submitted, places, files = regions_of(folder), find_regions(folder), handed_in(folder)
    tasks, known = [], []
    for name in names:
        if (missing := not_handed_in(teacher.regions[name], folder, files)):
            known.append(Result(student, name, "not yet", f"not handed in: {', '.join(missing)}, where {name} is "
                                "written"))
            continue
        if any(len(body) > MAX_REGION_CHARS for _, _, body in submitted.get(name, [])):
            known.append(Result(student, name, "not yet", f"a region of {name} is over {MAX_REGION_CHARS} characters"))
            continue
        if (outside := _outside_its_function(submitted.get(name, []), teacher.regions[name])):
            known.append(Result(student, name, "not yet", outside))
            continue
        if (refused := teacher.refusal(name, submitted.get(name, []))):
            known.append(Result(student, name, *refused))
            continue
        overrides = teacher.overrides(name, submitted[name])
        origins = {path: {name: spots} for path, spots in origins_of(teacher.regions[name], places.get(name, [])).items()}
        if (problem := syntax_error(overrides, origins)):
            known.append(Result(student, name, "not yet", problem))
        else:
            given = [line for needed in NEEDS[name] for _, _, body in teacher.regions[needed] for line in body.splitlines()]
            tasks.append(((student, name), overrides, judge_of(name, overrides, origins, withheld=given)))
    return tasks, known


def handed_out_in(submissions, current):
    """The exercises of the catalog that more than half of the submissions ({student: folder})
    hold a region of at its current version (`current`: {name: version}, the teacher's), in
    the lectures' order: what was handed out to the class. A copy made with `make --only`
    holds the regions of those exercises only (the others are solved, their markers gone), so
    an exercise in no copy was not handed out, and its rows would all say `not in that copy`.
    More than half, not one: a student who wraps code their copy holds solved in markers, the version
    taken from another copy, must not add an exercise (a pass for them, a row for everyone);
    an older copy without an exercise most have is still graded, `not in that copy`."""
    counts = _holding(submissions, current)
    return [name for name in EXERCISES if 2 * counts.get(name, 0) > len(submissions)]


def held_by_some(submissions, current, names):
    """Those of `names` that some submission holds at the current version (though not more
    than half: a class whose students uploaded only the files they changed)."""
    counts = _holding(submissions, current)
    return [name for name in names if counts.get(name, 0)]


def _holding(submissions, current):
    """{exercise: how many submissions hold a region of it at its current version}; loose
    files count for the files handed in only (the stubs beside them hand nothing out)."""
    counts = {}
    for folder in submissions.values():
        if not _too_large(folder):
            files = handed_in(folder)
            for name, places in regions_of(folder).items():
                counts[name] = counts.get(name, 0) + any(
                    version == current.get(name) and (files is None or path in files) for path, version, _ in places)
    return counts


ONE_AT_A_TIME = 1    # the default: no two children run at once (see grade)


def grade(teacher_root, submissions, names=None, timeout=20.0, jobs=ONE_AT_A_TIME, memory_mb=MEMORY_MB, notes=None,
          handed=None):
    """[Result] of the exercises `names` (default: all; or {student: names}) of every
    submission ({student: folder}), checked over `jobs` processes at once, each in at most
    `memory_mb` of memory. notes: a list that gets a line if the checks' isolation is by
    process only. handed: {exercise: version} of the copy handed out (--like), so that a
    version edited on a BEGIN line is `not yet`, not `not in that copy`.  One at a time by default: nearly every check's child holds a solution its
    check needs (topological_sort's, for a Tensor's backward), and two children running at
    once can signal each other through the cores, caches and memory they share (a hostile
    trial timed about 130 bits a second): enough, over a check's time, for a solution."""
    import secrets
    from exercises.checks import NOT_STARTED, feedback
    wanted = names if isinstance(names, dict) else {student: list(names or EXERCISES) for student in submissions}
    feedback.FRESH[:] = [secrets.randbelow(2 ** 31) for _ in range(2)]      # the cases no copy has seen
    with tempfile.TemporaryDirectory(prefix="exercises-teacher-") as folder:
        os.chmod(folder, 0o711)
        teacher = Teacher(teacher_root, folder, handed)
        tasks, results = [], []
        for student, path in submissions.items():
            more, known = tasks_for(teacher, student, path, wanted[student])
            tasks += more
            results += known
        hide, regions = [teacher_root, *submissions.values()], {}
        for (student, name), (status, message) in run_jobs(tasks, teacher.tree, timeout, jobs,
                                                           memory_mb, hide, notes):
            if (status, message) == NOT_STARTED:                 # all of its regions, or only some?
                if student not in regions:
                    regions[student] = regions_of(submissions[student])
                status, message = not_started_or_unfinished(name, regions[student].get(name, []))
            results.append(Result(student, name, status, message))
    order = {(s, n): i for i, (s, n) in enumerate((s, n) for s in submissions for n in wanted[s])}
    return sorted(results, key=lambda r: order[(r.student, r.exercise)])
