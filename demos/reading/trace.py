"""Record what a call runs, with sys.settrace: the functions of the project it enters, the
lines it executes, and the shape of every array each line binds.

A tracer sees a line just before it runs, so the value a line assigns is read from the
frame's locals at the frame's next event (its next line, or its return): for the
statement that began at the previous line, each target of its assignment (a name, a
tuple of names, or an attribute such as self.x) is looked up, and anything with a
`.shape` (a Tensor, a numpy array) is recorded as that statement's shape.  A return
statement's shape is its return value's.  Files outside the project, the engine room
(autograd/engine_room/, behind the kernel registry) and demos/ are not traced.
"""

import ast
import functools
import os
import sys

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HIDDEN = (os.path.join("autograd", "engine_room") + os.sep, "demos" + os.sep, "tests" + os.sep)


def relative(path):
    """The project's relative path of `path`, or None where it is not a file of the project
    a reader should see (another package, the engine room, demos, tests)."""
    if path.startswith("<") or "site-packages" in path or not path.startswith(PROJECT + os.sep):
        return None
    rel = os.path.relpath(path, PROJECT)
    return None if rel.startswith(HIDDEN) else rel


@functools.lru_cache(maxsize=None)
def statements(path):
    """{line: the innermost statement covering it} of the source file `path` (absolute)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    covering = {}
    for node in ast.walk(tree):                      # outer statements first, so inner ones overwrite
        if isinstance(node, ast.stmt):
            body = getattr(node, "body", None)       # a compound statement: its header's lines
            last = body[0].lineno - 1 if body else node.end_lineno
            for line in range(node.lineno, max(last, node.lineno) + 1):
                covering[line] = node
    return covering


def targets(statement):
    """The expressions a statement binds: assignments' and for-loops' targets, flattened."""
    if isinstance(statement, ast.Assign):
        found = list(statement.targets)
    elif isinstance(statement, (ast.AugAssign, ast.AnnAssign, ast.For)):
        found = [statement.target]
    else:
        return []
    flat = []
    while found:
        node = found.pop(0)
        if isinstance(node, (ast.Tuple, ast.List)):
            found[:0] = node.elts
        elif isinstance(node, (ast.Name, ast.Attribute)):
            flat.append(node)
    return flat


def lookup(node, frame_locals):
    """The value of a name or an attribute chain (self.x.y) in a frame's locals, or None."""
    if isinstance(node, ast.Name):
        return frame_locals.get(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)):
        owner = lookup(node.value, frame_locals)
        return None if owner is None else getattr(owner, node.attr, None)
    return None


def shape_of(value):
    """'(12, 64, 128)' for anything with a tuple .shape (Tensor, ndarray), else None."""
    shape = getattr(value, "shape", None)
    return str(tuple(int(n) for n in shape)) if isinstance(shape, tuple) else None


def shapes_of(values):
    """The shape text of a value, or of a tuple of values ('(2, 3), (2, 3)'), or None."""
    if isinstance(values, tuple) and values:
        found = [shape_of(v) for v in values]
        return ", ".join(found) if all(found) else None
    return shape_of(values)


class Trace:
    """What calls run under `record()`: `functions` {code: (relative path, phase)} in the
    order first entered, `lines` {relative path: set of lines run}, `shapes`
    {(relative path, statement's first line): [distinct shapes, in order seen]}, and
    `watched` {(relative path, function, name): [each value the name was bound to]}.

    phases: ((relative path, function's qualified name, phase), ...): entering that
    function starts that phase (e.g. Tensor.backward starts "backward"); a function is
    counted in the phase it is first entered in, or in its own phase where `pinned`
    ((relative path, qualified name, phase), ...) gives one without starting it.
    """

    def __init__(self, phases=(), pinned=(), watch=()):
        self.functions, self.lines, self.shapes, self.watched = {}, {}, {}, {}
        self.phase_starts = {(path, name): phase for path, name, phase in phases}
        self.pinned = {(path, name): phase for path, name, phase in pinned}
        self.watch = set(watch)
        self.phase = "setup"
        self._pending = {}                            # {frame: the statement it last started}

    def record(self, phase, call, *args, **kwargs):
        """call(*args, **kwargs) traced, its functions first entered counted in `phase`."""
        self.phase = phase
        sys.settrace(self._call)
        try:
            return call(*args, **kwargs)
        finally:
            sys.settrace(None)

    def _call(self, frame, event, arg):
        path = relative(frame.f_code.co_filename)
        if path is None:
            return None                                # not ours: not traced, callees traced anew
        code = frame.f_code
        self.phase = self.phase_starts.get((path, code.co_qualname), self.phase)
        self.functions.setdefault(code, (path, self.pinned.get((path, code.co_qualname), self.phase)))
        return self._local

    def _local(self, frame, event, arg):
        path = relative(frame.f_code.co_filename)
        statement = statements(frame.f_code.co_filename).get(frame.f_lineno)
        if event == "line":
            self.lines.setdefault(path, set()).add(frame.f_lineno)
            if statement is not self._pending.get(frame):        # not a later line of the same statement
                self._bound(frame, path)
                self._pending[frame] = statement
        elif event == "return":
            self._bound(frame, path)
            self._pending.pop(frame, None)
            if isinstance(statement, ast.Return) and statement.value is not None:
                self._note(path, statement, shapes_of(arg))
        return self._local

    def _bound(self, frame, path):
        """Note the shapes the statement the frame last started has bound."""
        statement = self._pending.get(frame)
        bound = targets(statement) if statement is not None else []
        if not bound:
            return
        frame_locals = frame.f_locals
        values = [lookup(node, frame_locals) for node in bound]
        found = [shape_of(v) for v in values]
        if all(found):
            self._note(path, statement, ", ".join(found))
        for node, value in zip(bound, values):
            key = (path, frame.f_code.co_name, getattr(node, "id", None))
            if key in self.watch:
                self.watched.setdefault(key, []).append(value)

    def _note(self, path, statement, shape):
        if shape is not None:
            seen = self.shapes.setdefault((path, statement.lineno), [])
            if shape not in seen:
                seen.append(shape)
