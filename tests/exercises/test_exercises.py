"""The exercises: listed in the lectures' order, every solution passes its check, the
student copy fails each check with the NotImplementedError naming it, and classic wrong
answers are recognised with a specific message."""
import os
import re
import subprocess
import sys

import pytest

from exercises.catalog import EXERCISES
from exercises.regions import BEGIN, END, find_regions, isolate, solutions_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def exercises(*args):
    run = subprocess.run([sys.executable, "-m", "exercises", *args], cwd=ROOT, capture_output=True, text=True)
    return run.returncode, run.stdout + run.stderr


def test_at_least_15_exercises_each_marked_in_the_source_and_listed_in_order():
    regions = find_regions(ROOT)
    assert len(EXERCISES) >= 15 and set(regions) == set(EXERCISES)
    status, out = exercises("list")
    names = [line.split()[0] for line in out.splitlines()]
    assert status == 0 and names == list(EXERCISES)
    assert "autograd/kernels/reference.py" in out.splitlines()[names.index("softmax_backward")]


def test_every_solution_passes_its_check():
    status, out = exercises("check", "all")
    assert status == 0, out
    assert [line.split(":")[0] for line in out.splitlines()] == [f"exercise {name}" for name in EXERCISES]
    assert all(": passed (" in line for line in out.splitlines())


def test_the_student_copy_fails_every_check_naming_the_exercise(tmp_path):
    student = tmp_path / "student"
    status, out = exercises("make", str(student))
    assert status == 0 and f"{len(EXERCISES)} exercises cut out" in out
    assert (student / "README.md").exists() and not (student / ".git").exists()
    assert "raise NotImplementedError(\"exercise softmax_backward: " in (student / "autograd/kernels/reference.py").read_text()
    status, out = exercises("check", "all", "--project", str(student))
    assert status == 1
    lines = out.splitlines()
    assert len(lines) == len(EXERCISES)
    for name, line in zip(EXERCISES, lines):
        assert line.startswith(f"exercise {name}: NotImplementedError: exercise {name}: "), line
    status, out = exercises("make", str(student))
    assert status == 2 and "exists and is not empty" in out
    status, out = exercises("make", str(student / "README.md"))
    assert status == 2 and "is a file; expected a new or empty folder" in out
    reference = student / "autograd" / "kernels" / "reference.py"      # one exercise solved, in the student's copy
    solved = with_wrong_answer(reference.read_text(), "softmax_backward", 0,
                               "    return y * (dy - np.sum(dy * y, axis=-1, keepdims=True))\n")
    reference.write_text(solved)
    run = subprocess.run([sys.executable, "-m", "exercises", "check", "softmax_backward", "value_mul", "kv_cache"],
                         cwd=student, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(student)})
    lines = run.stdout.splitlines()
    assert lines[0].startswith("exercise softmax_backward: passed"), run.stdout + run.stderr
    assert lines[1].startswith("exercise value_mul: NotImplementedError: exercise value_mul: "), lines[1]
    assert lines[2].startswith("exercise kv_cache: NotImplementedError: exercise kv_cache: "), lines[2]


def test_check_refuses_an_unknown_exercise_or_project(tmp_path):
    assert exercises("check", "softmax_forward")[1].strip().endswith("python -m exercises list shows them")
    status, out = exercises("check", "softmax", "--project", str(tmp_path))
    assert status == 2 and "is not a copy of this project" in out


