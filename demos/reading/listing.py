"""A trace turned into a page's contents: the functions that ran, whole, in reading order,
each line marked as run or not run on the traced call, with the shapes it made.

Reading order: by phase (the configuration, the model's parts, the forward pass, the plumbing
under every call, the backward pass, the optimizer), then in the order the call first entered
each function, as the step ran them: nanoGPT's model.py top to bottom (embedding, each block's
norm, attention, MLP, the loss), each function followed by those it was the first to call,
down to the kernels; the backward pass as the engine reaches each op.  No list of names says
the order, so it cannot drift from the code.

The model's parts come before the forward pass, as nanoGPT's __init__ shows its architecture:
the constructors (is_part: an __init__ of a class of transformer/ or nn/, and the factories
and initialisation they call there, make_norm, _init_gpt2; nn.Module's own bookkeeping in
nn/module.py aside) as a traced construction of the model ran them (phase "model").  The
plumbing every call goes through (is_plumbing: every function of PLUMBING_FILES,
Module.__call__ and Function.apply among them, and the private helpers, `_name`, of the tensor
and the ops) is read right after the forward pass, in phase "plumbing", where a page has one:
the forward pass reads as the model's code and the ops' math in the order they run.  Both
rules go by file and function name, never by a list of every function.

A one-line function of the plumbing (one_liner: a property, a getter, a Tensor method handing
its work to an op) is not shown whole: it teaches nothing in place, so the page lists them
together at its end (ONE_LINERS), each with its one line.  A stretch of at least FOLD lines
that never ran (one: every such stretch) becomes one fold ("... N lines not run on this step",
"(a raise)" where it is an error path, is_error_path), so that the page holds what runs, not
every branch a step never takes; the HTML opens a fold on a click.  Functions that only check
their inputs (CHECKS: require..., _check..., a config's __post_init__) are read last, in phase
"checks", where a page has one: the step reads from the model down, not from its validation.
The exercises' marker comments (# BEGIN EXERCISE name, # END EXERCISE, and the twins') are
left out of the code: they mark where a learner writes, which a reader of the step does not
need.  A page names the exercises whose code it shows (exercises_shown) in a comment of its
own instead, as `BEGIN EXERCISE name`: a student copy that hands one of them out is made
without the page (exercises/handout.py reads that).
"""

import ast
import dataclasses
import functools
import os
import re

from demos.reading.trace import PROJECT, statements
from exercises.regions import BEGIN, END
from exercises.twins import BEGIN_TWIN, END_TWIN

FOLD = 1                                  # fewest not-run code lines folded into one line: every stretch of them
CHECKS = re.compile(r"(?:_?check|require)\w*|__post_init__")    # a function's own name: it validates its inputs
MARKERS = (BEGIN, END, BEGIN_TWIN, END_TWIN)
PARTS = ("transformer/", "nn/")            # where the model's classes are; their __init__ are the model's parts
PART_HELPERS = re.compile(r"make_\w+|_init\w*")    # a constructor's factory or initialisation: part of the build
BOOKKEEPING = ("nn/module.py",)           # Module's and Parameter's own __init__, __setattr__: not the model's
PLUMBING_FILES = ("nn/module.py", "autograd/function.py", "autograd/running_module.py", "autograd/grad_mode.py")
PRIVATE_PLUMBING = ("autograd/tensor.py", "autograd/ops/")      # where a private helper (_make, _lift) is plumbing


def is_part(path, name):
    """Whether the function `name` (its own name, not qualified) of `path`, entered while the
    model is built, is one of the model's parts: a constructor of a class of transformer/ or
    nn/, outside nn.Module's bookkeeping, or a constructor's helper there (PART_HELPERS: a
    factory, make_norm, or an initialisation, _init_gpt2)."""
    path = path.replace(os.sep, "/")
    return (name == "__init__" or bool(PART_HELPERS.fullmatch(name))) and path.startswith(PARTS) \
        and path not in BOOKKEEPING


def is_plumbing(path, name):
    """Whether the function `name` of `path` is plumbing every call goes through: any function
    of PLUMBING_FILES (Module.__call__, Function.apply, save_for_backward, ...), or a private
    helper (_make, _lift, _index_key, _is_advanced; not a dunder) of the tensor or the ops."""
    path = path.replace(os.sep, "/")
    private = name.startswith("_") and not name.startswith("__")
    return path in PLUMBING_FILES or (private and path.startswith(PRIVATE_PLUMBING))


