"""A copy holds no twin of an exercise it hands out: code outside the region that computes
its answer (the faster kernel tiers, the fused attention, the PyTorch baselines, a second dot
product) is cut by `make` (exercises/twins.py), and the kernel registry runs the region in
its place in every tier, saying so once; the teacher's project keeps every twin and routes
nothing."""
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from exercises.catalog import EXERCISES, TWIN_KERNELS
from exercises.regions import SKIPPED
from exercises.twins import BEGIN_TWIN, cut_twins, kernels_cut
from tests.exercises.helpers import ROOT, exercises

TEXT = '''def kept():
    return 0


def cut_one(x):
    """doc"""
    # BEGIN TWIN softmax attention
    y = x + 1
    return y
    # END TWIN


class A:
    def f(self, x):
        # BEGIN TWIN heads
        return x
        # END TWIN


def dropped(fast):
    # BEGIN TWIN attention (dropped)
    if fast:
        return 1
    # END TWIN
    return 2
'''


def _run(text, handed_out):
    namespace = {}
    exec(compile(cut_twins(text, handed_out), "<cut>", "exec"), namespace)        # noqa: S102  our own test text
    return namespace


def _raises_twin_of(function, *args):
    with pytest.raises(NotImplementedError) as err:
        function(*args)
    return re.match(r"twin of exercise (\w+), cut from this copy", str(err.value)).group(1)


@pytest.mark.parametrize("handed_out", [set(), {"softmax"}, {"attention"}, {"heads"}, {"attention", "heads"},
                                        {"softmax", "attention", "heads"}, {"value_mul"}])
def test_a_twin_is_cut_exactly_when_one_of_its_exercises_is_handed_out(handed_out):
    cut = cut_twins(TEXT, handed_out)
    assert "# BEGIN TWIN" not in cut and "# END TWIN" not in cut                 # markers go, cut or kept
    ns = _run(TEXT, handed_out)
    assert ns["kept"]() == 0
    if handed_out & {"softmax", "attention"}:
        assert _raises_twin_of(ns["cut_one"], 1) == ("softmax" if "softmax" in handed_out else "attention")
        assert "y = x + 1" not in cut
    else:
        assert ns["cut_one"](1) == 2
    if "heads" in handed_out:
        assert _raises_twin_of(ns["A"]().f, 3) == "heads"
    else:
        assert ns["A"]().f(3) == 3
    assert ns["dropped"](True) == (2 if "attention" in handed_out else 1)    # dropped: the code after it runs
    assert ns["dropped"](False) == 2


def test_a_twin_left_open_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"'# BEGIN TWIN heads' has no '# END TWIN'"):
        cut_twins("x = 1\n# BEGIN TWIN heads\ny = 2\n", {"heads"})


def _teacher_twins():
    """{exercise: [file]} of the twin markers in the teacher's Python files."""
    found = {}
    for folder, subfolders, files in os.walk(ROOT):
        subfolders[:] = [s for s in subfolders if s not in SKIPPED and s != "tests"]
        for name in (n for n in files if n.endswith(".py")):
            path = os.path.join(folder, name)
            with open(path, encoding="utf-8") as f:
                for line in f:
                    if (match := BEGIN_TWIN.match(line)):
                        for exercise in match.group(2).split():
                            found.setdefault(exercise, []).append(os.path.relpath(path, ROOT))
    return found


def test_every_twin_names_an_exercise_and_every_twin_kernel_has_its_code_marked():
    found = _teacher_twins()
    assert set(found) <= set(EXERCISES)
    assert set(TWIN_KERNELS) <= set(found)
    for exercise in ("softmax", "softmax_backward", "log_softmax"):
        assert {"autograd/kernels/loops.py", "autograd/engine_room/rowwise.py",
                "autograd/engine_room/attention.py"} <= set(found[exercise]), exercise
    assert "autograd/engine_room/normalization.py" in found["layer_norm_backward"]
    assert "autograd/engine_room/optimizer.py" in found["adam_step"]
    assert {"autograd/kernels/reference.py", "transformer/attention.py", "demos/bench/attention.py",
            "autograd/engine_room/attention.py"} <= set(found["attention"])
    assert found["heads"] == ["demos/bench/torch_gpt.py"]
    assert kernels_cut(["heads", "softmax", "adam_step"]) == {
        "softmax": ["softmax"], "attention_forward": ["softmax"], "attention_backward": ["softmax"],
        "adam_step": ["adam_step"]}


