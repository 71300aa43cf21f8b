"""python -m exercises list | make DIR [--only NAME...] | check NAME... [--project DIR]
                      | grade SUBMISSIONS [--like COPY | --only NAME...] | autograder ZIP [--only NAME... | --like COPY]

    list    one exercise a line, in the order of the lectures: name, file, what to write
    make    a student copy of the project in DIR: every exercise (or those of --only) cut out
    check   grade exercises (NAME... or all) of a copy (--project; default: this project);
            exit status 0 only when all it graded pass (an exercise not in that copy is no
            check, and says so). In a student copy, it checks the copy itself
            against the expected results recorded when the copy was made.
    grade   grade every submission in SUBMISSIONS (one per student: a folder holding the project,
            or holding it one or two folders down, or a .zip of it, or the exercise files alone),
            one check at a time (--jobs N: N at once): --out grades.csv, --gradescope DIR (a
            results.json per student); --like COPY or --only NAME... (default: the exercises
            in more than half the submissions)
    autograder  the .zip to upload to Gradescope: this project, setup.sh and run_autograder
            grading --only NAME... or those handed out in a copy (--like COPY)

Grading runs the teacher's code only: the submission's regions are spliced into a pristine
copy of this project and each check runs in a child process with a time and memory limit.
See docs/TEACHING.md.
"""

import argparse
import os
import sys
import tempfile

from exercises import reports
from exercises.catalog import EXERCISES
from exercises.gradescope import write_autograder
from exercises.grading import NO_PROJECT, NOT_IN_COPY, ONE_AT_A_TIME, Result, grade, handed_out_in, held_by_some
from exercises.handout import IS_STUDENT_COPY, NEEDS_TEACHER, handed_out_names, handed_out_versions, outstanding, student_copy
from exercises.loose import stubs_of
from exercises.own_check import check_own_copy
from exercises.regions import find_regions
from exercises.sandbox import MEMORY_MB, Unisolated
from exercises.submissions import find_project, find_projects
from exercises.versions import versions

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def list_exercises(parser, args):
    """One exercise a line, in the order of the lectures: name, its files, what to write."""
    regions = find_regions(ROOT)
    files = {name: ", ".join(sorted({path for path, _, _ in regions.get(name, [])})) or "(solved in this copy)"
             for name in EXERCISES}
    width = max(map(len, files.values()))
    for name, (description, _) in EXERCISES.items():
        print(f"{name:20s} {files[name]:{width}s} {description}")
    return 0


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
    check.add_argument("--like", metavar="COPY", help="the copy handed out (a copy make wrote): a version edited on "
                       "a BEGIN line of --project is then 'not yet', not 'not in that copy'")
    autograder = commands.add_parser("autograder", help="write the .zip to upload to Gradescope as its autograder")
    autograder.add_argument("zip", metavar="ZIP", help="the .zip to write (e.g. autograder.zip)")
    chosen = autograder.add_mutually_exclusive_group()
    chosen.add_argument("--only", nargs="+", metavar="NAME", help="grade these exercises (default: all)")
    chosen.add_argument("--like", metavar="COPY", help="grade the exercises handed out in COPY, a copy make wrote")
    klass = commands.add_parser("grade", help="grade a class: every folder of SUBMISSIONS is one student's copy")
    klass.add_argument("submissions", help="a folder with one entry per student: a copy (or a folder holding one, "
                       "one or two folders down), a .zip of one, or the exercise files a student changed")
    klass.add_argument("--out", default="grades.csv", help="the CSV written: student, exercise, result, message "
                       "(and beside it OUT-totals.csv: student, passed, of, a column per exercise)")
    klass.add_argument("--gradescope", metavar="DIR", help="also write DIR/STUDENT/results.json and DIR/run_autograder")
    named = klass.add_mutually_exclusive_group()
    named.add_argument("--like", metavar="COPY", help="grade the exercises handed out in COPY, a copy make wrote "
                       "(the surest way: students who upload only some files do not hide an exercise)")
    named.add_argument("--only", nargs="+", metavar="NAME",
                       help="grade these exercises (default: those handed out, i.e. in more than half the "
                            "submissions at the grader's version)")
    klass.add_argument("--jobs", type=int, default=ONE_AT_A_TIME,
                       help="checks run at once (default 1: two children running at once can signal each other a "
                            "solution through the CPU and memory they share; more is faster, not as safe)")
    for command in (check, klass):
        command.add_argument("--timeout", type=float, default=20.0, help="seconds a check may run (default 20)")
        command.add_argument("--memory", type=float, default=MEMORY_MB, metavar="MB",
                             help=f"memory a check may use, in MB (default {MEMORY_MB})")
    return parser


