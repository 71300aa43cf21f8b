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
COMMAND = re.compile(r"^((?:\w+=\S+ )*)python -m pdb (.*?) -m (\S+)(.*?)\s+# stops in (\S+)$", re.M)


def commands():
    with open(PATH) as f:
        return COMMAND.findall(f.read())


def test_the_learning_path_has_a_breakpoint_for_every_step():
    assert len(commands()) >= 9


@pytest.mark.parametrize("env, pdb_args, module, args, function", commands(),
                         ids=[f"{c[4]}-{c[0].strip() or 'default'}" for c in commands()])
def test_each_breakpoint_stops_in_the_function_it_names(env, pdb_args, module, args, function, tmp_path):
    path, line = re.search(r"b (\S+):(\d+)", pdb_args).groups()
    assert _function_at(os.path.join(ROOT, path), int(line)) == function.split(".")[-1], (
        f"{path}:{line} is not in {function} any more: the code moved; update docs/LEARNING_PATH.md")
    extra = dict(item.split("=") for item in env.split())
    argv = [sys.executable, "-m", "pdb"] + [a or b for a, b in re.findall(r'"([^"]*)"|(\S+)', pdb_args)]
    argv += ["-c", "w", "-c", "q", "-m", module, *args.split(), "--out", str(tmp_path)]
    try:        # each stops within seconds; one that misses would run a whole demo (pure Python with the JIT off)
        result = subprocess.run(argv, cwd=ROOT, env={**os.environ, **extra}, capture_output=True, text=True,
                                timeout=BREAKPOINT_SECONDS)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no stop at {path}:{line} within {BREAKPOINT_SECONDS} s: the demo does not reach that line (a "
                    "branch it never takes?); point docs/LEARNING_PATH.md at a line every call of the function runs")
    stack = result.stdout
    frames = re.findall(r"^> \S+\(\d+\)(\w+)\(\)", stack, re.M)
    assert frames, f"the program never stopped:\n{stack[-2000:]}\n{result.stderr[-2000:]}"
    assert frames[0] == function.split(".")[-1], f"stopped in {frames[0]}, expected {function}:\n{stack[-1500:]}"


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
    result = subprocess.run([sys.executable, "-m", "demos.debug", "-b", "autograd/engine.py:61", "demos.tour",
                             "--out", str(tmp_path)], cwd=ROOT, input=commands, capture_output=True, text=True,
                            timeout=300)
    assert "> " + os.path.join(ROOT, "autograd", "engine.py") + "(61)run_backward()" in result.stdout
    assert "ops/reduce.py(47)backward()" in result.stdout and "<Mean node, output shape ()>" in result.stdout


def test_demos_debug_steps_from_matmul_forward_only_into_project_code(tmp_path):
    """Twenty `s` from MatMul.forward's first line (a first kernel call: the kernels load,
    Numba and setuptools' import hooks run) stop only in this project's files."""
    line = _first_line_of(os.path.join(ROOT, "autograd", "ops", "matmul.py"), "forward")
    commands = "s\n" * 20 + "q\n"
    result = subprocess.run([sys.executable, "-m", "demos.debug", "-b", f"autograd/ops/matmul.py:{line}", "demos.tour",
                             "--out", str(tmp_path)], cwd=ROOT, input=commands, capture_output=True, text=True,
                            timeout=300)
    stops = re.findall(r"^> (\S+)\(\d+\)", result.stdout, re.M)
    assert len(stops) > 10, result.stdout[-2000:]
    outside = [path for path in stops if not path.startswith(ROOT + os.sep) or "site-packages" in path]
    assert not outside, outside


def _first_line_of(path, function):
    """The line of the first statement (after the docstring) of the first function named `function`."""
    with open(path) as f:
        tree = ast.parse(f.read())
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    body = node.body[1:] if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) else node.body
    return body[0].lineno
