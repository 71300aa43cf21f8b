"""Writing grades: a CSV of student x exercise, and Gradescope's results.json."""

import csv
import json
import os

from exercises.grading import NO_PROJECT, NOT_IN_COPY

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this in its image: the teacher's project is /autograder/source (set up by
# setup.sh: pip install -e /autograder/source), the student's copy /autograder/submission.
# check writes results.json whatever the submission holds (an exercise not passed, no project
# found: exit 1 or 2, and the results say so); only a grader that failed before writing it
# leaves none, and then the results say that. Gradescope reads results.json: exit 0.
autograder=${AUTOGRADER:-/autograder}
results="$autograder/results/results.json"
mkdir -p "$autograder/results" && rm -f "$results"
(cd "$autograder/source" && python -m exercises check all --project "$autograder/submission" --gradescope "$results")
if [ ! -s "$results" ]; then
    failed="The grader failed before grading this submission (the autograder output says why): tell your teacher."
    echo "{\\"score\\": 0.0, \\"tests\\": [], \\"output\\": \\"$failed\\"}" > "$results"
fi
exit 0
"""


def write_csv(results, path):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "exercise", "result", "message"])
        for r in results:
            writer.writerow([r.student, r.exercise, r.status, r.message])


def gradescope(results):
    """Gradescope's results.json for one student's results: one test per exercise graded, 1
    point each. An exercise not in that copy (not handed out, or changed since) is no test and
    no point: the submission's output names it. No project found: no test, the output says why."""
    if any(r.status == NO_PROJECT for r in results):
        return {"score": 0.0, "tests": [], "output": "\n".join(r.line() for r in results)}
    tests = [{"name": r.exercise, "score": float(r.status == "passed"), "max_score": 1.0,
              "status": "passed" if r.status == "passed" else "failed", "output": r.line()}
             for r in results if r.status != NOT_IN_COPY]
    report = {"score": sum(t["score"] for t in tests), "tests": tests}
    if (absent := [r for r in results if r.status == NOT_IN_COPY]):
        report["output"] = "\n".join(r.line() for r in absent)
    return report


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


def plural(count, noun):
    """'1 submission', '2 submissions'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def summary(results, out):
    """The closing line of grading a class: submissions, checks passed, where the CSV is."""
    students = dict.fromkeys(r.student for r in results)
    checks = [r for r in results if r.status != NO_PROJECT]
    passed = sum(r.status == "passed" for r in checks)
    unread = len(results) - len(checks)
    missing = f" ({unread} with no project found)" if unread else ""
    return (f"graded {plural(len(students), 'submission')}{missing}: {passed} of {plural(len(checks), 'check')} "
            f"passed; wrote {out}")