def names_of(parser, given):
    """The exercises named; "all": every one, or in a student copy every one handed out (the
    solved ones are not the student's to check)."""
    names = (handed_out_names() if IS_STUDENT_COPY else list(EXERCISES)) if given == ["all"] else given
    unknown = [n for n in names if n not in EXERCISES]
    if unknown:
        parser.exit(2, f"python -m exercises: error: no exercise {unknown[0]!r}; python -m exercises list shows them\n")
    return names


def make(parser, args):
    if IS_STUDENT_COPY:
        parser.exit(2, f"python -m exercises: error: making copies {NEEDS_TEACHER}\n")
    only = names_of(parser, args.only) if args.only else list(EXERCISES)
    try:
        changed, untracked = student_copy(ROOT, args.folder, only)
    except FileExistsError as err:
        parser.exit(2, f"python -m exercises: error: {err}\n")
    if untracked:
        shown = ", ".join(untracked[:8]) + (f", ... ({len(untracked) - 8} more)" if len(untracked) > 8 else "")
        print(f"left out what git does not track here (yours, not the project's): {shown}")
    named = "all" if len(only) == len(EXERCISES) else " ".join(only)
    print(f"wrote a student copy to {args.folder}: {len(only)} of {len(EXERCISES)} exercises cut out of "
          f"{reports.plural(len(changed), 'file')}; grade it with: python -m exercises check {named} --project "
          f"{args.folder}")
    return 0


def autograder(parser, args):
    if IS_STUDENT_COPY:
        parser.exit(2, f"python -m exercises: error: an autograder {NEEDS_TEACHER}\n")
    if not args.zip.endswith(".zip") or os.path.isdir(args.zip):
        parser.exit(2, f"python -m exercises: error: {args.zip!r}: expected the name of a .zip to write\n")
    names = names_of(parser, args.only) if args.only else list(handed_out_by(parser, args.like)) if args.like else \
        list(EXERCISES)
    count = write_autograder(ROOT, args.zip, names, args.like)
    print(f"wrote {args.zip}: this project ({count} files) with setup.sh and run_autograder, grading "
          f"{reports.plural(len(names), 'exercise')}; upload it as the assignment's autograder (docs/TEACHING.md)")
    return 0


def handed_out_by(parser, copy):
    """{exercise: version} handed out in the student copy `copy` that make wrote (its
    exercises/handout.json), in the lectures' order."""
    try:
        return handed_out_versions(copy)
    except (OSError, ValueError, KeyError, TypeError):
        parser.exit(2, f"python -m exercises: error: --like {copy!r}: not a student copy made by make "
                       "(no readable exercises/handout.json)\n")


def grade_one(parser, args, names):
    """[Result] of the teacher grading the copy of --project (a folder or a .zip; default this
    project); no project found there, or a submission refused, is one line, written to
    --gradescope too."""
    given = args.project or ROOT
    student = os.path.basename(os.path.abspath(given))
    with tempfile.TemporaryDirectory(prefix="exercises-submission-") as scratch:
        # this project, the teacher's own, is not a submission to walk
        project, why = find_project(given, scratch, stubs_of(ROOT, versions(ROOT))) if args.project else (ROOT, None)
        if why:
            if args.gradescope:
                reports.write_gradescope([Result(student, "", NO_PROJECT, why)], args.gradescope)
            parser.exit(2, f"python -m exercises: error: --project {given!r}: {NO_PROJECT}: {why}\n")
        notes, handed = [], handed_out_by(parser, args.like) if args.like else None
        results = grade(ROOT, {student: project}, names, args.timeout, memory_mb=args.memory, notes=notes,
                        handed=handed)
        print("\n".join(notes), end="\n" if notes else "")
        return results, notes