def test_the_teacher_s_registry_routes_nothing_and_a_copy_s_routes_its_cut_kernels_to_numpy(monkeypatch, capsys):
    from autograd import kernels
    from autograd.kernels import loops, reference
    assert kernels.kernels_cut() == {}                   # no twins_cut.py here: every tier whole
    before = kernels.tier()
    try:
        kernels.use_tier("loops")
        assert kernels.softmax is loops.softmax and kernels.adam_step is reference.adam_step   # loops writes no Adam
        monkeypatch.setattr(kernels, "kernels_cut", lambda: {"softmax": ["softmax"], "log_softmax": ["log_softmax"]})
        monkeypatch.setattr(kernels, "_said_cut", False)
        capsys.readouterr()
        for _ in range(2):
            kernels.use_tier("loops")
            assert kernels.softmax is reference.softmax and kernels.log_softmax is reference.log_softmax
            assert kernels.softmax_backward is loops.softmax_backward            # not cut: the tier's own
        said = capsys.readouterr().err.splitlines()
        assert said == ["autograd: in this student copy softmax, log_softmax run their numpy definitions "
                        "(reference.py), the exercises' own code, in every tier: their faster twins are cut from it"]
    finally:
        kernels.use_tier(before)


def _in_copy(copy, script, **env):
    run = subprocess.run([sys.executable, "-c", script], cwd=copy, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(copy), **env})
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1]), run.stderr


CALLS = '''
import json, re
import numpy as np
from autograd import kernels
from autograd.kernels import loops
from autograd.engine_room import attention, normalization, optimizer, rowwise
r = np.random.default_rng(0)
x, dy = r.standard_normal((3, 5)), r.standard_normal((3, 5))
q = r.standard_normal((2, 3, 4))
p, ones = np.zeros(4), np.ones(9)


def adam(step):
    return lambda: step(p, p, p.copy(), p.copy(), 1e-3, 0.9, 0.999, 1e-8, 0.0, False, 1)


CALLS = {
    "kernels.softmax": lambda: kernels.softmax(x), "kernels.softmax_backward": lambda: kernels.softmax_backward(x, dy),
    "kernels.log_softmax": lambda: kernels.log_softmax(x),
    "kernels.layer_norm_backward": lambda: kernels.layer_norm_backward(dy, x, x[:, :1], x[0]),
    "kernels.adam_step": adam(kernels.adam_step),
    "kernels.attention_forward": lambda: kernels.attention_forward(q, q, q, None, 0.5),
    "loops.softmax": lambda: loops.softmax(x), "loops.softmax_loops": lambda: loops.softmax_loops(x, x.copy()),
    "loops.softmax_backward": lambda: loops.softmax_backward(x, dy), "loops.log_softmax": lambda: loops.log_softmax(x),
    "engine room softmax": lambda: rowwise.softmax(x), "engine room softmax_backward": lambda: rowwise.softmax_backward(x, dy),
    "engine room log_softmax": lambda: rowwise.log_softmax(x),
    "engine room layer_norm_backward": lambda: normalization.layer_norm_backward(dy, x, x[:, :1], x[0]),
    "engine room adam_step": adam(optimizer.adam_step),
    "engine room _adam_step": lambda: optimizer._adam_step(p, p, p.copy(), p.copy(), ones),
    "engine room attention_forward": lambda: attention.attention_forward(q, q, q, None, 0.5),
    "engine room attention_backward": lambda: attention.attention_backward(q, q, q, None, 0.5, q, q[..., 0], q),
}
raised = {}
for name, call in CALLS.items():
    try:
        call()
        raised[name] = "nothing"
    except NotImplementedError as err:
        raised[name] = re.match(r"(exercise \\w+|twin of exercise \\w+)", str(err)).group(1)
print(json.dumps(raised))
'''


