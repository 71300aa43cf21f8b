"""A pytest plugin for a student copy: its test suite stays green while exercises are
outstanding.

A test that fails because an exercise is not done yet is reported as skipped, naming the
exercise: its failure shows NotImplementedError("exercise NAME: ...") (raised in the test's
own process, or in a subprocess whose output the failure shows), or names a file that holds
an outstanding exercise's region (a debugger walk through the learning path that stops
inside a region that is cut). The run ends by listing the exercises outstanding. `make`
adds these hooks to the copy's tests/conftest.py.
"""

import functools
import os
import re

import pytest

NEEDS = re.compile(r"NotImplementedError: exercise (\w+): ")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_outstanding = set()


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    text = str(report.longrepr)
    if call.excinfo is not None and call.excinfo.errisinstance(NotImplementedError):
        text = f"NotImplementedError: {call.excinfo.value}\n{text}"
    needed = _needed(text)
    if needed:
        _outstanding.update(needed)
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"needs exercise {', '.join(needed)} (not done yet)")


def pytest_terminal_summary(terminalreporter):
    if _outstanding:
        terminalreporter.write_line(f"exercises outstanding: {', '.join(sorted(_outstanding))} "
                                    "(the tests that need them were skipped)")
