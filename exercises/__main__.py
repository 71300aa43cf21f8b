"""python -m exercises list | make DIR [--only NAME...] | check NAME... [--project DIR] | grade SUBMISSIONS

    list    one exercise a line, in the order of the lectures: name, file, what to write
    make    a student copy of the project in DIR: every exercise (or those of --only) cut out
    check   grade exercises (NAME... or all) of a copy (--project; default: this project);
            exit status 0 only when all pass. In a student copy, it checks the copy itself
            against the expected results recorded when the copy was made.
    grade   grade every submission folder in SUBMISSIONS (one per student), in parallel:
            --out grades.csv, --gradescope DIR (a results.json per student)

Grading runs the teacher's code only: the submission's regions are spliced into a pristine
copy of this project and each check runs in a child process with a time limit. See
docs/TEACHING.md.
"""

import argparse
import os
import sys

from exercises import reports
from exercises.catalog import EXERCISES
from exercises.grading import grade
from exercises.handout import IS_STUDENT_COPY, NEEDS_TEACHER, check_own_copy, outstanding, student_copy
from exercises.regions import find_regions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def list_exercises():
    regions = find_regions(ROOT)
    for name, (description, _) in EXERCISES.items():
        files = ", ".join(sorted({path for path, _, _ in regions.get(name, [])})) or "(solved in this copy)"
        print(f"{name:20s} {files:34s} {description}")


def parser_of_commands():
    parser = argparse.ArgumentParser(prog="python -m exercises", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the exercises, in the order of the lectures")
    make = commands.add_parser("make", help="write a student copy of the project")
    make.add_argument("folder")
    make.add_argument("--only", nargs="+", metavar="NAME", help="hand out these exercises; the rest stay solved")
    check = commands.add_parser("check", help="grade exercises of one copy")
    check.add_argument("names", nargs="+", metavar="NAME", help=f"exercise names, or 'all' ({', '.join(EXERCISES)})")
    check.add_argument("--project", help="the copy to grade (default: this project)")
    check.add_argument("--gradescope", metavar="FILE", help="also write Gradescope's results.json here")
    klass = commands.add_parser("grade", help="grade a class: every folder of SUBMISSIONS is one student's copy")
    klass.add_argument("submissions")
    klass.add_argument("--out", default="grades.csv", help="the CSV written: student, exercise, result, message")
    klass.add_argument("--gradescope", metavar="DIR", help="also write DIR/STUDENT/results.json and DIR/run_autograder")
    klass.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="checks run at once (default: cores)")
    for command in (check, klass):
        command.add_argument("--timeout", type=float, default=20.0, help="seconds a check may run (default 20)")
    return parser


def names_of(parser, given):
    names = list(EXERCISES) if given == ["all"] else given
    unknown = [n for n in names if n not in EXERCISES]
    if unknown:
        parser.exit(2, f"python -m exercises: error: no exercise {unknown[0]!r}; python -m exercises list shows them\n")
    return names


def make(parser, args):
    if IS_STUDENT_COPY:
        parser.exit(2, f"python -m exercises: error: making copies {NEEDS_TEACHER}\n")
    only = names_of(parser, args.only) if args.only else list(EXERCISES)
    try:
        changed = student_copy(ROOT, args.folder, only)
    except FileExistsError as err:
        parser.exit(2, f"python -m exercises: error: {err}\n")
    print(f"wrote a student copy to {args.folder}: {len(only)} of {len(EXERCISES)} exercises cut out of "
          f"{len(changed)} files; grade it with: python -m exercises check all --project {args.folder}")
    return 0


def check(parser, args):
    names = names_of(parser, args.names)
    if IS_STUDENT_COPY:
        if args.project and os.path.realpath(args.project) != os.path.realpath(ROOT):
            parser.exit(2, "python -m exercises: error: a student copy checks itself only; your teacher grades\n")
        results = check_own_copy(ROOT, names, args.timeout)
        print("checked in this copy against the results recorded when it was made; your teacher's grade "
              "runs the teacher's checks")
    else:
        project = args.project or ROOT
        if not os.path.isdir(os.path.join(project, "autograd")):
            parser.exit(2, f"python -m exercises: error: --project {project!r} is not a copy of this project\n")
        results = grade(ROOT, {os.path.basename(os.path.abspath(project)): project}, names, args.timeout)
    for result in results:
        print(result.line())
    if args.gradescope:
        reports.write_gradescope(results, args.gradescope)
    if IS_STUDENT_COPY and outstanding(ROOT):
        print(f"outstanding in this copy: {', '.join(outstanding(ROOT))}")
    return 0 if all(r.status == "passed" for r in results) else 1


def grade_class(parser, args):
    if IS_STUDENT_COPY:
        parser.exit(2, f"python -m exercises: error: grading a class {NEEDS_TEACHER}\n")
    folders = reports.submission_folders(args.submissions)
    if not folders:
        parser.exit(2, f"python -m exercises: error: no submission folders in {args.submissions!r}\n")
    results = grade(ROOT, folders, list(EXERCISES), args.timeout, args.jobs)
    reports.write_csv(results, args.out)
    if args.gradescope:
        reports.write_gradescope_class(results, args.gradescope)
    print(reports.summary(results, args.out))
    return 0


def main(argv=None):
    parser = parser_of_commands()
    args = parser.parse_args(argv)
    if args.command == "list":
        list_exercises()
        return 0
    return {"make": make, "check": check, "grade": grade_class}[args.command](parser, args)


if __name__ == "__main__":
    sys.exit(main())
