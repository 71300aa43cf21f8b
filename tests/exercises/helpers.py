"""Shared by the tests of the exercises: run the command line, make copies, plant answers."""
import os
import subprocess
import sys

from exercises.regions import read, regions_of, rewrite

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOLUTIONS = regions_of(ROOT)


def exercises(*args, cwd=ROOT):
    """(exit status, stdout + stderr) of python -m exercises ARGS run in cwd."""
    env = {**os.environ, "PYTHONPATH": str(cwd)}
    run = subprocess.run([sys.executable, "-m", "exercises", *args], cwd=cwd, capture_output=True, text=True, env=env)
    return run.returncode, run.stdout + run.stderr


def plant(copy, name, answer, which=None):
    """Write `answer` into the regions called `name` of the copy (all of them, or only the
    which-th, the others solved): answer is the new body text, or a function of the teacher's."""
    solutions = [body for _, _, body in SOLUTIONS[name]]
    seen = [0]

    def replace(indent, region, version, lines):
        if region != name:
            return lines
        index = seen[0]
        seen[0] += 1
        if which is not None and index != which:
            return [lines[0], solutions[index], lines[-1]]
        return [lines[0], answer(solutions[index]) if callable(answer) else answer, lines[-1]]

    for path in dict.fromkeys(f for f, _, _ in SOLUTIONS[name]):
        text = rewrite(read(copy, path), replace)
        with open(os.path.join(copy, path), "w") as f:
            f.write(text)


def solve(copy, name):
    """Write the teacher's solution of `name` into the copy."""
    plant(copy, name, lambda solution: solution)


def region_files(copy, destination):
    """Copy only the files of copy holding regions to destination (a submission as small as it gets)."""
    for path in {f for places in SOLUTIONS.values() for f, _, _ in places}:
        os.makedirs(os.path.dirname(os.path.join(destination, path)), exist_ok=True)
        with open(os.path.join(destination, path), "w") as f:
            f.write(read(copy, path))


def grade_pairs(submissions, names, timeout=20):
    """grading.grade run in a fresh process (the grader must not have the project imported):
    {(student, exercise): Result line} for {student: folder} and {student: [exercise names]}."""
    import json
    import tempfile
    with tempfile.TemporaryDirectory() as folder:
        request = os.path.join(folder, "request.json")
        with open(request, "w") as f:
            json.dump({"submissions": {k: str(v) for k, v in submissions.items()}, "names": names,
                       "timeout": timeout}, f)
        run = subprocess.run([sys.executable, "-m", "tests.exercises.grade_pairs", request], cwd=ROOT,
                             capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT})
        assert run.returncode == 0, run.stderr
        return {(r[0], r[1]): r[2] for r in json.loads(run.stdout)}
