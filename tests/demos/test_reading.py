"""The reading edition (demos/reading/): the committed pages under docs/reading/ are the source,
verbatim, whole, and what a fresh trace writes; they meet the issue's targets (>= 98% of the code
lines are source lines, >= 90% of the distinct lines a GPT step runs, <= 800 code lines, >= 100
shapes); every debugger command they print resolves; the tracer records the shapes a call makes."""

import ast
import html
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from demos.debug import breakpoint_line
from exercises.regions import BEGIN, END
from exercises.twins import BEGIN_TWIN, END_TWIN
from demos.reading import html as reading_html, listing
from demos.reading.trace import Trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
READING = os.path.join(ROOT, "docs", "reading")
PAGES = ("gpt_step", "seq2seq_step", "scalar_backward", "loops_tier")
HEADING = re.compile(r"^#### \[`(?P<path>[^`:]+):(?P<first>\d+)`\]\([^)]*\) (?P<name>\S+)$")
ONE_LINER = re.compile(r"^- \[`(?P<path>[^`:]+):(?P<first>\d+)`\]\([^)]*\) `(?P<name>[^`]+)`: `(?P<line>[^`]+)`$")
FOLDED = re.compile(r"^\s*# \.\.\. (\d+) lines? not run on this step(?: \(a raise\))?$")
SHAPE = r"\((?:\d+(?:, \d+)*,?)?\)"
SHAPES = rf"{SHAPE}(?:, {SHAPE})*"
SUFFIX = re.compile(rf"(?:  # (?P<shape>{SHAPES}(?: \| {SHAPES})*(?: \| \d+ more)?))?(?P<not>  # not run)?")
MARKERS = (BEGIN, END, BEGIN_TWIN, END_TWIN)            # the only lines a page may leave out unfolded
REGENERATE = "python -m demos.figures --only reading (or python -m demos.reading --out docs/reading)"


def blocks(markdown):
    """(path, first line, name, [code block lines]) of each function on a Markdown page."""
    found, lines = [], markdown.split("\n")
    for at, line in enumerate(lines):
        heading = HEADING.match(line)
        if heading:
            start = lines.index("```python", at) + 1
            found.append((heading["path"], int(heading["first"]), heading["name"], lines[start:lines.index("```", start)]))
    return found


def definition(tree, name):
    """The def of a qualified name (Class.method, outer.<locals>.inner) in a module's tree, or None."""
    nodes = [tree]
    for part in name.replace(".<locals>", "").split("."):
        nodes = [child for node in nodes for child in ast.iter_child_nodes(node)
                 if isinstance(child, (ast.FunctionDef, ast.ClassDef)) and child.name == part]
    return nodes[0] if nodes else None


def one_liners(markdown):
    """(path, first line, name, the line shown) of each one-liner the page lists at its end."""
    return [(found["path"], int(found["first"]), found["name"], found["line"])
            for found in map(ONE_LINER.match, markdown.split("\n")) if found]


def code_lines(source_lines, tree):
    """The numbers of a module's lines of code: not blank, not a comment, not in a docstring."""
    docstrings = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    return {n for n, text in enumerate(source_lines, 1)
            if text.strip() and not text.strip().startswith("#") and n not in docstrings}


def read_page(markdown):
    """What a page shows, checked against the source: {"problems", "code", "verbatim", "shapes",
    "run", "not_run", "functions"} (run and not_run: sets of (path, line))."""
    seen = {"problems": [], "code": 0, "verbatim": 0, "shapes": 0, "run": set(), "not_run": set(), "functions": 0}
    for path, first, name, shown in blocks(markdown):
        seen["functions"] += 1
        if path.startswith(("autograd/engine_room", "demos/")):
            seen["problems"].append(f"{path}: the engine room and demos never appear")
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            source = f.read()
        tree, source_lines = ast.parse(source), source.split("\n")
        node = definition(tree, name)
        if node is None or min([node.lineno] + [d.lineno for d in node.decorator_list]) != first:
            seen["problems"].append(f"{path}:{first}: {name} does not start there")
            continue
        code, indent = code_lines(source_lines, tree), len(source_lines[first - 1]) - len(source_lines[first - 1].lstrip())
        number = first
        for line in shown:
            while any(marker.match(source_lines[number - 1]) for marker in MARKERS):
                number += 1                                         # an exercise's marker comment: left out
            folded = FOLDED.match(line)
            if folded:
                number += int(folded[1])
                continue
            original = source_lines[number - 1][indent:]
            suffix = SUFFIX.fullmatch(line[len(original):]) if line.startswith(original) else None
            if number in code:
                seen["code"] += 1
                seen["verbatim"] += suffix is not None
                seen["shapes"] += bool(suffix and suffix["shape"])
                seen["not_run" if suffix and suffix["not"] else "run"].add((path, number))
            if suffix is None:
                seen["problems"].append(f"{path}:{number}: the page shows {line.strip()!r}, the source "
                                        f"{original.strip()!r}")
            number += 1
        while number <= node.end_lineno and any(marker.match(source_lines[number - 1]) for marker in MARKERS):
            number += 1                                             # a closing marker comment, left out
        if number != node.end_lineno + 1:
            seen["problems"].append(f"{path}:{first} {name}: the page shows up to line {number - 1}, "
                                    f"the function ends at {node.end_lineno}")
    for path, first, name, shown in one_liners(markdown):
        seen["functions"] += 1
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            source = f.read()
        node = definition(ast.parse(source), name)
        body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))] \
            if node is not None else []
        if node is None or min([node.lineno] + [d.lineno for d in node.decorator_list]) != first or \
                len(body) != 1 or not isinstance(body[0], ast.Return) or body[0].end_lineno != body[0].lineno:
            seen["problems"].append(f"{path}:{first}: {name} is not a one-line function starting there")
            continue
        original = source.split("\n")[body[0].lineno - 1].strip()
        suffix = SUFFIX.fullmatch(shown[len(original):]) if shown.startswith(original) else None
        seen["code"] += 1
        seen["verbatim"] += suffix is not None
        seen["shapes"] += bool(suffix and suffix["shape"])
        seen["not_run" if suffix and suffix["not"] else "run"].add((path, body[0].lineno))
        if suffix is None:
            seen["problems"].append(f"{path}:{body[0].lineno}: the page shows {shown!r}, the source {original!r}")
    return seen


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