def is_marker(text):
    """Whether a source line is an exercise's or a twin's marker comment."""
    return any(marker.match(text) for marker in MARKERS)


@dataclasses.dataclass
class Line:
    """A source line: number, text (dedented), status "run", "not" (a statement that did not
    run), "doc" (the docstring) or "text" (comment, blank, a bare else:), and the shape it
    made ('(12, 64, 128)') or None."""
    number: int
    text: str
    status: str
    shape: str | None = None


@dataclasses.dataclass
class Fold:
    """Consecutive lines a step never ran, shown as one."""
    lines: list

    @property
    def code_lines(self):
        return sum(line.status == "not" for line in self.lines)


@dataclasses.dataclass
class Function:
    """A function as the page shows it: where it is, the phase it is read in, its rows."""
    path: str              # relative to the project
    name: str              # qualified: Class.method, or outer.<locals>.inner
    first: int             # its first line (a decorator's, or the def's)
    phase: str
    rows: list             # Line and Fold, in order
    exercises: list        # the exercises whose region, or a twin of it, lies in the function (exercises_in)
    one_line: Line = None  # a one-liner's return line (ONE_LINERS), shown alone at the page's end; None: shown whole

    def lines_shown(self):
        """The Lines the page shows: the one line of a one-liner, else every Line shown unfolded."""
        return [self.one_line] if self.one_line else self.lines()

    def lines(self):
        """Every Line shown unfolded."""
        return [row for row in self.rows if isinstance(row, Line)]

    def breakpoint(self):
        """demos.debug's -b spec that stops at its first statement (FILE:LINE for a nested function)."""
        if "<locals>" not in self.name:
            return f"{self.path}:{self.name}"
        body = next(line for line in self.lines() if line.status == "run" and line.number > self.def_line)
        return f"{self.path}:{body.number}"

    @property
    def def_line(self):
        return next(line.number for line in self.lines() if line.text.lstrip().startswith(("def ", "async def ")))


def docstring_lines(node):
    """The lines of a function's docstring (an empty range if it has none)."""
    head = node.body[0]
    is_doc = isinstance(head, ast.Expr) and isinstance(head.value, ast.Constant) and isinstance(head.value.value, str)
    return range(head.lineno, head.end_lineno + 1) if is_doc else range(0)


TEACHING = ("autograd/ops/", "autograd/kernels/", "transformer/")     # where a one-line body is the math or the model


def one_liner(path, node):
    """The return statement of a one-liner, else None: a function whose body, the docstring
    aside, is one `return` on one line (`return self.data.shape`, `return _grad_enabled`,
    `return ops.Add.apply(self, self._lift(other))`), outside TEACHING: the plumbing between
    the model and the ops, which teaches nothing in place.  An op's `return a + b` is its math
    and a model's one-line mask is its mask: they stay whole where they run."""
    body = [statement for statement in node.body if statement.lineno not in docstring_lines(node)]
    if path.replace(os.sep, "/").startswith(TEACHING) or len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    return body[0] if body[0].value is not None and body[0].lineno == body[0].end_lineno else None


def definition(path, first):
    """The def node of the function whose code starts at line `first` of `path`."""
    for node in set(statements(os.path.join(PROJECT, path)).values()):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if min([node.lineno] + [d.lineno for d in node.decorator_list]) == first:
                return node
    raise LookupError(f"{path}:{first}: no function starts here")


def line_status(path, number, text, node, lines_run, docstring):
    """"run", "not", "doc" or "text" for line `number` of the function `node`."""
    if number in docstring:
        return "doc"
    if not text.strip() or text.strip().startswith("#"):
        return "text"
    if number < node.body[0].lineno:
        return "run"                                  # the def (and decorators): the function ran
    statement = statements(os.path.join(PROJECT, path)).get(number)
    if statement is None or statement is node:
        return "text"                                 # else:, finally: and the like
    if statement.lineno in lines_run:
        return "run"
    inner = getattr(statement, "body", None)          # a compound statement whose header line has no event (try:)
    ran = inner and any(line in lines_run for line in range(inner[0].lineno, statement.end_lineno + 1))
    return "run" if ran else "not"


def shape_anchor(statement):
    """The line a statement's shape is written on: its last line (a for's: its iterable's)."""
    return statement.iter.end_lineno if isinstance(statement, ast.For) else statement.end_lineno