@pytest.mark.parametrize("tier", ["numpy", "loops", "fast"])
def test_in_a_copy_no_faster_tier_answers_an_exercise_by_a_call(fresh, tier):
    """The five exercises a plain call answered (softmax, its backward, log-softmax,
    LayerNorm's backward, Adam's step), and the fused attention: through the registry in any
    tier it is the region that runs (raising, not done yet); the tiers' own functions raise
    naming the exercise they would answer. With the JIT off, nothing is compiled."""
    raised, said = _in_copy(fresh, CALLS, AUTOGRAD_KERNELS=tier, NUMBA_DISABLE_JIT="1")
    kernel = {"softmax": "softmax", "softmax_backward": "softmax_backward", "log_softmax": "log_softmax",
              "layer_norm_backward": "layer_norm_backward", "adam_step": "adam_step"}
    assert raised == {**{f"kernels.{k}": f"exercise {e}" for k, e in kernel.items()},
                      "kernels.attention_forward": "twin of exercise attention",      # reference's _masked_scores
                      "loops.softmax": "twin of exercise softmax", "loops.softmax_loops": "twin of exercise softmax",
                      "loops.softmax_backward": "twin of exercise softmax_backward",
                      "loops.log_softmax": "twin of exercise log_softmax",
                      **{f"engine room {k}": f"twin of exercise {e}" for k, e in kernel.items()},
                      "engine room _adam_step": "twin of exercise adam_step",
                      "engine room attention_forward": "twin of exercise softmax",
                      "engine room attention_backward": "twin of exercise softmax"}
    notices = [line for line in said.splitlines() if "in this student copy" in line]
    assert notices == ([] if tier == "numpy" else [
        "autograd: in this student copy softmax, attention_forward, attention_backward, softmax_backward, log_softmax, "
        "layer_norm_backward, adam_step run their numpy definitions (reference.py), the exercises' own code, in every "
        "tier: their faster twins are cut from it"])


LEAKS = {   # distinctive lines of code that answered an exercise handed out: {line: where it was}
    "y[i, j] /= total": "autograd/kernels/loops.py",                                       # softmax
    "dx[i, j] = y[i, j] * (dy[i, j] - dot)": "autograd/kernels/loops.py",                  # softmax_backward
    "(x[i, j] - m) - np.log(total)": "autograd/kernels/loops.py",                          # log_softmax
    "inv = ONE / total if total != ZERO else ZERO": "autograd/engine_room/rowwise.py",
    "out[j] -= log_sum": "autograd/engine_room/rowwise.py",
    "dx[i, j] = rstd[i, 0] * (grad[i, j] * weight[j] - mean_g - xhat[i, j] * mean_gx)":
        "autograd/engine_room/normalization.py",                                           # layer_norm_backward
    "m[i] = beta1 * m[i] + (one - beta1) * gi": "autograd/engine_room/optimizer.py",       # adam_step
    "grads[r] = scale * w * (grads[r] - d[r])": "autograd/engine_room/attention.py",
    "lse[n, i0 + r] = m[r] + np.log(l[r])": "autograd/engine_room/attention.py",
    "np.where(mask, scores, -np.inf)": "autograd/kernels/reference.py",                   # attention
    "return ops.ScaledDotProductAttention.apply(": "transformer/attention.py",
    "scores.masked_fill(~allowed, float(\"-inf\"))": "demos/bench/attention.py",
    "t.view(batch, length, self.n_head, width // self.n_head).transpose(1, 2)": "demos/bench/torch_gpt.py",  # heads
}
GONE = {   # what no longer stands in the teacher's project either: {text: where it stood}
    "return q @ k.transpose(-2, -1)": "transformer/scores.py",                             # DotProductScore
    "tril": "exercises/catalog.py",                                                        # causal_mask
    "weight[ids]": "autograd/ops/shape.py",                                                # embedding
    "order, seen = [], {root_node}": "autograd/engine.py",                                 # topological_sort
}