@pytest.fixture(scope="module")
def committed():
    """{page: (Markdown, HTML, what the Markdown shows)} of the committed copies."""
    pages = {}
    for name in PAGES:
        markdown = read(os.path.join(READING, f"{name}.md"))
        pages[name] = (markdown, read(os.path.join(READING, f"{name}.html")), read_page(markdown))
    return pages


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """{page: (Markdown, HTML, {path: [lines]} its trace ran)} as a fresh trace writes them (one
    subprocess: the trace chooses the numpy tier of kernels, which must not leak into other tests)."""
    out = tmp_path_factory.mktemp("reading")
    script = ("import json, sys; from demos.reading.__main__ import PAGES, write\n"
              "for name, make in PAGES.items():\n"
              "    step = make(); write(step, sys.argv[1])\n"
              "    json.dump({p: sorted(n) for p, n in step.trace.lines.items()}, "
              "open(f'{sys.argv[1]}/{name}.json', 'w'))")
    result = subprocess.run([sys.executable, "-c", script, str(out)], cwd=ROOT, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert read(out / "scalar_backward.svg") == read(os.path.join(READING, "scalar_backward.svg")), \
        f"docs/reading/scalar_backward.svg is stale: regenerate with {REGENERATE}"
    return {name: (read(out / f"{name}.md"), read(out / f"{name}.html"), json.loads(read(out / f"{name}.json")))
            for name in PAGES}


@pytest.mark.parametrize("name", PAGES)
def test_the_committed_page_is_the_source_verbatim_and_whole(committed, name):
    problems = committed[name][2]["problems"]
    assert not problems, f"{problems[:5]}: regenerate with {REGENERATE}"


@pytest.mark.parametrize("name", ["gpt_step", "seq2seq_step"])
def test_the_committed_training_steps_meet_the_targets(committed, name):
    seen = committed[name][2]
    assert seen["functions"] >= 100
    assert seen["verbatim"] / seen["code"] >= 0.98
    assert seen["code"] <= 800, f"{seen['code']} code lines: fold more of what a step never runs"
    assert seen["shapes"] >= 100


@pytest.mark.parametrize("name", ["gpt_step", "seq2seq_step"])
def test_a_training_page_reads_from_the_model_down(committed, name):
    """The forward pass, then the step, the backward pass and the update; the functions that
    only check their inputs after them all; no exercise's marker comment in the code."""
    markdown = committed[name][0]
    sections = re.findall(r"^## \d+\. (.+)$", markdown, re.M)
    order = ["The configuration", "The model's parts", "The forward pass", listing.PHASE_TITLES["plumbing"],
             "The step", "The backward pass", "The optimizer's update", "Checking the inputs"]
    present = [title for title in sections if title in order]           # seq2seq's config: dataclasses and checks
    assert present == [title for title in order if title in present] and set(order[1:]) <= set(present), sections
    checking = sections.index("Checking the inputs")
    assert set(sections[checking:]) <= {"Checking the inputs", listing.ONE_LINERS}, sections
    assert sections[-1] == listing.ONE_LINERS
    checks = markdown.split(f"## {checking + 1}. Checking the inputs")[1].split("\n## ")[0]
    for path, first, function, shown in blocks(markdown):
        own_name = function.rsplit(".", 1)[-1]
        assert bool(listing.CHECKS.fullmatch(own_name)) == (f"{path}:{first}`]" in checks), function
        assert not [line for line in shown if any(marker.match(line) for marker in MARKERS)], function


@pytest.mark.parametrize("name", PAGES)
def test_the_contents_count_each_section_s_lines_and_name_a_first_reading(committed, name):
    """Each line of the contents counts its section's functions and lines of code, as this test
    reads the section; a training page names the model and the step as a first reading, about
    as long as nanoGPT's model.py and training loop (some 650 lines), and its count adds up."""
    markdown = committed[name][0]
    counted = re.findall(r"^\d+\. \[(.+)\]\(#[^)]*\) \((\d+) functions?, (\d+) lines?\)$", markdown, re.M)
    assert [title for title, _, _ in counted] == re.findall(r"^## \d+\. (.+)$", markdown, re.M)
    for title, functions, lines in counted:
        text = re.split(rf"^## \d+\. {re.escape(title)}$", markdown, flags=re.M)[1].split("\n## ")[0]
        assert int(functions) == len(blocks(text)) + len(one_liners(text)), title
        bare = len(re.findall(r"^\s*(?:else|finally|except\b[^#]*):$", text, re.M))   # clause headers: no code
        assert int(lines) == read_page(text)["code"] - bare, title
    first = re.search(r"^A first reading: sections ([\d, ]+) and (\d+), the model and the step \((\d+) lines of code\)",
                      markdown, re.M)
    if name in ("scalar_backward", "loops_tier"):
        assert first is None                                       # all of it is a first reading
        return
    numbers = [int(n) for n in first[1].split(", ")] + [int(first[2])]
    assert {counted[n - 1][0] for n in numbers} >= {"The model's parts", "The forward pass"}
    assert int(first[3]) == sum(int(counted[n - 1][2]) for n in numbers) <= 450


def test_the_gpt_step_s_step_is_what_nanogpt_s_loop_does_around_the_model(committed):
    """The step, in the first reading, as nanoGPT's training loop has it: a batch of random
    blocks, the learning rate's warm-up and cosine schedule, the update, and the evaluation."""
    names = {function for _, _, function, _ in section(committed["gpt_step"][0], "The step")}
    assert {"LMJob.step", "TextDataset.batch", "LMTrainConfig.lr_at", "warmup_cosine", "optimize", "LMJob.evaluate",
            "estimate_loss", "step_functions.<locals>.evaluate"} <= names, names


def section(markdown, title):
    """The functions (path, first line, name, [code lines]) of a page's section."""
    text = re.split(rf"^## \d+\. {re.escape(title)}$", markdown, flags=re.M)[1].split("\n## ")[0]
    return blocks(text)


@pytest.mark.parametrize("name", ["gpt_step", "seq2seq_step"])
def test_the_model_s_parts_are_its_constructors_before_the_forward_pass(committed, name):
    """The first section after the configuration shows the constructors of the model's layers
    (transformer/ and nn/, none of nn.Module's bookkeeping) and their factories, the model's own
    first, with the shapes of the parameters they make; the GPT's ties its output layer to its
    embedding and makes its norms with make_norm."""
    markdown = committed[name][0]
    parts = section(markdown, "The model's parts")
    names = [function for _, _, function, _ in parts]
    assert names[0] == ("DecoderOnly.__init__" if name == "gpt_step" else "Transformer.__init__"), names
    assert all(listing.is_part(path, function.rsplit(".", 1)[-1]) for path, _, function, _ in parts), names
    assert {"MultiHeadAttention.__init__", "FeedForward.__init__", "Linear.__init__", "LayerNorm.__init__",
            "Embedding.__init__", "Residual.__init__"} <= set(names), names
    assert not [n for n in names if n.startswith(("Module.", "Parameter.", "ModuleList."))], names
    code = {function: lines for _, _, function, lines in parts}
    assert re.search(r"self\.weight = Parameter\(init\.uniform\(.*  # \(\d+, \d+\)", "\n".join(code["Linear.__init__"]))
    assert any(line.strip().startswith("self.sublayer1 = Residual(") for line in code["TransformerLayer.__init__"])
    if name == "gpt_step":
        assert any(re.match(r"\s*self\.out_proj\.weight = self\.embed\.weight\b", line)
                   for line in code["DecoderOnly.__init__"])
        assert any("norm_first=True" in line for line in code["DecoderOnly.__init__"])
        assert {"make_norm", "make_positional", "DecoderOnly._init_gpt2"} <= set(names), names


@pytest.mark.parametrize("name", ["gpt_step", "seq2seq_step"])
def test_the_forward_pass_is_the_model_and_the_plumbing_comes_after_it(committed, name):
    """The forward pass shows no plumbing (Module.__call__, Function.apply, the tensor's private
    helpers): each is once, in its own section right after the forward pass."""
    markdown = committed[name][0]
    forward, plumbing = (section(markdown, title) for title in ("The forward pass", listing.PHASE_TITLES["plumbing"]))
    assert not [f for path, _, f, _ in forward if listing.is_plumbing(path, f.rsplit(".", 1)[-1])]
    names = [f for path, _, f, _ in plumbing]
    assert all(listing.is_plumbing(path, f.rsplit(".", 1)[-1]) for path, _, f, _ in plumbing), names
    assert {"Module.__call__", "Function.apply", "Tensor._make"} <= set(names) and len(set(names)) == len(names)
    assert forward[0][2] == ("DecoderOnly.forward" if name == "gpt_step" else "Transformer.forward")


@pytest.mark.parametrize("path, name, part, plumbing", [
    ("transformer/attention.py", "__init__", True, False), ("nn/layers.py", "__init__", True, False),
    ("nn/module.py", "__init__", False, True), ("nn/module.py", "__call__", False, True),
    ("nn/module.py", "__setattr__", False, True), ("autograd/function.py", "apply", False, True),
    ("autograd/function.py", "save_for_backward", False, True), ("autograd/tensor.py", "_make", False, True),
    ("autograd/ops/shape.py", "_is_advanced", False, True), ("autograd/tensor.py", "reshape", False, False),
    ("autograd/tensor.py", "__init__", False, False), ("autograd/ops/shape.py", "forward", False, False),
    ("autograd/kernels/reference.py", "_row_max", False, False), ("transformer/attention.py", "_split_heads", False, False),
    ("transformer/layers.py", "forward", False, False), ("nn/functional.py", "_reduce", False, False),
    ("transformer/layers.py", "make_norm", True, False), ("transformer/families/decoder_only.py", "_init_gpt2", True, False),
    ("nn/module.py", "_initialise", False, True), ("transformer/config.py", "require_positive", False, False)])
def test_which_functions_are_the_model_s_parts_and_which_the_plumbing(path, name, part, plumbing):
    assert (listing.is_part(path, name), listing.is_plumbing(path, name)) == (part, plumbing)


def test_the_gpt_page_reads_in_the_order_the_step_runs(committed):
    """nanoGPT's model.py top to bottom, as the step ran it: the embedding, a block's norm,
    attention (projections, heads, scores, mask, softmax, merge), the MLP, the loss; then the
    engine's walk and each op's backward as it first reaches it (the loss's first, the
    embedding's gather last); then AdamW. No list of names in demos/reading says this order."""
    names = [name for _, _, name, _ in blocks(committed["gpt_step"][0])]
    forward = ["DecoderOnly.forward", "embedding", "LayerNormFn.forward", "MultiHeadAttention.forward",
               "LinearFn.forward", "MultiHeadAttention._split_heads", "scaled_dot_product_attention",
               "MatMul.forward", "MaskedFill.forward", "Softmax.forward", "MultiHeadAttention._merge_heads",
               "FeedForward.forward", "GELUFn.forward", "cross_entropy", "LogSoftmax.forward",
               "Tensor.backward", "run_backward", "graph_nodes", "Div.backward", "LogSoftmax.backward",
               "LinearFn.backward", "LayerNormFn.backward", "GELUFn.backward", "MatMul.backward", "Softmax.backward",
               "MaskedFill.backward", "index_add_rows", "clip_grad_norm_", "Optimizer.step", "adam_step"]
    assert [names.index(name) for name in forward] == sorted(names.index(name) for name in forward), \
        [name for name in names if name in forward]


@pytest.mark.parametrize("seed", [0, 1])
def test_functions_are_read_in_the_order_the_call_first_entered_them(seed):
    """Within a phase the page's order is the trace's order of first entry, whatever the file
    or layer (a caller before its callees): attention's forward, then its projections' ops."""
    from transformer.attention import MultiHeadAttention
    from autograd import Tensor, manual_seed
    rng = np.random.default_rng(seed)
    manual_seed(seed)
    attention = MultiHeadAttention(8, 2)
    x = Tensor(rng.standard_normal((2, int(rng.integers(2, 6)), 8)).astype(np.float32), requires_grad=True)
    trace = Trace(phases=(("autograd/tensor.py", "Tensor.backward", "backward"),))
    out = trace.record("forward", attention, x, x, x)
    trace.record("forward", lambda: out.sum().backward())
    shown = listing.functions(trace, ("forward", "backward"))
    entered = [code.co_qualname for code in trace.functions if not code.co_name.startswith("<")]
    assert [f.name for f in shown] == sorted((f.name for f in shown), key=entered.index)
    assert shown[0].name == "Module.__call__" and shown[1].name == "MultiHeadAttention.forward"
    phases = [f.phase for f in shown]
    assert phases == sorted(phases, key=("forward", "backward").index) and "backward" in phases


def test_a_one_liner_is_listed_at_the_end_and_the_rest_shown_whole(committed):
    """A property, a getter, a Tensor method handing its work to an op: one line each at the
    page's end; an op's or a kernel's one line, its math, and the model's stay whole in place."""
    markdown = committed["gpt_step"][0]
    singles = {name: path for path, _, name, _ in one_liners(markdown)}
    assert {"is_grad_enabled", "Tensor.__matmul__"} <= set(singles)      # Tensor.shape runs in C: no frame
    assert not [path for path in singles.values() if path.startswith(listing.TEACHING)]
    whole = {name for _, _, name, _ in blocks(markdown)}
    assert {"Add.forward", "Add.backward", "causal_mask", "FeedForward.forward"} <= whole
    assert not whole & set(singles)
    for path, first, name, shown in blocks(markdown):
        node = definition(ast.parse(read(os.path.join(ROOT, path))), name)
        if not path.startswith(listing.TEACHING):
            assert listing.one_liner(path, node) is None, name


@pytest.mark.parametrize("source, single", [
    ("@property\ndef shape(self):\n    return self.data.shape\n", "return self.data.shape"),
    ('def f():\n    """Say."""\n    return _enabled\n', "return _enabled"),
    ("def f(x):\n    y = x\n    return y\n", None),                          # two statements
    ("def f(x):\n    return g(x,\n             1)\n", None),                  # a return on two lines
    ("def f(x):\n    x.go()\n", None),                                        # no return
    ("def f(x):\n    return\n", None)])                                       # a bare return
def test_which_functions_are_one_liners(source, single):
    node = ast.parse(source).body[0]
    found = listing.one_liner("nn/x.py", node)
    assert (found and source.split("\n")[found.lineno - 1].strip()) == single
    assert listing.one_liner("autograd/ops/x.py", node) is None and listing.one_liner("transformer/x.py", node) is None


@pytest.mark.parametrize("name", PAGES)
def test_the_committed_pages_are_what_a_fresh_trace_writes(committed, fresh, name):
    assert fresh[name][0] == committed[name][0], f"docs/reading/{name}.md is stale: regenerate with {REGENERATE}"
    # the heatmaps' weights (float rounding differs by machine) and the text they are for (the GPT's: the standard
    # library's docstrings, which differ by Python version)
    weights = re.compile(r' data-(?:weights|queries|keys)="[^"]*"|<div class="(?:keys|queries)">.*?</div>')
    assert weights.sub("", fresh[name][1]) == weights.sub("", committed[name][1]), \
        f"docs/reading/{name}.html is stale: regenerate with {REGENERATE}"


@pytest.mark.parametrize("name", PAGES)
def test_the_page_marks_what_the_step_ran(committed, fresh, name):
    """>= 90% of the distinct lines a step runs are on the page as run; no line it ran is
    marked not run, and every line marked run is part of a statement that ran."""
    ran = {(path, n) for path, numbers in fresh[name][2].items() for n in numbers}
    assert not any(path.startswith(("autograd/engine_room", "demos/")) for path, _ in ran)
    seen = committed[name][2]
    assert len(ran & seen["run"]) / len(ran) >= 0.9
    assert not ran & seen["not_run"]
    statements = [listing.statements(os.path.join(ROOT, path)).get(n) for path, n in seen["run"]]
    unrun = [(path, statement.lineno) for (path, _), statement in zip(seen["run"], statements)
             if statement is not None and not isinstance(statement, (ast.FunctionDef, ast.Try))
             and (path, statement.lineno) not in ran]               # else: and the def lines have no line event
    assert not unrun, unrun[:5]


@pytest.mark.parametrize("name", PAGES)
def test_the_html_fetches_nothing(committed, name):
    page = committed[name][1]
    assert not re.search(r"""(src|href)=["']?(https?:|//)|@import|url\((?!#)""", page)
    assert page.count("<style>") == 1 and page.count("<script>") == 1


@pytest.mark.parametrize("name", PAGES)
def test_every_debugger_command_resolves_to_its_function(committed, name):
    commands = re.findall(r"python -m demos\.debug -b (\S+) demos\.", committed[name][1])
    assert len(commands) == len(blocks(committed[name][0]))
    cwd = os.getcwd()
    os.chdir(ROOT)                                              # demos.debug reads FILE from the project's folder
    try:
        for spec in commands:
            path, line = breakpoint_line(spec)
            assert path == spec.split(":")[0] and line > 0
    finally:
        os.chdir(cwd)


def test_every_printed_debugger_command_writes_into_runs_scratch_only(committed):
    """A learner runs these commands as printed: none may write over a run of theirs (runs/gpt)."""
    for page, texts in committed.items():
        commands = [html.unescape(c) for text in texts[:2] for c in re.findall(r"python -m demos\.debug [^<`\n]+", text)]
        assert commands and all(c.rstrip().endswith("--out runs/scratch") for c in commands), \
            (page, [c for c in commands if not c.rstrip().endswith("--out runs/scratch")][:3])


@pytest.mark.parametrize("demo, quick", [("demos.gpt", ("--max-iters 1", "--eval-iters 1", "--sample-tokens 1")),
                                         ("demos.train", ("--steps 1", "--beam-examples 1"))])
def test_every_printed_debugger_command_ends_soon_after_its_stop(committed, demo, quick):
    """A command that stops in a function trains one step and then evaluates and samples as little
    as its demo allows, so that `c` past the breakpoint ends in seconds, not minutes."""
    commands = [html.unescape(c) for texts in committed.values() for text in texts[:2]
                for c in re.findall(rf"python -m demos\.debug -b \S+ {re.escape(demo)} [^<`\n]+", text)]
    assert commands
    slow = [c for c in commands if not all(f" {flag} " in f" {c} " for flag in quick)]
    assert not slow, slow[:3]


@pytest.mark.parametrize("page, spec, where, shape", [
    ("gpt_step", "transformer/attention.py:scaled_dot_product_attention",
     r"attention\.py\(\d+\)scaled_dot_product_attention\(\)", "(12, 4, 64, 32)"),       # the shape the page shows for q
    ("loops_tier", "autograd/kernels/loops.py:softmax_loops", r"loops\.py\(\d+\)softmax_loops\(\)",
     "(32, 8)")])                                                 # the small GPT's scores: 2 x 2 heads x 8 rows
def test_a_printed_debugger_command_stops_in_its_function(committed, tmp_path, page, spec, where, shape):
    command = re.search(rf"<code>(\S+=\S+) python -m demos\.debug -b {re.escape(spec)} ([^<]+)</code>",
                        committed[page][1])
    assert command, spec
    environment, demo = command[1].split("=", 1), html.unescape(command[2]).split()
    result = subprocess.run([sys.executable, "-m", "demos.debug", "-b", spec, *demo, "--out", str(tmp_path)],
                            input="p tuple(q.shape) if 'q' in dir() else x.shape\nq\n", capture_output=True,
                            text=True, cwd=ROOT, timeout=600, env=dict(os.environ, **dict([environment])))
    assert re.search(where, result.stdout), result.stdout[-2000:] + result.stderr
    assert shape in result.stdout


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_tracer_records_the_shapes_attention_makes(seed):
    from transformer.attention import MultiHeadAttention
    from autograd import Tensor, manual_seed
    from transformer.masks import causal_mask
    rng = np.random.default_rng(seed)
    batch, length, heads = (int(n) for n in rng.integers(1, 5, 3))
    d_model = heads * int(rng.integers(2, 6))
    manual_seed(seed)
    attention = MultiHeadAttention(d_model, heads)
    x = Tensor(rng.standard_normal((batch, length, d_model)).astype(np.float32))
    trace = Trace(watch=(("transformer/attention.py", "scaled_dot_product_attention", "weights"),))
    out = trace.record("forward", attention, x, x, x, causal_mask(length))
    split = (batch, heads, length, d_model // heads)
    shapes = {line: seen for (path, line), seen in trace.shapes.items() if path == "transformer/attention.py"}
    source = open(os.path.join(ROOT, "transformer/attention.py")).read().split("\n")
    q_line = next(n for n, text in enumerate(source, 1) if "q = self._split_heads(self.q_proj(query))" in text)
    assert shapes[q_line] == [str(split)]
    weights_line = next(n for n, text in enumerate(source, 1) if "weights = scores.softmax(-1)" in text)
    assert shapes[weights_line] == [str((batch, heads, length, length))]
    watched = trace.watched[("transformer/attention.py", "scaled_dot_product_attention", "weights")]
    assert len(watched) == 1 and np.array_equal(watched[0].data, attention.attn_weights)
    assert out.shape == (batch, length, d_model)


def line(number, status):
    return listing.Line(number, f"line {number}", status)


@pytest.mark.parametrize("not_run, folded", [(0, False), (1, True), (2, True), (3, True), (7, True)])
def test_every_stretch_not_run_is_folded(not_run, folded):
    """Even one line: the page keeps to what ran, and a click opens the fold in the HTML."""
    lines = [line(1, "run")] + [line(2 + i, "not") for i in range(not_run)] + [line(2 + not_run, "text"),
                                                                              line(3 + not_run, "run")]
    rows = listing.fold(lines)
    folds = [row for row in rows if isinstance(row, listing.Fold)]
    assert len(folds) == folded
    assert [l.number for row in rows for l in (row.lines if isinstance(row, listing.Fold) else [row])] == \
        [l.number for l in lines]                                   # nothing lost, nothing reordered
    if folded:
        assert folds[0].code_lines == not_run and rows[-2].status == "text"   # the comment after stays outside


@pytest.mark.parametrize("texts, raising", [(["raise ValueError(x)"], True), (["raise ValueError(", "    x)"], True),
                                            (["return fused(q, k, v)"], False), (["raise KeyError(k)", "raise E"], True),
                                            (["raise E", "return x"], False)])
def test_a_fold_says_when_it_is_an_error_path(texts, raising):
    lines = [listing.Line(1, "if bad:", "run")] + [listing.Line(2 + i, "    " + t, "not") for i, t in enumerate(texts)]
    fold, = [row for row in listing.fold(lines) if isinstance(row, listing.Fold)]
    count = len(texts)
    assert listing.fold_text(fold) == (f"    # ... {count} line{'s' * (count > 1)} not run on this step"
                                       + (" (a raise)" if raising else ""))


def test_the_html_renders_in_chromium(committed, tmp_path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium): the HTML is not rendered")
    page = "file://" + os.path.join(READING, "gpt_step.html")
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu"]
    dom = subprocess.run(flags + ["--dump-dom", page], capture_output=True, text=True, timeout=300).stdout
    assert "scaled_dot_product_attention" in dom and dom.count('class="heat"') == 16
    assert dom.count('class="l ') >= 700 and "weights = scores.softmax(-1)" in re.sub(r"<[^>]+>", "", dom)
    assert dom.count(reading_html.QUERY_AXIS) == dom.count("key →") == 16
    hover = tmp_path / "hover.html"                  # the page, and a mouse over the first heatmap's row 5, column 2
    hover.write_text(committed["gpt_step"][1].replace("</body>", (
        '<script>const c = document.querySelector("canvas.heat"), r = c.getBoundingClientRect();'
        'c.dispatchEvent(new MouseEvent("mousemove", {clientX: r.left + 2.5 * r.width / c.width, '
        'clientY: r.top + 5.5 * r.height / c.height}));'
        'const a = document.querySelector(".qt"), q = a.getBoundingClientRect(), s = getComputedStyle(a);'
        'document.body.insertAdjacentHTML("beforeend", `<pre id="hover">${c.title}</pre>'
        '<pre id="axis">${q.width} ${q.height} ${s.writingMode} ${q.right - r.left} ${q.bottom - r.top}</pre>`);'
        '</script></body>')),
        encoding="utf-8")
    hovered = subprocess.run(flags + ["--dump-dom", f"file://{hover}"], capture_output=True, text=True,
                             timeout=300).stdout
    said = re.search(r'<pre id="hover">layer 0, head 0: query 5 (.+) → key 2 (.+): (0\.\d{3})</pre>', hovered)
    tokens = json.loads(html.unescape(re.search(r'data-queries="([^"]*)"', committed["gpt_step"][1])[1]))
    assert said and (said[1], said[2]) == (f"'{tokens[5]}'", f"'{tokens[2]}'"), hovered[-500:]
    width, height, mode, right, bottom = re.search(r'<pre id="axis">([\d.]+) ([\d.]+) ([\w-]+) ([-\d.]+) ([-\d.]+)</pre>',
                                                   hovered).groups()
    assert mode == "horizontal-tb" and float(width) > 2 * float(height)       # level, as the keys' label
    assert float(right) <= 1 and float(bottom) <= 1            # above the rows' names, left of the map: its corner
    assert float(said[3]) == pytest.approx(heatmap_rows(committed["gpt_step"][1], "layer 0")[0][5, 2], abs=6e-4)
    shot = tmp_path / "page.png"
    subprocess.run(flags + ["--window-size=1200,1600", f"--screenshot={shot}", page], capture_output=True,
                   timeout=300)
    from PIL import Image
    pixels = np.asarray(Image.open(shot).convert("L"))
    assert pixels.shape == (1600, 1200) and pixels.std() > 10 and (pixels < 100).mean() > 0.01   # text, not blank
    scalar = subprocess.run(flags + ["--dump-dom", "file://" + os.path.join(READING, "scalar_backward.html")],
                            capture_output=True, text=True, timeout=300).stdout
    assert scalar.count("<rect") == 10 and "grad -1.5" in scalar        # micrograd's neuron: x1's gradient


@pytest.mark.parametrize("argv, says", [(["--out", "FILE"], "--out: "), (["--out", "DIR", "--page", "gpt"], "--page"),
                                        (["--out", "DIR", "--json", "DIR"], "--json")])
def test_a_mistaken_command_is_refused_in_one_line_before_tracing(argv, says, tmp_path, capsys):
    from demos.reading.__main__ import main
    (tmp_path / "FILE").write_text("not a folder")
    paths = {"FILE": str(tmp_path / "FILE"), "DIR": str(tmp_path)}
    with pytest.raises(SystemExit) as stopped:
        main([paths.get(arg, arg) for arg in argv])
    error = capsys.readouterr().err.strip()
    assert stopped.value.code == 2 and says in error and "\n" not in error
    assert sorted(os.listdir(tmp_path)) == ["FILE"]                     # nothing written


def graphs():
    """Scalar graphs to draw: micrograd's neuron, and graphs whose nodes feed nodes in several
    columns (a skip past a column, a node used twice by one op, a leaf used at three depths)."""
    from autograd.scalar import Value
    x1, x2, w1, w2, b = (Value(v) for v in (2.0, 0.0, -3.0, 1.0, 6.8813735870195432))
    yield (x1 * w1 + x2 * w2 + b).tanh()
    a, c = Value(2.0), Value(-3.0)
    yield ((a * c + a).tanh() * a + c * c).relu()
    for seed in range(4):
        rng = np.random.default_rng(seed)
        nodes = [Value(float(v)) for v in rng.standard_normal(3)]
        for _ in range(8):
            i, j = rng.integers(0, len(nodes), 2)
            nodes.append(nodes[i] * nodes[j] if rng.random() < 0.5 else nodes[i] + nodes[j].tanh())
        yield sum(nodes[3:], Value(0.0))


@pytest.mark.parametrize("root", list(graphs()), ids=lambda _: "graph")
def test_no_arrow_of_the_graph_crosses_a_box(root):
    """Every arrow starts on its parent's right border and ends on its child's left border,
    and no point of it lies inside any box: it never runs behind one."""
    from demos.reading import graph
    drawing = graph.svg(root, {})
    boxes = [tuple(float(v) for v in found) for found in
             re.findall(r'<rect x="([\d.]+)" y="([\d.]+)" width="([\d.]+)" height="([\d.]+)"', drawing)]
    arrows = [[tuple(map(float, point.split(","))) for point in points.split()]
              for points in re.findall(r'<polyline points="([^"]+)"', drawing)]
    from autograd.scalar import topological_order
    order = topological_order(root)
    assert len(boxes) == len(order) and len(arrows) == sum(len(node.parents) for node in order)
    assert drawing.index("<polyline") < drawing.index("<rect") and drawing.rindex("<polyline") < drawing.index("<rect")
    for points in arrows:
        start, end = points[0], points[-1]
        assert any(start[0] == x + w and y < start[1] < y + h for x, y, w, h in boxes), start
        assert any(end[0] == x and y < end[1] < y + h for x, y, w, h in boxes), end
        for (x0, y0), (x1, y1) in zip(points, points[1:]):
            for t in np.linspace(0, 1, 101):
                px, py = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
                inside = [box for box in boxes if box[0] < px < box[0] + box[2] and box[1] < py < box[1] + box[3]]
                assert not inside, f"the arrow {points} runs through the box at {inside[0][:2]}"


def heatmap_rows(page, label):
    """The weights (rows of each head's heatmap, in 1/10000) the page draws for `label` ("layer 0")."""
    found = re.findall(rf'data-label="{re.escape(label)}, head \d+" data-weights="([^"]+)"', page)
    return [np.array(json.loads(html.unescape(weights)), dtype=float) / 1e4 for weights in found]


def test_the_heatmaps_show_a_trained_model_and_say_so(committed):
    """An untrained model attends almost evenly: the GPT's heatmaps are peaked (a causal row's
    entropy, over an even row's, is 0.9997 on average untrained), a head of the reverse task's
    last cross-attention is the anti-diagonal, and each page names the step its weights come from."""
    from demos.reading.steps import TRAINED_STEPS
    gpt, seq2seq = committed["gpt_step"][1], committed["seq2seq_step"][1]
    for page in (gpt, seq2seq):
        assert f"after {TRAINED_STEPS} steps of the same seeded run" in page
    ratios = []
    for layer in range(4):
        for head in heatmap_rows(gpt, f"layer {layer}"):
            for i, row in enumerate(head[1:], 1):                     # row i may attend to keys 0..i
                p = row[:i + 1] / row[:i + 1].sum()
                ratios.append(-(p[p > 0] * np.log(p[p > 0])).sum() / np.log(i + 1))
    assert np.mean(ratios) < 0.9, np.mean(ratios)                     # untrained: 0.9997
    heads = heatmap_rows(seq2seq, "decoder 1 cross")                  # rows: BOS and the outputs; columns: the source
    length = heads[0].shape[1]
    reversing = [np.mean([head[t].argmax() == length - 1 - t for t in range(length)]) for head in heads]
    assert max(reversing) >= 0.8, [head.argmax(1) for head in heads]


@pytest.mark.parametrize("name", ["gpt_step", "seq2seq_step"])
def test_each_heatmap_names_its_axes(committed, name):
    """Every heatmap is captioned with its call and head, says "query ↓" and "key →", and names
    each row and column by its token: as many names as rows and columns, the same the hover
    text reads; the GPT's are its sequence's characters, the seq2seq's cross-attention reads the
    target down and the source across."""
    page = committed[name][1]
    figures = re.findall(r'<figure class="hm"[^>]*><figcaption>([^<]+)</figcaption>(.*?)</figure>', page)
    assert len(figures) == (16 if name == "gpt_step" else 24)
    for caption, inside in figures:
        assert re.fullmatch(r"(layer \d|(encoder|decoder) \d (self|cross)), head \d", caption)
        assert f'<span class="kt">key →</span><span class="qt">{reading_html.QUERY_AXIS}</span>' in inside
        keys, queries = (re.findall(r"<span>([^<]*)</span>", re.search(rf'<div class="{kind}">(.*?)</div>', inside)[1])
                         for kind in ("keys", "queries"))
        canvas = re.search(r'width="(\d+)" height="(\d+)" data-label="([^"]+)" data-weights="[^"]+" '
                           r'data-queries="([^"]+)" data-keys="([^"]+)"', inside)
        assert canvas[3] == caption and (len(keys), len(queries)) == (int(canvas[1]), int(canvas[2]))
        assert [html.unescape(t) for t in queries] == json.loads(html.unescape(canvas[4]))
        assert [html.unescape(t) for t in keys] == json.loads(html.unescape(canvas[5]))
        if "cross" in caption:
            assert queries[0] == "&lt;s&gt;" and "&lt;s&gt;" not in keys         # the target's BOS down, the source across
        elif name == "gpt_step":
            assert queries == keys and len(keys) == 24 and all(len(html.unescape(t)) == 1 for t in keys)


def test_the_query_axis_is_one_level_word_pointing_down_the_rows(committed):
    """The query axis's label is level, as the key axis's is, above the rows' token names and
    pointing down them: not turned (a learner read the turned label as drawn wrong), and not
    stacked beside the token names, where it would read as tokens."""
    style = committed["gpt_step"][1]
    assert "writing-mode" not in style and "text-orientation" not in style
    rule = re.search(r"\.kt, \.qt \{([^}]*)\}", style)[1]
    declarations = dict(d.strip().split(": ", 1) for d in rule.split(";") if d.strip())
    assert declarations.get("font", "").startswith("italic")                # apart from the tokens' monospace
    assert reading_html.QUERY_AXIS == "query ↓"


@pytest.mark.parametrize("name", PAGES)
def test_a_page_names_every_exercise_whose_code_it_shows(committed, name):
    """The pages leave the marker lines out of the code, so each names, in the form a student
    copy's maker reads (exercises/handout.py), every exercise whose region or twin lies in a
    function it shows: a copy handing one out is made without the page."""
    from exercises.handout import EXERCISE_SHOWN
    markdown, page = committed[name][0], committed[name][1]
    expected = set()
    for path, first, function, _ in blocks(markdown):
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            source = f.read()
        node = definition(ast.parse(source), function)
        for line in source.split("\n")[first - 1:node.end_lineno]:
            region, twin = BEGIN.match(line), BEGIN_TWIN.match(line)
            expected |= {region[2]} if region else set(twin[2].split()) if twin else set()
    assert expected or name != "gpt_step"
    for text in (markdown, page):
        assert set(EXERCISE_SHOWN.findall(text)) == expected
