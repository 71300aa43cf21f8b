"""Run a demo under pdb, with `step` staying inside this project's code.

    python -m demos.debug -b autograd/engine.py:61 demos.tour
    python -m demos.debug -b autograd/ops/matmul.py:37 demos.train --task reverse --steps 1

Like `python -m pdb -c "b FILE:LINE" -c c -m MODULE ARGS`, except that `s` and `n` stop
only in this project's own files: the frames of numpy, Numba, matplotlib, setuptools' import
hooks and the standard library are stepped over, so `s` goes from `loss.backward()` straight
through the engine to each op's backward instead of wandering through numpy's Python
wrappers.  Every -b sets a breakpoint; the program runs until the first one.
"""

import argparse
import bdb
import os
import pdb
import runpy
import sys

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def in_project(frame):
    """Whether frame runs a file of this project (not an installed package, even one
    installed in a virtual environment inside the project's folder)."""
    path = os.path.abspath(frame.f_code.co_filename)
    return path.startswith(PROJECT + os.sep) and "site-packages" not in path


class ProjectPdb(pdb.Pdb):
    """A Pdb that stops only in this project's files."""

    def stop_here(self, frame):
        return in_project(frame) and super().stop_here(frame)


def debugger(breakpoints):
    """A ProjectPdb with `breakpoints` ("FILE:LINE") set."""
    debug = ProjectPdb()
    for spec in breakpoints:
        filename, _, line = spec.rpartition(":")
        error = debug.set_break(filename, int(line)) if filename and line.isdigit() else f"not FILE:LINE: {spec!r}"
        if error:
            raise SystemExit(f"demos.debug: cannot set breakpoint {spec}: {error}")
    return debug


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-b", "--break", dest="breakpoints", action="append", default=[], metavar="FILE:LINE")
    parser.add_argument("module", help="the demo to run, e.g. demos.tour")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    args = parser.parse_args(argv)
    debug = debugger(args.breakpoints)
    sys.argv = [args.module, *args.args]
    debug.reset()
    debug.botframe = sys._getframe()        # the bottom of every stack pdb steps through
    debug.set_continue()                    # run until the first breakpoint
    sys.settrace(debug.trace_dispatch)
    try:
        runpy.run_module(args.module, run_name="__main__", alter_sys=True)
    except bdb.BdbQuit:
        pass
    finally:
        sys.settrace(None)


if __name__ == "__main__":
    main()
