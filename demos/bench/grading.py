"""python -m demos.bench.grading [--students 200] [--jobs N]: how long a class takes to grade.

Writes a student copy (python -m exercises make), then `--students` submissions of every
exercise, each solved (the teacher's solution in every region: every check runs to the end,
the slowest case), and grades them all as `python -m exercises grade` does: each check in
a child process, `--jobs` at a time. Prints the submissions, checks, seconds and checks a
second. On a machine shared with other work the time includes waiting for the cores.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

from exercises.grading import grade
from exercises.regions import python_files, read, regions_of, rewrite

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def solved_files(template):
    """{file: text} of the template copy's files with regions, every region the teacher's solution."""
    solutions = {name: [body for _, _, body in places] for name, places in regions_of(ROOT).items()}
    files, taken = {}, {name: iter(bodies) for name, bodies in solutions.items()}
    with_regions = {f for places in regions_of(template).values() for f, _, _ in places}
    for path in (f for f in python_files(template) if f in with_regions):
        files[path] = rewrite(read(template, path),
                              lambda indent, name, version, lines: [lines[0], next(taken[name]), lines[-1]])
    return files


def write_class(folder, students):
    """{student: folder} of `students` submissions (only the files holding regions)."""
    template = os.path.join(folder, "template")
    subprocess.run([sys.executable, "-m", "exercises", "make", template], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    files = solved_files(template)
    submissions = {}
    for number in range(students):
        student = os.path.join(folder, "submissions", f"student{number:03d}")
        for path, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(student, path)), exist_ok=True)
            with open(os.path.join(student, path), "w") as f:
                f.write(text)
        submissions[f"student{number:03d}"] = student
    return submissions


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m demos.bench.grading", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="checks at once (default: cores)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="grading-bench-") as folder:
        submissions = write_class(folder, args.students)
        started = time.perf_counter()
        results = grade(ROOT, submissions, jobs=args.jobs)
        seconds = time.perf_counter() - started
    passed = sum(r.status == "passed" for r in results)
    print(f"graded {len(submissions)} submissions, {len(results)} checks ({passed} passed) with {args.jobs} jobs "
          f"in {seconds:.1f} s: {len(results) / seconds:.1f} checks/s")
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
