"""python -m exercises list | make DIR | check NAME... [--project DIR]

    list    one exercise a line, in the order of the lectures: name, file, what to write
    make    a student copy of the project in DIR, every exercise region cut out
    check   grade exercises in a copy (default: this project, where every one passes);
            exit status 0 only when all pass

Each exercise is graded on its own: the check runs on a copy of the project's source in
which every *other* exercise's region holds its solution, so the exercises can be done in
any order. See docs/TEACHING.md.
"""

import argparse
import os
import subprocess
import sys
import tempfile

from exercises.catalog import EXERCISES
from exercises.regions import find_regions, isolate, solutions_of, student_copy

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def list_exercises():
    regions = find_regions(ROOT)
    for name, (description, _) in EXERCISES.items():
        files = ", ".join(sorted({path for path, _, _ in regions.get(name, [])})) or "(no region found)"
        print(f"{name:20s} {files:34s} {description}")


def check(names, project):
    """Grade each name in its own isolated copy; returns the exit status."""
    status = 0
    env = {**os.environ, "AUTOGRAD_KERNELS": "numpy", "NUMBA_DISABLE_JIT": "1", "MPLBACKEND": "Agg"}
    solutions = solutions_of(ROOT)
    for name in names:
        with tempfile.TemporaryDirectory(prefix=f"exercise-{name}-") as folder:
            isolate(project, solutions, name, folder)
            run = subprocess.run([sys.executable, "-m", "exercises.checks", name], cwd=folder, text=True,
                                 capture_output=True, env={**env, "PYTHONPATH": folder})
        print((run.stdout + run.stderr).strip() or f"exercise {name}: the check crashed")
        status |= run.returncode != 0
    return int(status)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m exercises", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the exercises, in the order of the lectures")
    make = commands.add_parser("make", help="write a student copy of the project")
    make.add_argument("folder")
    grade = commands.add_parser("check", help="grade exercises")
    grade.add_argument("names", nargs="+", metavar="NAME", help=f"exercise names, or 'all' ({', '.join(EXERCISES)})")
    grade.add_argument("--project", default=ROOT, help="the copy to grade (default: this project)")
    args = parser.parse_args(argv)
    if args.command == "list":
        list_exercises()
        return 0
    if args.command == "make":
        try:
            changed = student_copy(ROOT, args.folder, {name: hint for name, (_, hint) in EXERCISES.items()})
        except FileExistsError as err:
            parser.exit(2, f"python -m exercises: error: {err}\n")
        print(f"wrote a student copy to {args.folder}: {len(EXERCISES)} exercises cut out of {len(changed)} files; "
              f"grade one with: python -m exercises check NAME --project {args.folder}")
        return 0
    names = list(EXERCISES) if args.names == ["all"] else args.names
    unknown = [n for n in names if n not in EXERCISES]
    if unknown:
        parser.exit(2, f"python -m exercises: error: no exercise {unknown[0]!r}; python -m exercises list shows them\n")
    if not os.path.isdir(os.path.join(args.project, "autograd")):
        parser.exit(2, f"python -m exercises: error: --project {args.project!r} is not a copy of this project\n")
    return check(names, os.path.abspath(args.project))


if __name__ == "__main__":
    sys.exit(main())
