"""A pytest plugin for a student copy: its test suite stays green while exercises are
outstanding.

A test that fails because an exercise is not done yet is reported as skipped, naming the
exercise: its failure shows NotImplementedError("exercise NAME: ...") (raised in the test's
own process, or in a subprocess whose output the failure shows), or names a file that holds
an outstanding exercise's region (a debugger walk through the learning path that stops
inside a region that is cut), or is so reported by a Python child the test started
(exercises/child_hook/sitecustomize.py). A test of code the copy cut as it answers an
exercise handed out (a twin: exercises/twins.py) is skipped naming the exercise. A test
that needs the teacher's project (grading a class, making copies), or a test file left out
of the copy as it gives an exercise away (catalog.TESTS_THAT_REVEAL), is skipped saying so. The run ends by listing every exercise
outstanding, in the order of the lectures. `make` adds these hooks to the copy's
tests/conftest.py.
"""

import functools
import json
import os
import re
import shutil
import tempfile

import pytest

from exercises.handout import NEEDS_TEACHER

NEEDS = re.compile(r"NotImplementedError: exercise (\w+): ")
TWIN_CUT = re.compile(r"twin of exercise (\w+), cut from this copy")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD_HOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child_hook")
REPORTS = "EXERCISES_CHILD_NEEDS"                     # names the file the children report to


def pytest_configure(config):
    """Every Python child of the run loads child_hook/sitecustomize.py, which reports to a file."""
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (CHILD_HOOK, os.environ.get("PYTHONPATH")) if p)
    os.environ[REPORTS] = os.path.join(tempfile.mkdtemp(prefix="exercises-"), "child-needs.txt")


def pytest_unconfigure(config):
    shutil.rmtree(os.path.dirname(os.environ.pop(REPORTS)), ignore_errors=True)


def _children_report():
    """What the test's children reported, emptied for the next test."""
    path = os.environ[REPORTS]
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    os.remove(path)
    return text


@functools.cache
def files_of_outstanding():
    """{file: [exercise]} of the files holding regions of the exercises not done yet."""
    from exercises.handout import outstanding
    from exercises.regions import regions_of
    regions, files = regions_of(ROOT), {}
    for name in outstanding(ROOT):
        for path in dict.fromkeys(f for f, _, _ in regions.get(name, [])):
            files.setdefault(path, []).append(name)
    return files


def _needed(text):
    if (match := NEEDS.search(text)):
        return [match.group(1)]
    named = [name for path, names in files_of_outstanding().items() if path in text for name in names]
    return [name for name in named if name in text] or named        # those the failure names, if it does


def _left_out_named(text):
    """[(test file, [exercise])] of the test files left out of the copy that the failure names."""
    from exercises.handout import HANDOUT
    with open(os.path.join(ROOT, HANDOUT)) as f:
        left_out = json.load(f).get("tests_left_out", {})
    return [(path, names) for path, names in left_out.items() if path in text]


def skip_reason(text):
    """Why a test whose failure reads `text` is skipped in a student copy, or None: it fails."""
    if (twin := TWIN_CUT.search(text)):
        return f"tests code that answers exercise {twin.group(1)}, cut from this copy (a twin: exercises/twins.py)"
    if (needed := _needed(text)):
        return f"needs exercise {', '.join(needed)} (not done yet)"
    if NEEDS_TEACHER in text:
        return f"{NEEDS_TEACHER}: not a student copy's"
    if (left_out := _left_out_named(text)):
        path, names = left_out[0]
        return f"needs {path}, left out of this copy: it gives exercise {', '.join(names)} away"
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    children = _children_report()
    if not report.failed:
        return
    text = children + str(report.longrepr)
    if call.excinfo is not None and call.excinfo.errisinstance(NotImplementedError):
        text = f"NotImplementedError: {call.excinfo.value}\n{text}"
    if (reason := skip_reason(text)):
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, reason)


def pytest_terminal_summary(terminalreporter):
    from exercises.handout import outstanding
    left = outstanding(ROOT)                             # every one, in the order of the lectures
    if left:
        terminalreporter.write_line(f"exercises outstanding: {', '.join(left)} "
                                    "(the tests that need them were skipped)")
