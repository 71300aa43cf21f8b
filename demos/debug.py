"""Run a demo under pdb, with `step` staying inside this project's code.

    python -m demos.debug -b autograd/engine.py:run_backward demos.tour
    python -m demos.debug -b autograd/ops/matmul.py:MatMul.backward demos.train --task reverse --steps 1
    python -m demos.debug -b "autograd/function.py:Function.apply:ctx.forward" demos.tour

A breakpoint names a function (FILE:FUNCTION or FILE:Class.method: its first statement),
a line of it (FILE:FUNCTION:TEXT: the first line of the function holding TEXT), or a line
number (FILE:LINE), so that it stays right when the code around it moves.

Like `python -m pdb -c "b FILE:LINE" -c c -m MODULE ARGS`, except that `s` and `n` stop
only in this project's own files: the frames of numpy, Numba, matplotlib, setuptools' import
hooks and the standard library are stepped over, so `s` goes from `loss.backward()` straight
through the engine to each op's backward instead of wandering through numpy's Python
wrappers.  And a press always moves to a line that does something: `s` into a function
lands on its first line (as VS Code's and PyCharm's step into do; pdb would first stop on
its `def`, "--Call--"), leaving a function goes on to the caller's next line (pdb would
first stop again on its last line, "--Return--"; `r` still does), and it never stops on a
bare `try:` nor inside a comprehension's own frame (Python 3.11 gives `[t.data for t in
inputs]` one; 3.12 inlines it), nor in the bookkeeping every op runs through (STEPPED_OVER:
making a Tensor, saving arrays for backward, reading the grad mode).  Every -b sets
a breakpoint; the program runs until the first one.

Under it, as under any debugger, the classroom opens (autograd/kernels/__init__.py): the
kernels are the loops tier, each loop run as Python where `s` can enter it, and fused
attention runs as the composed ops, each said in one line; AUTOGRAD_KERNELS=fast keeps the
engine room.
"""

import argparse
import ast
import bdb
import functools
import importlib.util
import linecache
import os
import pdb
import runpy
import sys

from demos._flags import command_line, fail

PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def in_project(frame):
    """Whether frame runs a file of this project (not an installed package, even one
    installed in a virtual environment inside the project's folder)."""
    return _is_ours(frame.f_code.co_filename)


@functools.lru_cache(maxsize=None)
def _is_ours(filename):
    """in_project's answer for a file (asked at every call the program makes: kept)."""
    if filename.startswith("<"):                 # <frozen importlib._bootstrap>, <string>: not a file of ours
        return False
    path = os.path.abspath(filename)
    return path.startswith(PROJECT + os.sep) and "site-packages" not in path


COMPREHENSIONS = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}
# The bookkeeping every op's way runs through, which holds no math and no model: a Tensor
# made around an array, a number lifted to a Tensor, the arrays saved for backward, a dim made
# positive, the grad and anomaly modes read. `s` steps over them (a breakpoint in one stops).
STEPPED_OVER = {("autograd/tensor.py", "Tensor._make"), ("autograd/tensor.py", "Tensor._lift"),
                ("autograd/function.py", "Function.save_for_backward"), ("autograd/function.py", "normalize_dim"),
                ("autograd/function.py", "normalize_dims"), ("autograd/grad_mode.py", "is_grad_enabled"),
                ("autograd/anomaly.py", "is_anomaly_enabled")}
STEPPED_NAMES = {name for _, name in STEPPED_OVER}


