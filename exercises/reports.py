"""Writing grades: a CSV of student x exercise, its totals (a row per student), and
Gradescope's results.json.

Whatever a check's message holds (a student's exception can carry 50 MB of text), every CSV
cell and every text of a results.json is capped at CAP characters, the cut said at its end;
a CSV cell that a spreadsheet would run as a formula is quoted.
"""

import csv
import json
import os

from exercises.gradescope import run_autograder
from exercises.grading import NO_PROJECT, NOT_IN_COPY
from exercises.submissions import SCRIPT

CAP = 2000                          # characters of a CSV cell or a results.json text: a long message fits
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")   # what a spreadsheet may read as the start of a formula


def capped(text):
    """text, or its first CAP characters and how many more were cut."""
    cut = len(text) - CAP
    return text if cut <= 0 else f"{text[:CAP]}... ({plural(cut, 'character')} cut)"


def _cell(text):
    """A CSV cell of text: capped, and a leading = + - @ quoted with ' so that a spreadsheet
    shows it rather than running it as a formula (a submission named =HYPERLINK(...))."""
    text = capped(text)
    return "'" + text if text[:1] in FORMULA_STARTS else text


def write_csv(results, path):
    with open(path, "w", newline="", encoding="utf-8", errors="backslashreplace") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "exercise", "result", "message"])
        for r in results:
            writer.writerow([_cell(cell) for cell in (r.student, r.exercise, r.status, r.message)])


def totals_path(out):
    """Where the one-row-per-student table goes beside the CSV `out`: grades.csv -> grades-totals.csv."""
    stem, extension = os.path.splitext(out)
    return f"{stem}-totals{extension or '.csv'}"


def write_totals(results, names, path):
    """A CSV of one row per student, for a gradebook: `student, passed, of`, then one column per
    exercise graded (`names`) holding its result.  `of` counts the exercises graded in that
    student's copy (one not in that copy is 0 of 0 points, as on Gradescope); a submission
    with no project found passes 0 of them all."""
    rows = {}
    for r in results:
        rows.setdefault(r.student, {})[r.exercise] = r.status
    with open(path, "w", newline="", encoding="utf-8", errors="backslashreplace") as f:
        writer = csv.writer(f)
        writer.writerow(["student", "passed", "of", *names])
        for student, statuses in rows.items():
            unread = statuses.get("") == NO_PROJECT
            cells = [NO_PROJECT if unread else statuses.get(name, "") for name in names]
            graded = [cell for cell in cells if cell != NOT_IN_COPY]
            writer.writerow([_cell(student), graded.count("passed"), len(graded), *cells])


def _test(r):
    """One exercise's test: 1 point if graded; if not in that copy, 0 of 0 points, named so and
    saying why (its line), neither passed nor failed: the student sees why it was not graded."""
    if r.status == NOT_IN_COPY:
        return {"name": f"{r.exercise} (not graded: {NOT_IN_COPY})", "score": 0.0, "max_score": 0.0,
                "output": capped(r.line())}
    return {"name": r.exercise, "score": float(r.status == "passed"), "max_score": 1.0,
            "status": "passed" if r.status == "passed" else "failed", "output": capped(r.line())}


def gradescope(results, notes=()):
    """Gradescope's results.json for one student's results: one test per exercise, 1 point each
    when graded; one not in that copy (not handed out, or changed since) is a test of 0 points
    saying why, after those graded, and the submission's output names them in one line. No project found: no test, the
    output says why. `notes` (the grader's own lines: an isolation by process only) head the
    output. Every text capped (capped)."""
    if any(r.status == NO_PROJECT for r in results):
        return {"score": 0.0, "tests": [], "output": capped("\n".join(r.line() for r in results))}
    tests = [_test(r) for r in sorted(results, key=lambda r: r.status == NOT_IN_COPY)]      # stable: graded first
    report = {"score": sum(t["score"] for t in tests), "tests": tests}
    if (absent := [r.exercise for r in results if r.status == NOT_IN_COPY]):
        report["output"] = capped(f"not graded, not in that copy (each test of 0 points below says why): "
                                  f"{', '.join(absent)}")
    if notes:
        report["output"] = capped("\n".join([*notes, *([report["output"]] if "output" in report else [])]))
    return report


def write_gradescope(results, path, notes=()):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(gradescope(results, notes), f, indent=1)


def write_gradescope_class(results, folder, names):
    """folder/STUDENT/results.json for each student (but one named run_autograder, refused),
    and folder/run_autograder, which grades the exercises `names` (those graded here) of the
    submission Gradescope gives it."""
    for student in dict.fromkeys(r.student for r in results if r.student != SCRIPT):   # that one was refused
        write_gradescope([r for r in results if r.student == student], os.path.join(folder, student, "results.json"))
    script = os.path.join(folder, "run_autograder")
    with open(script, "w") as f:
        f.write(run_autograder(names))
    os.chmod(script, 0o755)


def plural(count, noun):
    """'1 submission', '2 submissions'."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def summary(results, out):
    """The closing line of grading a class: submissions, checks passed of those graded (an
    exercise not in a student's copy is no check: its row says why), where the CSVs are."""
    students = dict.fromkeys(r.student for r in results)
    checks = [r for r in results if r.status not in (NO_PROJECT, NOT_IN_COPY)]
    passed = sum(r.status == "passed" for r in checks)
    unread = len({r.student for r in results if r.status == NO_PROJECT})
    missing = f" ({unread} with no project found)" if unread else ""
    absent = sum(r.status == NOT_IN_COPY for r in results)
    absent = f" ({absent} more not in that copy: 0 points, the rows say why)" if absent else ""
    return (f"graded {plural(len(students), 'submission')}{missing}: {passed} of {plural(len(checks), 'check')} "
            f"passed{absent}; wrote {out} and {totals_path(out)} (a row per student)")
