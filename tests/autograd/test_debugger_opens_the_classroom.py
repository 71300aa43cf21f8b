"""A debugger opens the classroom: with nothing set, a program run under a debugger gets the
loops tier run as Python and composed attention (autograd/kernels/__init__.py), said in one
line each; AUTOGRAD_KERNELS=fast keeps the engine room.  Driven as a learner drives it: pdb
(demos.debug) fed `s` presses on stdin, as tests/autograd/test_stepping_into_kernels.py does.
"""

import os
import subprocess
import sys

import numpy as np
import pytest

from autograd import kernels, manual_seed
from autograd.kernels import loops
from tests.autograd.test_stepping_into_kernels import LOCATION
from tests.helpers import ENGINE_ROOM, ENGINE_ROOM_ABSENT
from transformer.attention import MultiHeadAttention

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MOST_PRESSES = 10
LOOPS = os.path.join("autograd", "kernels", "loops.py")
ENGINE_ROOM_DIR = os.path.join("autograd", "engine_room") + os.sep
TRAIN = ["demos.train", "--task", "reverse", "--steps", "2"]
KERNELS_LINE = "autograd: a debugger is tracing, so the kernels are the loops tier, run as Python where you step"
ATTENTION_LINE = "transformer: a debugger is tracing, so fused attention runs as the composed ops"


def environment(**settings):
    """This process's environment without the kernel switches, plus `settings`."""
    env = {k: v for k, v in os.environ.items() if k not in ("AUTOGRAD_KERNELS", "NUMBA_DISABLE_JIT")}
    return dict(env, **settings)


def debug(breakpoint, program, presses, tmp_path, **settings):
    """(places [(file, function)] pdb stood at, stderr) after `presses` `s` from `breakpoint`."""
    command = [sys.executable, "-m", "demos.debug", "-b", breakpoint, *program, "--out", str(tmp_path / "run")]
    result = subprocess.run(command, input="s\n" * presses + "q\n", capture_output=True, text=True, cwd=ROOT,
                            env=environment(**settings), timeout=600)
    places = [(os.path.relpath(path, ROOT), function) for path, _, function in LOCATION.findall(result.stdout)]
    assert places, f"pdb never stopped:\n{result.stdout}\n{result.stderr}"
    return places, result.stderr


def test_s_from_softmax_forward_reaches_the_loops_and_never_the_engine_room(tmp_path):
    places, stderr = debug("autograd/ops/softmax.py:Softmax.forward", TRAIN, 14, tmp_path)
    assert places[0] == (os.path.join("autograd", "ops", "softmax.py"), "forward")
    assert (LOOPS, "softmax_loops") in places[:MOST_PRESSES + 1], places
    assert not any(path.startswith(ENGINE_ROOM_DIR) for path, _ in places), places
    assert stderr.count(KERNELS_LINE) == 1, stderr


def test_the_gpts_fused_attention_runs_composed_under_a_debugger(tmp_path):
    """The GPT's default attention is fused; under a debugger masked_fill runs, said once."""
    gpt = ["demos.gpt", "--data", "README.md", "--max-iters", "1", "--block-size", "8", "--batch-size", "2",
           "--layers", "2", "--d-model", "16", "--heads", "2", "--eval-iters", "1"]
    places, stderr = debug("autograd/ops/masking.py:MaskedFill.forward", gpt, 1, tmp_path)
    assert places[0][1] == "forward", places
    assert stderr.count(ATTENTION_LINE) == 1 and stderr.count(KERNELS_LINE) == 1, stderr


@pytest.mark.skipif(not ENGINE_ROOM, reason=ENGINE_ROOM_ABSENT)
def test_autograd_kernels_fast_keeps_the_engine_room(tmp_path):
    places, stderr = debug("autograd/ops/softmax.py:Softmax.forward", TRAIN, 3, tmp_path, AUTOGRAD_KERNELS="fast")
    assert any(path.startswith(ENGINE_ROOM_DIR) for path, _ in places), places
    assert KERNELS_LINE not in stderr and ATTENTION_LINE not in stderr, stderr


CHOICE = ("import sys; sys.settrace(lambda *event: None) if sys.argv[1] == 'traced' else None\n"
          "from autograd import kernels; print(kernels.tier(), kernels.stepping())")


