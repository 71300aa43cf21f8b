"""docs/LEARNING_PATH.md stays true: every pdb command in it stops where it says."""

import ast
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = os.path.join(ROOT, "docs", "LEARNING_PATH.md")
BREAKPOINT_SECONDS = 120       # each documented breakpoint stops within 2-4 s here
COMMAND = re.compile(r"^((?:\w+=\S+ )*)python -m demos\.debug -b (\S+) (\S+)(.*?)\s+# stops in (\S+)$", re.M)
LOOK = re.compile(r"^- `([^`]+)`(?: (shows|enters|goes up to) `([^`]+)`)?", re.M)


def steps():
    """(env, breakpoint, module, args, function, [(pdb command, 'shows'/'enters'/'goes up to'/'', expected)])
    for each command of the learning path, with the "Look at" list that follows it."""
    with open(PATH) as f:
        text = f.read()
    found = []
    for match in COMMAND.finditer(text):
        following = text[match.end():]
        block = following[following.index("Look at"):].split("\n\n```")[0].split("\n## ")[0]
        found.append((*match.groups(), LOOK.findall(block)))
    return found


def test_the_house_names_every_package_and_every_room_of_transformer():
    """The learning path's map of the house lists each package a learner reads and each
    sub-package ("room") of transformer/, so the map and the folders cannot drift apart."""
    with open(PATH) as f:
        house = f.read().split("## The map of the code")[1].split("\n## ")[0]
    listed = set(re.findall(r"^ *(\w+)/ ", house, re.M))
    rooms = {name for name in os.listdir(os.path.join(ROOT, "transformer"))
             if os.path.exists(os.path.join(ROOT, "transformer", name, "__init__.py"))}
    assert rooms and rooms <= listed, f"rooms of transformer/ missing from the house: {sorted(rooms - listed)}"
    assert {"autograd", "nn", "transformer", "demos"} <= listed, listed
    assert not listed - rooms - {"autograd", "nn", "transformer", "demos"}, f"the house lists {sorted(listed)}"


def test_the_learning_path_has_a_breakpoint_and_things_to_look_at_for_every_step():
    assert len(steps()) >= 10
    assert all(len(look) >= 2 for *_, look in steps())


@pytest.mark.parametrize("env, spec, module, args, function, look", steps(),
                         ids=[f"{s[4]}-{s[0].strip() or 'default'}" for s in steps()])
def test_each_step_stops_where_it_says_and_shows_what_it_says(env, spec, module, args, function, look, tmp_path):
    """The breakpoint stops in the function named after `# stops in`; then each "Look at"
    command runs without an error, shows what the text says it shows, and a `s` said to
    enter a function (or a `u` to go up to one) lands in it."""
    from demos.debug import breakpoint_line
    path, line = breakpoint_line(spec.strip('"'))
    assert _function_at(os.path.join(ROOT, path), line) == function.split(".")[-1]
    extra = dict(item.split("=") for item in env.split())
    argv = [sys.executable, "-m", "demos.debug", "-b", spec.strip('"'), module, *args.split(), "--out", str(tmp_path)]
    commands = "".join(f"{command}\n" for command, _, _ in look) + "q\n"
    try:        # each stops within seconds; one that misses would run a whole demo (pure Python with the JIT off)
        result = subprocess.run(argv, cwd=ROOT, env={**os.environ, **extra}, input=commands, capture_output=True,
                                text=True, timeout=BREAKPOINT_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no stop at {spec} within {BREAKPOINT_SECONDS} s: the demo does not reach that line")
    outputs = result.stdout.split("(Pdb) ")
    frames = re.findall(r"^> \S+\(\d+\)(\w+)\(\)", outputs[0], re.M)
    assert frames and frames[-1] == function.split(".")[-1], f"stopped in {frames}, expected {function}:\n" \
        f"{result.stdout[-1500:]}\n{result.stderr[-1500:]}"
    assert len(outputs) >= len(look) + 2, result.stdout[-2000:]
    for (command, kind, expected), output in zip(look, outputs[1:]):
        assert "*** " not in output, f"{command!r} failed: {output}"
        if kind == "shows":
            assert expected in output, f"{command!r} showed {output!r}, the path says {expected!r}"
        elif kind in ("enters", "goes up to"):
            entered = re.findall(r"^> \S+\(\d+\)(\w+)\(\)", output, re.M)
            assert entered and entered[-1] == expected, f"{command!r} went to {entered}, the path says {expected}"


def _function_at(path, line):
    """The name of the innermost function whose body holds `line` of the file at `path`
    (checked before running pdb: a breakpoint that misses lets the whole demo run)."""
    with open(path) as f:
        tree = ast.parse(f.read())
    docstrings = {id(node.body[0]) for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                  and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    if not any(isinstance(node, ast.stmt) and node.lineno == line and id(node) not in docstrings
               for node in ast.walk(tree)):
        return None                  # a docstring, comment or blank line: pdb would never stop there
    holding = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
               and node.body[0].lineno <= line <= node.end_lineno]
    return max(holding, key=lambda node: node.lineno).name if holding else None


def test_demos_debug_steps_from_the_engine_into_an_ops_backward(tmp_path):
    commands = "n\nn\nn\nn\ns\np ctx\nq\n"      # from the graph search to the first node.backward call
    result = subprocess.run([sys.executable, "-m", "demos.debug", "-b", "autograd/engine.py:run_backward", "demos.tour",
                             "--out", str(tmp_path)], cwd=ROOT, input=commands, capture_output=True, text=True,
                            timeout=300)
    assert re.search(re.escape("> " + os.path.join(ROOT, "autograd", "engine.py")) + r"\(\d+\)run_backward\(\)",
                     result.stdout)
    mean_backward = _method_line(os.path.join(ROOT, "autograd", "ops", "reduce.py"), "Mean", "backward")
    assert f"ops/reduce.py({mean_backward})backward()" in result.stdout
    assert "<Mean node, output shape ()>" in result.stdout


def test_demos_debug_steps_from_matmul_forward_only_into_project_code(tmp_path):
    """Twenty `s` from MatMul.forward's first line (a first kernel call: the kernels load,
    Numba and setuptools' import hooks run) stop only in this project's files."""
    line = _first_line_of(os.path.join(ROOT, "autograd", "ops", "matmul.py"), "forward")
    commands = "s\n" * 20 + "q\n"
    result = subprocess.run([sys.executable, "-m", "demos.debug", "-b", f"autograd/ops/matmul.py:{line}", "demos.tour",
                             "--out", str(tmp_path)], cwd=ROOT, input=commands, capture_output=True, text=True,
                            timeout=300)
    stops = re.findall(r"(?:^|\(Pdb\) )> (.+?)\(\d+\)\S*\(\)", result.stdout, re.M)
    assert len(stops) > 10, result.stdout[-2000:]
    outside = [path for path in stops if not path.startswith(ROOT + os.sep) or "site-packages" in path]
    assert not outside, outside


def _method_line(path, class_name, method):
    """The line of the first statement of `method` in class `class_name` (where demos.debug's
    `s` stops on entering it: no "--Call--" stop on its `def`)."""
    with open(path) as f:
        tree = ast.parse(f.read())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == class_name)
    return _first_statement_line(next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == method))


def _first_line_of(path, function):
    """The line of the first statement (after the docstring) of the first function named `function`."""
    with open(path) as f:
        tree = ast.parse(f.read())
    return _first_statement_line(next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function))


def _first_statement_line(node):
    """The line of the first statement (after the docstring) of the function `node`."""
    body = node.body[1:] if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) else node.body
    return body[0].lineno
