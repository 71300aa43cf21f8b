"""The learner's own `check`, in a student copy, judged as the teacher's grade will be.

The teacher's grade reads a submission's exercise regions as text and splices them into the
teacher's files: whatever else the learner changed (a helper above a region, an edited
import, another module) is not graded. So `check` in a copy does the same with the copy's
source files as `make` wrote them (exercises/as_made.json: stubs where exercises were cut,
no solution): the child's tree is those files, it splices the copy's regions, read as text,
into them, runs each check's probes on them in a child process while the check judges here
(exercises/sandbox.py), and names each file changed outside its regions, "changes outside
the exercise regions are not graded: FILE".
"""

import collections
import json
import os

from exercises.regions import (
    find_regions,
    parse,
    python_files,
    read,
    regions_of,
    splice,
)

AS_MADE = os.path.join("exercises", "as_made.json")
OUTSIDE = "changes outside the exercise regions are not graded: {}"
OLD_COPY = "this copy was made before exercises/as_made.json existed: check runs its files as they are"


def record_as_made(copy):
    """Write the copy's source files, as made, to its exercises/as_made.json."""
    with open(os.path.join(copy, AS_MADE), "w", encoding="utf-8") as f:
        json.dump({path: read(copy, path) for path in python_files(copy)}, f, indent=0)


def as_graded(root, made):
    """(texts, origins, problems) of the copy at root: texts {file: text}, the files as made
    (`made`) with the copy's regions spliced in; origins {file: {name: [(file, first, last)]}},
    where each body spliced in sits in the copy; problems {exercise: why its regions cannot
    be read}."""
    bodies, places = regions_of(root), find_regions(root)
    counts = collections.Counter(name for text in made.values() for name, *_ in parse(text))
    problems = {name: (f"the copy has {len(bodies.get(name, []))} regions for {name}, made with {count}: put its "
                       "# BEGIN EXERCISE and # END EXERCISE lines back as they were, or the grade cannot read it")
                for name, count in counts.items() if len(bodies.get(name, [])) != count}
    queue = {name: [(body, place) for (_, _, body), place in zip(bodies[name], places[name])]
             for name in counts if name not in problems}
    texts, origins = {}, {}
    for path, text in made.items():
        names = [name for name, *_ in parse(text) if name in queue]
        taken = {name: [queue[name].pop(0) for _ in range(names.count(name))] for name in dict.fromkeys(names)}
        for name, pairs in taken.items():
            text = splice(text, name, [body for body, _ in pairs])
        texts[path], origins[path] = text, {name: [place for _, place in pairs] for name, pairs in taken.items()}
    return texts, origins, problems


def changed_outside(root, texts):
    """The source files of the copy at root that differ from `texts` (the files as made with the
    copy's regions spliced in), or were not in the copy as made: changes the grade ignores."""
    on_disk = set(python_files(root))
    return sorted({path for path, text in texts.items() if path not in on_disk or read(root, path) != text}
                  | (on_disk - set(texts)))


def check_own_copy(root, names, timeout, memory_mb):
    """([Result], [note]) of checking the copy at root as the teacher's grade will: its regions
    spliced into its files as made; a note names each file changed outside its regions."""
    import tempfile
    from exercises.grading import NOT_IN_COPY, Result, judge_of, syntax_error
    from exercises.handout import not_started_or_unfinished, unwritten
    from exercises.sandbox import run_jobs
    from exercises.tree import write_tree
    if not os.path.exists(os.path.join(root, AS_MADE)):
        made, notes = {path: read(root, path) for path in python_files(root)}, [OLD_COPY]
    else:
        with open(os.path.join(root, AS_MADE), encoding="utf-8") as f:
            made, notes = json.load(f), []
    texts, origins, problems = as_graded(root, made)
    regions = regions_of(root)
    # "not started" first: not hidden behind another exercise it needs
    untouched = {name for name in names if unwritten(name, regions.get(name, []))}
    verdicts = {name: not_started_or_unfinished(name, regions.get(name, [])) if name in untouched
                else (NOT_IN_COPY, problems[name]) for name in names if name in untouched or name in problems}
    for name in [name for name in names if name not in verdicts]:
        spliced = {path: texts[path] for path, named in origins.items() if name in named}
        if (error := syntax_error(spliced, origins)):
            verdicts[name] = ("not yet", error)
    changed = {path: text for path, text in texts.items() if text != made[path]}
    tasks = [(name, changed, judge_of(name, changed, origins, teacher=False)) for name in names if name not in verdicts]
    with tempfile.TemporaryDirectory(prefix="exercises-check-") as folder:
        os.chmod(folder, 0o711)
        write_tree(os.path.join(folder, "tree"), made)
        ran = dict(run_jobs(tasks, os.path.join(folder, "tree"), timeout, os.cpu_count() or 1, memory_mb,
                            hide=[root], notes=notes, as_root=True))   # the student's own code
    verdicts.update(ran)
    notes += [OUTSIDE.format(path) for path in changed_outside(root, texts)]
    return [Result("", name, *(_naming_needed(name, verdicts) if name in ran else verdicts[name]))
            for name in names], notes


def _naming_needed(name, verdicts):
    """name's (status, message) from its check, naming the exercises the check runs
    (grading.NEEDS) that were checked beside it and did not pass: here they are the learner's
    own code, where the teacher's grade runs their solutions, so a wrong softmax may be why
    attention fails, times out or runs out of memory.  A check that stopped at a needed
    exercise not written yet says so itself (NEEDS_EXERCISE)."""
    from exercises.checks import NEEDS_EXERCISE_START
    from exercises.grading import NEEDS
    status, message = verdicts[name]
    failing = [needed for needed in NEEDS.get(name, ()) if verdicts.get(needed, ("passed",))[0] != "passed"]
    if status == "passed" or not failing or message.startswith(NEEDS_EXERCISE_START):
        return status, message
    return status, (f"{message} (its check runs your {', '.join(failing)}, which do{'es' * (len(failing) == 1)} "
                    "not pass yet: the teacher's grade runs the solution there; check that first)")