def function_rows(path, first, trace_lines, trace_shapes):
    """The Lines of the function starting at `first`, not-run stretches folded."""
    node = definition(path, first)
    with open(os.path.join(PROJECT, path), encoding="utf-8") as f:
        source = f.read().split("\n")
    indent = len(source[first - 1]) - len(source[first - 1].lstrip())
    docstring = docstring_lines(node)
    shapes = {}
    covering = statements(os.path.join(PROJECT, path))
    for (shaped_path, start), seen in trace_shapes.items():
        if shaped_path == path and first <= start <= node.end_lineno:
            more = f" | {len(seen) - 3} more" if len(seen) > 3 else ""        # at most three shapes a line
            shapes[shape_anchor(covering[start])] = " | ".join(seen[:3]) + more
    lines = [Line(n, source[n - 1][indent:], line_status(path, n, source[n - 1], node, trace_lines, docstring),
                  shapes.get(n)) for n in range(first, node.end_lineno + 1) if not is_marker(source[n - 1])]
    return fold(lines)


def fold(lines):
    """lines with each stretch of >= FOLD not-run code lines (and the text between them) made a Fold."""
    rows, stretch = [], []
    for line in lines + [None]:
        if line is not None and (line.status == "not" or (stretch and line.status in ("text", "doc"))):
            stretch.append(line)
            continue
        trailing = []
        while stretch and stretch[-1].status in ("text", "doc"):    # comments and blanks after the stretch stay outside
            trailing.insert(0, stretch.pop())
        not_run = sum(row.status == "not" for row in stretch)
        rows.extend([Fold(stretch)] if not_run >= FOLD else stretch)
        rows.extend(trailing + ([line] if line is not None else []))
        stretch = []
    return rows


def is_error_path(stretch):
    """Whether a stretch of not-run lines is one or more `raise` statements (each of its
    outermost lines begins one): the error path a step never takes, which its fold names."""
    texts = [line.text for line in stretch if line.status == "not"]
    outermost = min((len(text) - len(text.lstrip()) for text in texts), default=0)
    return bool(texts) and all(text.lstrip().startswith("raise ") for text in texts    # a raise's continuation lines
                               if len(text) - len(text.lstrip()) == outermost)        # are indented deeper


@functools.lru_cache(maxsize=None)
def class_starts(path):
    """The first lines (a decorator's, or the class line) of the classes of `path` (relative):
    where a class body's code starts, which the tracer enters like a function's."""
    return {min([node.lineno] + [d.lineno for d in node.decorator_list])
            for node in statements(os.path.join(PROJECT, path)).values() if isinstance(node, ast.ClassDef)}


def functions(trace, phases):
    """The Functions a trace entered, each once, in reading order (phases: their order; a
    function CHECKS names is in phase "checks" where phases has it, and one of the forward pass
    or the step is_plumbing names in phase "plumbing" where phases has it)."""
    found = []
    for order, (code, (path, phase)) in enumerate(trace.functions.items()):
        if not code.co_name.startswith("<") and code.co_firstlineno not in class_starts(path):   # no lambda, class body
            node = definition(path, code.co_firstlineno)
            if "checks" in phases and CHECKS.fullmatch(code.co_name):
                phase = "checks"
            elif phase in ("forward", "step") and "plumbing" in phases and is_plumbing(path, code.co_name):
                phase = "plumbing"
            found.append((path, code.co_firstlineno, node.end_lineno, code.co_qualname, phase, order))
    outer = [(path, first, last) for path, first, last, *_ in found]
    shown = [entry for entry in found if not any(path == entry[0] and first < entry[1] and entry[2] <= last
                                                  for path, first, last in outer)]   # a closure shows in its parent
    shown.sort(key=lambda e: (phases.index(e[4]), e[5]))
    made = []
    for path, first, last, name, phase, _ in shown:
        function = Function(path, name, first, phase, function_rows(path, first, trace.lines.get(path, set()),
                                                                    trace.shapes), exercises_in(path, first, last))
        single = one_liner(path, definition(path, first))
        function.one_line = next(line for line in function.lines() if line.number == single.lineno) if single else None
        made.append(function)
    return made


def exercises_in(path, first, last):
    """The exercises named by a region's or a twin's BEGIN marker among lines first..last of path."""
    with open(os.path.join(PROJECT, path), encoding="utf-8") as f:
        lines = f.read().split("\n")[first - 1:last]
    names = []
    for line in lines:
        region, twin = BEGIN.match(line), BEGIN_TWIN.match(line)
        names += [region[2]] if region else twin[2].split() if twin else []
    return names