class ProjectPdb(pdb.Pdb):
    """A Pdb that stops only in this project's files, and only where a press shows something."""

    def stop_here(self, frame):
        return in_project(frame) and not _shows_nothing(frame) and not _stepped_over(frame) and \
            super().stop_here(frame)

    def user_call(self, frame, argument_list):
        """No stop on entering a function ("--Call--" on its `def` line): the next stop is its
        first line.  (Breakpoints stop as before.)"""

    def interaction(self, frame, traceback):
        """Stop here, and trace from now on every frame that called this one: pdb traces only the
        frames it entered while something could stop in them, so leaving a function whose
        callers began before the breakpoint would run on past them to the next stop."""
        caller = frame.f_back if frame is not None else None
        while caller is not None:
            caller.f_trace = self.trace_dispatch
            caller = caller.f_back
        super().interaction(frame, traceback)

    def user_return(self, frame, return_value):
        """No stop on leaving a function while stepping ("--Return--", a second press on its
        last line): the next stop is the caller's next line.  `r` still stops there."""
        if frame is self.returnframe:
            super().user_return(frame, return_value)


def _stepped_over(frame):
    """Whether frame runs one of the functions `s` steps over (STEPPED_OVER)."""
    return frame.f_code.co_qualname in STEPPED_NAMES and _is_stepped_over(frame.f_code.co_filename,
                                                                           frame.f_code.co_qualname)


@functools.lru_cache(maxsize=None)
def _is_stepped_over(filename, qualname):
    return (os.path.relpath(filename, PROJECT).replace(os.sep, "/"), qualname) in STEPPED_OVER


def _shows_nothing(frame):
    """Whether a stop in frame, where it stands, would show nothing to look at: a
    comprehension's own frame, or a line that is only `try:`."""
    return frame.f_code.co_name in COMPREHENSIONS or \
        linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() == "try:"


def debugger(breakpoints):
    """A ProjectPdb with `breakpoints` ("FILE:LINE") set."""
    debug = ProjectPdb()
    for spec in breakpoints:
        error = debug.set_break(*breakpoint_line(spec))
        if error:
            raise ValueError(f"-b {spec}: cannot set that breakpoint: {error}")
    return debug


def breakpoint_line(spec):
    """(file, line) of a breakpoint given as FILE:LINE, FILE:FUNCTION or FILE:FUNCTION:TEXT;
    a ValueError naming the spec where there is no such file, function or line."""
    filename, _, rest = spec.partition(":")
    if rest.isdigit():
        return filename, int(rest)
    function, _, text = rest.partition(":")
    try:
        with open(filename) as f:
            source = f.read()
    except OSError as err:
        raise ValueError(f"-b {spec}: cannot read {filename}: {err.strerror}") from None
    node = _function_node(ast.parse(source), function.split("."))
    if node is None:
        raise ValueError(f"-b {spec}: {filename} defines no function {function!r}")
    body = node.body[1:] if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
        else node.body
    lines = source.split("\n")
    for line in range(body[0].lineno, node.end_lineno + 1):
        if text in lines[line - 1]:
            return filename, line
    raise ValueError(f"-b {spec}: no line of {function} in {filename} holds {text!r}")


def _function_node(tree, names):
    """The definition of names[-1] inside the classes names[:-1], at the top of `tree`."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and node.name == names[0]:
            return node if len(names) == 1 else _function_node(node, names[1:])
    return None


def _missing(module):
    """Whether there is no module `module` (a dotted name) to run."""
    try:
        return importlib.util.find_spec(module) is None
    except ModuleNotFoundError:
        return True


def main(argv=None):
    parser = command_line("demos.debug", __doc__)
    parser.add_argument("-b", "--break", dest="breakpoints", action="append", default=[],
                        metavar="FILE:FUNCTION[:TEXT]", help="a breakpoint (FILE:LINE works too)")
    parser.add_argument("module", help="the demo to run, e.g. demos.tour")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    args = parser.parse_args(argv)
    if _missing(args.module):
        fail("demos.debug", f"module: no module {args.module!r} to run (e.g. demos.tour, demos.train)")
    if not args.breakpoints:
        fail("demos.debug", "-b: no breakpoint given, so nothing would stop the demo (e.g. -b autograd/engine.py:run_backward)")
    try:
        debug = debugger(args.breakpoints)
    except ValueError as err:
        fail("demos.debug", str(err))
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
