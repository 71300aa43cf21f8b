"""python -m demos.bench.grading [--students 200] [--jobs N] [--json FILE]: how long a class takes to grade.

Writes `--students` submissions of every exercise, each solved (the files of this project
that hold exercise regions, the teacher's solution in every one: every check runs to the
end, the slowest case), and times `python -m exercises grade` on them with `--jobs` checks
at once. Prints the submissions, checks passed, seconds and checks a second. On a machine
shared with other work the time includes waiting for the cores. The checks run isolated as
the grader does on this machine (the grade's first line says when by process only).
"""

import csv
import os
import shutil
import subprocess
import sys
import tempfile
import time

from demos._flags import a_file_to_write, command_line, integer_at_least
from demos._results import write_json
from exercises.grading import ONE_AT_A_TIME

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOURCES = ("autograd", "nn", "transformer")


def files_with_regions():
    """The project's .py files (relative to ROOT) that hold an exercise region."""
    found = []
    for package in SOURCES:
        for folder, subfolders, files in os.walk(os.path.join(ROOT, package)):
            subfolders[:] = [s for s in subfolders if s != "__pycache__"]
            for name in files:
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as f:
                    if name.endswith(".py") and "# BEGIN EXERCISE" in f.read():
                        found.append(os.path.relpath(path, ROOT))
    return sorted(found)


def write_class(folder, students):
    """`students` submission folders in folder, each holding the files with regions."""
    files = files_with_regions()
    for number in range(students):
        for path in files:
            target = os.path.join(folder, f"student{number:03d}", path)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(os.path.join(ROOT, path), target)


def main(argv=None):
    parser = command_line("demos.bench.grading", __doc__)
    parser.add_argument("--students", type=integer_at_least(1), default=200)
    parser.add_argument("--jobs", type=integer_at_least(1), default=ONE_AT_A_TIME,
                        help="checks at once (default: grade's, one at a time)")
    parser.add_argument("--json", type=a_file_to_write, help="write the figures to this file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as folder:
        write_class(os.path.join(folder, "submissions"), args.students)
        grades = os.path.join(folder, "grades.csv")
        started = time.perf_counter()
        run = subprocess.run([sys.executable, "-m", "exercises", "grade", os.path.join(folder, "submissions"),
                              "--out", grades, "--jobs", str(args.jobs)], cwd=ROOT, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if run.returncode != 0:
            sys.exit(f"python -m exercises grade failed:\n{run.stderr}")
        with open(grades) as f:
            rows = list(csv.DictReader(f))
    passed = sum(row["result"] == "passed" for row in rows)
    isolation = "by process only" if "isolation by process only" in run.stdout else "namespaces"
    print(f"graded {args.students} submissions, {len(rows)} checks ({passed} passed) with {args.jobs} jobs, "
          f"isolated in {isolation}, in {seconds:.1f} s: {len(rows) / seconds:.1f} checks/s")
    if args.json:
        write_json(args.json, {"students": args.students, "checks": len(rows), "passed": passed, "jobs": args.jobs,
                               "isolation": isolation, "seconds": seconds})
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