def _files_holding(root, text):
    found = []
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = [s for s in subfolders if s not in SKIPPED]
        for name in files:
            path = os.path.join(folder, name)
            with open(path, "rb") as f:
                if text.encode() in f.read():
                    found.append(os.path.relpath(path, root))
    return found


def test_a_fresh_copy_holds_none_of_the_few_lines_that_answered_an_exercise(fresh):
    """Each line stands in the teacher's project where it is said to (so that its absence
    from the copy means something), and nowhere in the copy: not in its source, tests,
    demos, notebooks or docs."""
    for line, where in LEAKS.items():
        with open(os.path.join(ROOT, where), encoding="utf-8") as f:
            assert line in f.read(), (line, where)
    assert {line: _files_holding(fresh, line) for line in LEAKS} == {line: [] for line in LEAKS}
    for text, where in GONE.items():
        with open(os.path.join(ROOT, where), encoding="utf-8") as f:
            assert text not in f.read(), (text, where)
    assert _files_holding(fresh, "weight[ids]") == []          # once in the embedding's feedback, now in words


def test_the_teacher_s_kernels_are_whole_and_a_copy_handing_nothing_out_cuts_nothing():
    """The twins of an exercise not handed out stay: what they compute is as it was."""
    from autograd.kernels import loops, reference
    x = np.random.default_rng(1).standard_normal((4, 9))
    np.testing.assert_allclose(loops.softmax(x), reference.softmax(x), rtol=1e-12)
    text = "def f():\n    # BEGIN TWIN softmax\n    return 1\n    # END TWIN\n"
    assert cut_twins(text, set(EXERCISES) - {"softmax"}) == "def f():\n    return 1\n"


def test_make_only_heads_cuts_the_pytorch_gpt_and_no_kernel(tmp_path):
    copy = tmp_path / "heads"
    status, out = exercises("make", str(copy), "--only", "heads")
    assert status == 0, out
    assert not (copy / "autograd" / "kernels" / "twins_cut.py").exists()
    assert "def softmax_loops" in (copy / "autograd" / "kernels" / "loops.py").read_text()
    assert "y[i, j] /= total" in (copy / "autograd" / "kernels" / "loops.py").read_text()      # softmax is solved
    assert "t.view(batch, length" not in (copy / "demos" / "bench" / "torch_gpt.py").read_text()
    run = subprocess.run([sys.executable, "-m", "demos.bench.train", "--model", "gpt", "--steps", "3"], cwd=copy,
                         capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(copy)})
    assert run.returncode == 1 and run.stdout == "" and run.stderr == (
        "bench_train --model gpt compares with a PyTorch GPT (demos/bench/torch_gpt.py), which needs the teacher's "
        "project: this student copy cuts it, as it answers exercises heads\n")


@pytest.mark.parametrize("bench", [["demos.bench.attention"], ["demos.bench.kernels"], ["demos.bench.train"],
                                   ["demos.bench.train", "--model", "gpt"]])
def test_in_a_copy_the_benchmarks_of_the_engine_room_stop_in_one_line(fresh, bench):
    run = subprocess.run([sys.executable, "-m", *bench], cwd=fresh, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(fresh)})
    assert run.returncode == 1 and run.stdout == "", run.stderr[-2000:]
    assert run.stderr == (f"{bench[0]} measures the whole engine room, which needs the teacher's project: this "
                          "student copy cuts its kernels that answer exercises adam_step, layer_norm_backward, "
                          "log_softmax, softmax, softmax_backward\n")
