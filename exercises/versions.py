"""The version of each exercise: a short hash of its contract, the meaning of its solution
and its check, not of how either is laid out.

A student copy records, on each region's BEGIN line, the version it was handed. When the
exercise's contract changes later (its solution computes something else, or its check asks
something else), its version changes, and a copy made before is graded on the exercises it
has at their versions; the others are "not in that copy". A comment, a docstring, blank
lines, a line reflowed inside brackets or `1e-3` written `0.001` change no version, so
tidying a solution keeps every copy already handed out valid.

What is hashed is each code's normal form: its syntax tree (no line numbers, comments or
layout) with every statement that is only a string (a docstring) left out. For the solution,
the body of each region (dedented; a region whose lines go back out of the block it started
in is parsed inside blocks opened for it). For the check, its function, the module-level
names of its module that it uses, and theirs in turn, and each definition of
exercises/checks/definitions/ and each probe of exercises/probes.py (or stand-in of
exercises/stand_ins.py) it names, by a name or a
string (`expect("softmax", x)`, `task.call("kernel", "softmax", x)`): a changed case list,
tolerance, definition or probe is a changed contract. The judging machinery it shares with
every other check (exercises/checks/feedback.py, expected.py) is not part of any one
exercise's version. The hash names a version; nothing of the solution can be read back.
Empty fields are left out of the tree's text, so it reads the same under the Python versions
this project supports (3.12 added empty `type_params` to every function).
"""

import ast
import hashlib
import inspect
import io
import os
import tokenize

LAYOUT_ONLY = {"kind", "type_comment"}             # fields that record spelling, not meaning (u"", # type:)


def _is_string_statement(node):
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _dump(node):
    """A text of the tree that changes with its meaning only: fields named, empty ones left out
    (so it reads the same under Python versions that add fields), string statements dropped."""
    if isinstance(node, ast.AST):
        fields = [f"{name}={_dump(value)}" for name, value in ast.iter_fields(node)
                  if name not in LAYOUT_ONLY and value is not None and value != []]
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(_dump(item) for item in node if not _is_string_statement(item))}]"
    return f"{type(node).__name__}:{node!r}"


def _statement_starts(lines):
    """The indices of the lines where a statement starts (not a line continuing brackets or a
    string), found by tokenizing the lines without their indentation; all of them if that fails."""
    starts, new = set(), True
    try:
        for token in tokenize.generate_tokens(io.StringIO("".join(line.lstrip(" \t\f") for line in lines)).readline):
            if new and token.type not in (tokenize.NL, tokenize.COMMENT, tokenize.NEWLINE, tokenize.ENDMARKER):
                starts.add(token.start[0] - 1)
                new = False
            new = new or token.type == tokenize.NEWLINE
    except (tokenize.TokenError, SyntaxError):
        return set(range(len(lines)))
    return starts


def _opened(source):
    """source dedented by its statements' least indentation, preceded by `if 1:` lines opening
    every indentation level it goes back out to below its first statement's, so that a region
    leaving the block it started in parses as it sits in its file."""
    lines = source.splitlines(keepends=True)
    indents = [len(lines[i]) - len(lines[i].lstrip(" \t\f")) for i in sorted(_statement_starts(lines))]
    if not indents:
        return source
    least = min(indents)
    body = "".join(line[min(least, len(line) - len(line.lstrip(" \t\f"))):] for line in lines)
    levels = sorted({i - least for i in indents if i < indents[0]} | {0})
    return "".join(" " * level + "if 1:\n" for level in levels if level < indents[0] - least) + body


def normal_form(source):
    """The text a version hashes for a piece of code: its syntax tree without layout, comments
    or docstrings; code that does not parse, its lines without blanks, comments or indentation."""
    try:
        return _dump(ast.parse(_opened(source)))
    except SyntaxError:
        return "\n".join(line.strip() for line in source.splitlines() if line.strip() and line.strip()[0] != "#")


def _top_level(tree):
    """{name: node} of a module's functions, classes and assigned names."""
    named = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            named[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            named.update({n.id: node for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)})
    return named


def _parsed(path):
    with open(path, encoding="utf-8") as f:
        return _top_level(ast.parse(f.read()))


def _names_used(node):
    """Every name the code reads, and every string constant (a definition named by a string)."""
    return {n.id if isinstance(n, ast.Name) else n.value for n in ast.walk(node)
            if isinstance(n, ast.Name) or isinstance(n, ast.Constant) and isinstance(n.value, str)}


def definitions_in(*places):
    """{name: [node]} of every top-level name of the modules at places (a module's file, or a
    folder of them; a place that is not there holds none), as a check may name them by a string."""
    files = [os.path.join(place, f) for place in places if os.path.isdir(place)
             for f in sorted(os.listdir(place)) if f.endswith(".py")] + [p for p in places if os.path.isfile(p)]
    definitions = {}
    for file in files:
        for name, node in _parsed(file).items():
            if not name.startswith("__"):
                definitions.setdefault(name, []).append(node)
    return definitions


def check_contract(function, definitions):
    """The normal form of a check: its function, the module-level names of its module it uses
    (transitively), and each of `definitions` ({name: [node]}, definitions_in) it names, by a
    name (its own module's first) or a string, and theirs in turn."""
    module = _parsed(inspect.getsourcefile(function))
    if module.get(function.__name__) is None:          # not a def of its module (a lambda, a partial): its source
        return normal_form(inspect.getsource(function))
    seen, pending = {}, [("check", function.__name__)]
    while pending:
        where, name = pending.pop()
        if (where, name) in seen:
            continue
        nodes = seen[(where, name)] = [module[name]] if where == "check" else definitions[name]
        for used in set().union(*(_names_used(node) for node in nodes)):
            if used in module and where == "check":
                pending.append(("check", used))
            elif used in definitions:
                pending.append(("definitions", used))
    parts = {_dump(node) for nodes in seen.values() for node in nodes}   # a node may hold several names (a, b = )
    return "\n".join(sorted(parts))


def versions(root):
    """{exercise name: version} of the project at root (the teacher's): every region's solution
    and its check (the grader's, exercises/checks/), each in its normal form, hashed together."""
    from exercises import checks
    from exercises.regions import regions_of
    exercises = os.path.dirname(os.path.dirname(os.path.abspath(checks.__file__)))
    definitions = definitions_in(os.path.join(exercises, "checks", "definitions"), os.path.join(exercises, "probes.py"),
                                 os.path.join(exercises, "stand_ins.py"))
    found = {}
    for name, places in regions_of(root).items():
        digest = hashlib.sha256(name.encode())
        for _, _, body in places:
            digest.update(normal_form(body).encode() + b"\0")
        if name in checks.CHECKS:
            digest.update(check_contract(checks.CHECKS[name], definitions).encode())
        found[name] = digest.hexdigest()[:16]
    return found