@pytest.mark.parametrize("traced,settings,choice", [
    ("traced", {}, "loops True"),
    ("traced", {"AUTOGRAD_KERNELS": "fast"}, "fast False"),
    ("traced", {"AUTOGRAD_KERNELS": "numpy"}, "numpy False"),
    ("traced", {"NUMBA_DISABLE_JIT": "1"}, "loops True"),
    ("untraced", {"NUMBA_DISABLE_JIT": "1"}, "loops False"),
])
def test_a_tracer_at_import_chooses_the_loops_as_python(traced, settings, choice):
    result = subprocess.run([sys.executable, "-c", CHOICE, traced], capture_output=True, text=True, cwd=ROOT,
                            env=environment(**settings), timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == choice
    assert result.stderr.count(KERNELS_LINE) == (choice == "loops True"), result.stderr


def test_what_counts_as_a_debugger():
    class CoverageTracer:          # coverage.py's C tracer is an object of its module coverage.tracer
        def __call__(self, *event):
            return None
    CoverageTracer.__module__ = "coverage.tracer"
    previous = sys.gettrace()
    try:
        sys.settrace(None)
        assert not kernels.debugger_tracing()
        sys.settrace(lambda *event: None)
        assert kernels.debugger_tracing()
        sys.settrace(CoverageTracer())
        assert not kernels.debugger_tracing()
    finally:
        sys.settrace(previous)


def test_a_debugger_on_sys_monitoring_counts(monkeypatch):
    """Python 3.12+: a debugger may hold sys.monitoring's DEBUGGER_ID instead of tracing."""
    class Monitoring:                  # sys.monitoring's two names used, with a tool or without
        DEBUGGER_ID, COVERAGE_ID = 0, 1
        tools = {}

        @classmethod
        def get_tool(cls, tool_id):
            return cls.tools.get(tool_id)
    monkeypatch.setattr(sys, "monitoring", Monitoring, raising=False)
    previous = sys.gettrace()
    sys.settrace(None)
    try:
        assert not kernels.debugger_tracing()
        Monitoring.tools = {Monitoring.COVERAGE_ID: "coverage"}
        assert not kernels.debugger_tracing()
        Monitoring.tools = {Monitoring.DEBUGGER_ID: "debugpy"}
        assert kernels.debugger_tracing()
    finally:
        sys.settrace(previous)


def test_stepping_needs_the_loops_tier():
    with pytest.raises(ValueError, match="stepping=True needs the loops tier"):
        kernels.use_tier("fast", stepping=True)
    assert kernels.tier() in kernels.TIERS


def tiny_gpt_losses(seed, layers, d_model, steps=3):
    """(the losses of `steps` AdamW steps of a small seeded GPT with fused attention asked for,
    whether its attention ran composed: the composed ops keep the weights)."""
    from transformer.families.decoder_only import DecoderOnly, gpt_config
    from transformer.training.lm import LMTrainConfig, step_functions
    cfg = LMTrainConfig(block_size=6, batch_size=2)
    manual_seed(seed)
    vocab = 13
    model = DecoderOnly(gpt_config(vocab, cfg.block_size, layers, 2, d_model, attention="fused"))
    step = step_functions(model, cfg)[0]
    rng = np.random.default_rng(seed)
    batches = [(rng.integers(0, vocab, (cfg.batch_size, cfg.block_size)) for _ in range(2)) for _ in range(steps)]
    losses = [float(step(*batch, cfg.lr)) for batch in batches]
    attentions = [module for module in model.modules() if isinstance(module, MultiHeadAttention)]
    return losses, all(attention._weights is not None for attention in attentions)


def tracing_the_loops(entered):
    """A tracer as a debugger stepping in loops.py sets it: it traces the lines of loops.py's
    frames only, and adds to `entered` the name of each function of loops.py a line of which
    runs as Python (Numba shows a profiler or tracer a call of a compiled loop, never a line)."""
    def trace(frame, event, arg):
        if os.path.relpath(frame.f_code.co_filename, ROOT) != LOOPS:
            return None
        if event == "line":
            entered.add(frame.f_code.co_name)
        return trace
    return trace


@pytest.mark.parametrize("seed,layers,d_model", [(0, 1, 8), (3, 2, 12)])
def test_same_losses_with_the_classroom_opened(seed, layers, d_model):
    """Chosen under a tracer, the loops run as Python where it traces (their frames appear);
    the losses are the default tier's within the tiers' tolerance."""
    previous, entered = (kernels.tier(), kernels.stepping()), set()
    try:
        sys.settrace(tracing_the_loops(entered))
        try:
            kernels.use_tier("loops", stepping=True)
            stepped, composed = tiny_gpt_losses(seed, layers, d_model)
        finally:
            sys.settrace(None)
        kernels.use_tier("fast" if ENGINE_ROOM else "loops")
        default, default_composed = tiny_gpt_losses(seed, layers, d_model)
    finally:
        kernels.use_tier(*previous)
    assert {"matmul_loops", "softmax_loops", "softmax_backward_loops", "log_softmax_loops",
            "log_softmax_backward_loops"} <= entered, entered
    assert composed and not default_composed
    np.testing.assert_allclose(stepped, default, rtol=1e-4)
    assert len(set(stepped)) == len(stepped)          # the steps trained: each loss differs


class Watched:
    """A compiled loop that records how it runs: "python" when its py_func is taken, else "compiled"."""

    def __init__(self, compiled):
        self.compiled, self.ran = compiled, []

    def __call__(self, *arrays):
        self.ran.append("compiled")
        return self.compiled(*arrays)

    @property
    def py_func(self):
        self.ran.append("python")
        return self.compiled.py_func


@pytest.mark.skipif(not hasattr(loops.matmul_loops, "py_func"), reason="with the JIT off the loops are Python anyway")
@pytest.mark.parametrize("tracer", ["traces nothing", "gone", "none at the choice"])
def test_where_the_loops_run_as_python(tracer, monkeypatch):
    """Chosen under a tracer, a loop runs compiled where the tracer does not trace its caller
    (pdb between breakpoints elsewhere) and once the tracer is gone (all breakpoints cleared);
    chosen with no tracer (a debugger on sys.monitoring), everywhere as Python."""
    previous = kernels.tier(), kernels.stepping()
    x = np.random.default_rng(0).standard_normal((3, 5))
    watched = Watched(loops.softmax_loops)
    monkeypatch.setattr(loops, "softmax_loops", watched)
    try:
        sys.settrace(None if tracer == "none at the choice" else lambda frame, event, arg: None)
        try:
            kernels.use_tier("loops", stepping=True)
            if tracer == "gone":
                sys.settrace(None)
            y = kernels.softmax(x)
        finally:
            sys.settrace(None)
    finally:
        kernels.use_tier(*previous)
    assert watched.ran == ["python" if tracer == "none at the choice" else "compiled"]
    np.testing.assert_allclose(y, np.exp(x) / np.exp(x).sum(-1, keepdims=True), rtol=1e-12)


def test_run_as_python_refuses_an_unknown_place():
    with pytest.raises(ValueError, match="where must be None, 'traced' or 'always', got 'often'"):
        loops.run_as_python("often")
