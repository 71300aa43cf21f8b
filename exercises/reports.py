"""Writing grades: a CSV of student x exercise, and Gradescope's results.json."""

import csv
import json
import os

from exercises.grading import NOT_IN_COPY

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this in its image: the teacher's project is /autograder/source (set up by
# setup.sh: pip install -e /autograder/source), the student's copy /autograder/submission.
set -euo pipefail
cd /autograder/source
python -m exercises check all --project /autograder/submission \\
    --gradescope /autograder/results/results.json || true
"""


def submission_folders(folder):
    """{student: folder} of the sub-folders of folder, in name order."""
    if not os.path.isdir(folder):
        return {}
    return {name: os.path.join(folder, name) for name in sorted(os.listdir(folder))
            if os.path.isdir(os.path.join(folder, name)) and not name.startswith(".")}


def write_csv(results, path):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "exercise", "result", "message"])
        for r in results:
            writer.writerow([r.student, r.exercise, r.status, r.message])


def gradescope(results):
    """Gradescope's results.json for one student's results: one test per exercise, 1 point
    each (0 for one not in that copy: not handed out, or added since)."""
    tests = [{"name": r.exercise, "score": float(r.status == "passed"), "max_score": float(r.status != NOT_IN_COPY),
              "status": "passed" if r.status == "passed" else "failed", "output": r.line()} for r in results]
    return {"score": sum(t["score"] for t in tests), "tests": tests}


def write_gradescope(results, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(gradescope(results), f, indent=1)


def write_gradescope_class(results, folder):
    """folder/STUDENT/results.json for each student, and folder/run_autograder."""
    for student in dict.fromkeys(r.student for r in results):
        write_gradescope([r for r in results if r.student == student], os.path.join(folder, student, "results.json"))
    script = os.path.join(folder, "run_autograder")
    with open(script, "w") as f:
        f.write(RUN_AUTOGRADER)
    os.chmod(script, 0o755)


def summary(results, out):
    students = dict.fromkeys(r.student for r in results)
    passed = sum(r.status == "passed" for r in results)
    return f"graded {len(students)} submissions: {passed} of {len(results)} checks passed; wrote {out}"
