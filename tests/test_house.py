"""The house's rules, checked on the source: which package may import which (DESIGN.md's
"arrows only point down"), and the size limits that keep the classroom readable in an
afternoon.  Imports are read with ast, so a module imported inside a function counts too."""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
CORE = "transformer"


def modules(package):
    """(dotted module name, path) of every .py file below `package`."""
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        yield ".".join(parts[:-1] if parts[-1] == "__init__" else parts), path


def imported(path):
    """Every project module `path` imports (absolute names; `from transformer import x`
    counts as transformer.x when x is a module, as transformer otherwise)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names
                         if (ROOT / node.module.replace(".", "/") / f"{alias.name}.py").exists()
                         or (ROOT / node.module.replace(".", "/") / alias.name).is_dir())
    return names


def room(module):
    """The room of a transformer module: "families", "data", "training" or "core"."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in ("families", "data", "training") else "core"


# what each room may import of transformer/: training -> families -> core; data imports no model
ALLOWED = {"core": {"core"}, "families": {"families", "core"}, "data": {"data"},
           "training": {"training", "families", "core", "data"}}


@pytest.mark.parametrize("module, path", list(modules(CORE)), ids=lambda v: v if isinstance(v, str) else "")
def test_each_transformer_room_imports_only_the_rooms_below_it(module, path):
    own = room(module)
    wrong = sorted(name for name in imported(path)
                   if name.split(".")[0] == CORE and name != CORE and room(name) not in ALLOWED[own])
    assert not wrong, f"{module} ({own}) imports {wrong}; {own} may import only {sorted(ALLOWED[own])}"


@pytest.mark.parametrize("package, forbidden", [("autograd", ("nn", "transformer")), ("nn", ("transformer",)),
                                                ("autograd", ("demos", "exercises", "tests")),
                                                ("nn", ("demos", "exercises", "tests")),
                                                ("transformer", ("demos", "exercises", "tests"))])
def test_arrows_only_point_down(package, forbidden):
    wrong = sorted(f"{module} imports {name}" for module, path in modules(package) for name in imported(path)
                   if name.split(".")[0] in forbidden)
    assert not wrong, wrong


def test_the_model_core_is_at_most_fourteen_modules():
    core = sorted(path.name for path in (ROOT / CORE).glob("*.py"))
    assert len(core) <= 14, f"transformer/ holds {len(core)} modules directly: {core}"
    assert {p.name for p in (ROOT / CORE).iterdir() if p.is_dir() and not p.name.startswith("__")} == \
        {"families", "data", "training"}


def test_the_room_checker_sees_a_wrong_import(tmp_path):
    """The rules above would catch a data module importing a model (a checker that never
    fails checks nothing)."""
    bad = tmp_path / "bad.py"
    bad.write_text("from transformer.families.encoder_only import EncoderOnly\nimport transformer.attention\n")
    names = imported(bad)
    assert {room(n) for n in names if n.startswith(CORE + ".")} == {"families", "core"}
    assert not {room(n) for n in names if n.startswith(CORE + ".")} <= ALLOWED["data"]


CLASSROOM = ("autograd", "nn", "transformer", "exercises")


def classroom_files():
    """Every .py file a learner or teacher reads: all but the engine room (and demos, tests)."""
    return [path for package in CLASSROOM for _, path in modules(package)
            if "engine_room" not in path.relative_to(ROOT).parts]


def test_no_classroom_file_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in classroom_files() if (n := p.read_text().count("\n")) > 400}
    assert not long, long


def test_no_classroom_function_is_over_40_lines():
    long = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in classroom_files() for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 40]
    assert not long, long
