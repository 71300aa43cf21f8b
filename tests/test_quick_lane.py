"""The quick lane (`python -m pytest -m quick`, tests/conftest.py's QUICK) holds each
package's core, and every entry of QUICK still names tests (a renamed test would drop out
of the lane silently).  Its time is measured with `time`, not here (no test times anything)."""

import os
import subprocess
import sys

from tests.conftest import QUICK

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def collected(*options):
    """The node ids of the tests pytest collects with `options`."""
    result = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider", *options],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr
    return [line for line in result.stdout.splitlines() if "::" in line]


def test_the_quick_lane_holds_each_packages_core():
    selected = collected("-m", "quick")
    for entry in QUICK:
        assert any(test.startswith(entry) for test in selected), f"QUICK's {entry} selects no test"
    for package in ("autograd", "nn", "transformer", "exercises", "demos"):
        assert any(test.startswith(f"tests/{package}/") for test in selected), f"no test of {package} in the quick lane"
    every_op = [test for test in selected if test.startswith("tests/autograd/test_ops_gradcheck.py::test_gradcheck[")]
    assert len(every_op) >= 40                               # every op's gradcheck cases
    assert len(selected) < 0.4 * len(collected())            # a lane, not the suite