# (exercise, file, which of its regions in that file, the wrong answer, the message expected)
WRONG_ANSWERS = [
    ("softmax_backward", "autograd/kernels/reference.py", 0, "    return y * dy\n", "the subtraction is missing"),
    ("attention", "transformer/scores.py", 0, "    return q @ k.transpose(-2, -1)\n", "not divided by sqrt(d_k)"),
    ("causal_mask", "transformer/masks.py", 0, "    return np.tril(np.ones((length, length), dtype=bool), -1)\n",
     "off by one: a query may see itself"),
    ("adam_step", "autograd/kernels/reference.py", 0,
     "    m *= beta1\n    m += (1 - beta1) * g\n    v *= beta2\n    v += (1 - beta2) * g * g\n"
     "    p -= lr * m / (np.sqrt(v) + eps)\n", "the bias correction is missing"),
    ("layer_norm_backward", "autograd/kernels/reference.py", 0,
     "    dx = rstd * grad * weight\n    return dx, (grad * xhat).sum(axis=0), grad.sum(axis=0)\n",
     "the mean terms are missing"),
    ("log_softmax", "autograd/kernels/reference.py", 0,
     "    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))\n", "without the max shift exp overflows"),
    ("heads", "transformer/attention.py", 1,
     "        batch, _, length, _ = x.shape\n        return x.reshape(batch, length, self.d_model)\n",
     "heads merged in the wrong order"),
    ("sinusoidal", "transformer/positional.py", 0,
     "    pos = np.arange(max_len)[:, None]\n    freq = 1.0 / 10000 ** (np.arange(0, d_model, 2) / d_model)\n"
     "    table = np.zeros((max_len, d_model))\n    table[:, 0::2] = np.cos(pos * freq)\n"
     "    table[:, 1::2] = np.sin(pos * freq[: d_model // 2])\n", "sin and cos are swapped"),
    ("beam_search", "transformer/decoding.py", 0, lambda body: body.replace(" / length_penalty(step, alpha)", ""),
     "without length normalisation"),
    ("kv_cache", "transformer/attention.py", 0, lambda body: body.replace('past = kv_cache["k"].shape[2]', "pass"),
     "the position offset is lost"),
    ("value_mul", "autograd/scalar.py", 0,
     "            self.grad = other.data * out.grad\n            other.grad = self.data * out.grad\n", "use += (not =)"),
    ("unbroadcast", "autograd/engine.py", 0,
     "    grad = grad.sum(axis=tuple(range(grad.ndim - len(shape))))\n"
     "    stretched = tuple(i for i, n in enumerate(shape) if n == 1 and grad.shape[i] != 1)\n"
     "    grad = grad.sum(axis=stretched)\n", "keep the stretched dims"),
    ("softmax", "autograd/kernels/reference.py", 0,
     "    e = np.exp(x)\n    return e / e.sum(axis=-1, keepdims=True)\n", "subtract each row's max before exp"),
]


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    folder = tmp_path_factory.mktemp("solved")
    isolate(ROOT, solutions_of(ROOT), None, str(folder))
    return folder


def with_wrong_answer(text, name, which, answer):
    """text with the body of its which-th region named `name` replaced by the wrong answer."""
    lines, out, seen, inside = text.splitlines(keepends=True), [], 0, None
    for line in lines:
        match = BEGIN.match(line)
        if match and match.group(2) == name:
            inside, body = seen == which, []
            seen += 1
            out.append(line)
        elif inside is not None and END.match(line):
            if inside:
                out.append(answer("".join(body)) if callable(answer) else answer)
            else:
                out += body
            out.append(line)
            inside = None
        elif inside is not None:
            body.append(line)
        else:
            out.append(line)
    return "".join(out)


@pytest.mark.parametrize("name, path, which, answer, says", WRONG_ANSWERS, ids=[w[0] for w in WRONG_ANSWERS])
def test_a_classic_wrong_answer_is_recognised(solved, name, path, which, answer, says):
    target = solved / path
    original = target.read_text()
    wrong = with_wrong_answer(original, name, which, answer)
    assert wrong != original
    target.write_text(wrong)
    try:
        status, out = exercises("check", name, "--project", str(solved))
    finally:
        target.write_text(original)
    assert status == 1 and out.startswith(f"exercise {name}: not yet: ") and says in out, out
    assert re.search(r"Traceback", out) is None