def check(parser, args):
    names = names_of(parser, args.names)
    notes = []
    if IS_STUDENT_COPY:
        if args.project and os.path.realpath(args.project) != os.path.realpath(ROOT):
            parser.exit(2, "python -m exercises: error: a student copy checks itself only; your teacher grades\n")
        results, notes = check_own_copy(ROOT, names, args.timeout, args.memory)
        print(f"checked the copy at {ROOT} against the results recorded when it was made; your teacher's grade "
              "runs the teacher's checks (docs/STUDENTS.md)")
        print("\n".join(notes), end="\n" if notes else "")
    else:
        results, notes = grade_one(parser, args, names)
    for result in results:
        print(reports.capped(result.line()))
    if args.gradescope:
        reports.write_gradescope(results, args.gradescope, notes)
    if IS_STUDENT_COPY and outstanding(ROOT):
        print(f"outstanding in this copy: {', '.join(outstanding(ROOT))}")
    graded = [r for r in results if r.status != NOT_IN_COPY]      # one not in that copy is no check
    return 0 if graded and all(r.status == "passed" for r in graded) else 1


def grade_class(parser, args):
    if IS_STUDENT_COPY:
        parser.exit(2, f"python -m exercises: error: grading a class {NEEDS_TEACHER}\n")
    if not os.path.isdir(args.submissions) or not [n for n in os.listdir(args.submissions) if n[0] != "."]:
        parser.exit(2, f"python -m exercises: error: no submissions in {args.submissions!r}\n")
    with tempfile.TemporaryDirectory(prefix="exercises-submissions-") as scratch:
        found = find_projects(args.submissions, scratch, stubs_of(ROOT, versions(ROOT)))
        unread = [Result(student, "", NO_PROJECT, why) for student, (_, why) in found.items() if why]
        for result in unread:
            print(reports.capped(f"{result.student}: {result.line()}"))
        projects = {student: project for student, (project, why) in found.items() if not why}
        handed_out = handed_out_in(projects, versions(ROOT))
        handed = handed_out_by(parser, args.like) if args.like else None
        chosen = names_of(parser, args.only) if args.only else list(handed) if args.like else None
        names = chosen or handed_out or list(EXERCISES)
        if (left := [name for name in EXERCISES if name not in names]):
            why = "not given to --only" if args.only else "not handed out in --like's copy" if args.like else \
                "in no more than half the submissions at its version: not handed out, or changed since"
            print(f"not graded, {why}: {reports.plural(len(left), 'exercise')} ({', '.join(left)})")
        if not chosen and (some := held_by_some(projects, versions(ROOT), left)):
            print(f"held at the grader's version by some submissions but not graded: {', '.join(some)}; if you handed "
                  "them out, grade with --like COPY (the copy you handed out) or --only NAME...")
        if chosen and (absent := [name for name in names if name not in handed_out]):
            print(f"graded though in no more than half the submissions at its version: {', '.join(absent)} "
                  "(their rows will say why)")
        notes = []
        graded = grade(ROOT, projects, names, args.timeout, args.jobs, args.memory, notes, handed) if projects else []
        print("\n".join(notes), end="\n" if notes else "")
    order = {student: index for index, student in enumerate(found)}
    results = sorted(graded + unread, key=lambda r: order[r.student])
    reports.write_csv(results, args.out)
    reports.write_totals(results, names, reports.totals_path(args.out))
    if args.gradescope:
        reports.write_gradescope_class(results, args.gradescope, names)
    print(reports.summary(results, args.out))
    return 0


def main(argv=None):
    parser = parser_of_commands()
    args = parser.parse_args(argv)
    if getattr(args, "memory", 1) <= 0 or getattr(args, "timeout", 1) <= 0:
        parser.exit(2, "python -m exercises: error: --memory and --timeout must be positive\n")
    try:
        status = {"list": list_exercises, "make": make, "autograder": autograder, "check": check,
                  "grade": grade_class}[args.command](parser, args)
        sys.stdout.flush()                # inside the try: a pipe closed early fails here, not at exit
        return status
    except Unisolated as err:
        parser.exit(2, f"python -m exercises: error: {err}\n")
    except BrokenPipeError:             # the reader stopped early (| head): no traceback, no more output
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