def exercises_shown(shown):
    """The page's comment naming the exercises whose code it shows, in the form exercises/handout.py
    reads (BEGIN EXERCISE name), or "" if it shows none."""
    names = sorted({name for function in shown for name in function.exercises})
    if not names:
        return ""
    return ("<!-- the code of these exercises is on this page (a student copy handing one out is made without it): "
            + ", ".join(f"BEGIN EXERCISE {name}" for name in names) + " -->")


def figures(trace, shown):
    """The page's measures: code lines shown (folds and text not counted), lines with a
    shape, and the share of the distinct lines the call ran that the page shows (the model's
    construction, phase "model", counted in the code lines, not among the lines the step ran)."""
    lines = [line for function in shown for line in function.lines_shown()]
    on_page = {(function.path, line.number) for function in shown for line in function.lines_shown()
               if line.status == "run"}
    built = {(function.path, line.number) for function in shown if function.phase == "model"
             for line in function.lines()}
    ran = {(path, number) for path, numbers in trace.lines.items() for number in numbers} - built
    return {"functions": len(shown), "code_lines": sum(line.status in ("run", "not") for line in lines),
            "shapes": sum(line.shape is not None for line in lines),
            "folded_lines": sum(row.code_lines for function in shown for row in function.rows if isinstance(row, Fold)),
            "one_liners": sum(function.one_line is not None for function in shown),
            "constructor_lines": sum(line.status in ("run", "not") for function in shown if function.phase == "model"
                                     for line in function.lines_shown()),
            "lines_run": len(ran), "lines_run_shown": len(ran & on_page), "coverage": len(ran & on_page) / len(ran)}


PHASE_TITLES = {"config": "The configuration", "model": "The model's parts", "step": "The step",
                "forward": "The forward pass", "plumbing": "Under every call: the plumbing of modules and ops",
                "backward": "The backward pass", "optimizer": "The optimizer's update", "build": "Building the graph",
                "loops": "The loops tier, in a small step", "checks": "Checking the inputs"}
ONE_LINERS = "One-line functions that also ran"


def sections(shown):
    """[(title, [Function, ...]), ...]: the functions shown whole grouped by phase, in order,
    then the one-liners (ONE_LINERS) together, if any."""
    grouped = []
    for function in shown:
        if function.one_line is None:
            title = PHASE_TITLES[function.phase]
            if not grouped or grouped[-1][0] != title:
                grouped.append((title, []))
            grouped[-1][1].append(function)
    singles = [function for function in shown if function.one_line is not None]
    return grouped + ([(ONE_LINERS, singles)] if singles else [])


FIRST_READING = ("config", "model", "forward", "step")    # what nanoGPT's model.py and train.py's loop hold


def code_lines(functions):
    """The lines of code a section shows (folded ones, docstrings and comments not counted)."""
    return sum(line.status in ("run", "not") for function in functions for line in function.lines_shown())


def first_reading(grouped):
    """The sentence under the contents naming the sections to read first (the model and the
    step: FIRST_READING) and their lines of code; "" on a page with fewer than two of them."""
    first = [(n, functions) for n, (title, functions) in enumerate(grouped, 1)
             if title != ONE_LINERS and functions[0].phase in FIRST_READING]
    if len(first) < 2:
        return ""
    numbers = [str(n) for n, _ in first]
    return (f"A first reading: sections {', '.join(numbers[:-1])} and {numbers[-1]}, the model and the step "
            f"({sum(code_lines(functions) for _, functions in first)} lines of code), read as nanoGPT's model.py "
            "and its training loop are. The other sections are what PyTorch does under nanoGPT (the plumbing, the "
            "backward pass op by op, the optimizer, the checks): a second reading.")


def suffix(line):
    """The comment the page adds to a source line: its shape, or that it did not run."""
    return (f"  # {line.shape}" if line.shape else "") + ("  # not run" if line.status == "not" else "")


def fold_text(fold):
    """The one line a Fold is shown as, indented as its first line, counting the source lines
    it stands for (a marker comment left out among them too)."""
    first = next(line for line in fold.lines if line.status == "not")
    indent = first.text[:len(first.text) - len(first.text.lstrip())]
    count = fold.lines[-1].number - fold.lines[0].number + 1
    raising = " (a raise)" if is_error_path(fold.lines) else ""
    return f"{indent}# ... {count} line{'s' if count > 1 else ''} not run on this step{raising}"
