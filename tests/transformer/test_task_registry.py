"""Adding a task: register it, train on it with the same loop, decode it in its own symbols."""

import sys

import numpy as np
import pytest

from demos import train as train_cli
from transformer.data import scan, tasks
from transformer.data.registry import TASKS, make_task, register_toy_task
from transformer.training.seq2seq import TrainConfig, evaluate, train


@pytest.fixture
def first_half_task():
    """A task whose answers are shorter than their sources: the first half (rounded up)."""
    register_toy_task("first-half", lambda symbols: symbols[: (len(symbols) + 1) // 2])
    yield "first-half"
    TASKS.pop("first-half")
    tasks.ANSWERS.pop("first-half")


def test_a_registered_task_with_shorter_answers_trains_and_scores(first_half_task, tmp_path):
    cfg = TrainConfig(task=first_half_task, num_symbols=5, max_len=6, batch_size=32, max_steps=150, eval_every=150,
                      eval_size=100, lr=3e-3, out_dir=str(tmp_path))
    batch = make_task(cfg).stream(8, seed=0).__next__()
    for src, out in zip(batch.src, batch.tgt_out):
        n = int((src != tasks.PAD).sum())
        assert tasks.strip(out) == [int(t) for t in src[: (n + 1) // 2]] and out[(n + 1) // 2] == tasks.EOS
    model, metrics = train(cfg, log=lambda line: None, d_model=32, d_ff=64)
    assert metrics["history"]["loss"][-1] < 0.5 * metrics["history"]["loss"][0]
    heldout = make_task(cfg).heldout(50, seed=1)
    assert (heldout.tgt_out[:, 3] == tasks.EOS).all() and (heldout.tgt_out[:, 4:] == tasks.PAD).all()   # 3 symbols
    assert evaluate(model, heldout, 4)["token_accuracy"] > 0.3


def test_demos_train_runs_a_scan_split_and_decodes_a_typed_command(tmp_path, capsys):
    train_cli.main(["--task", "scan-simple", "--steps", "3", "--eval-every", "3", "--beam-examples", "2",
                    "--d-model", "16", "--d-ff", "32", "--layers", "1", "--out", str(tmp_path)])
    printed = capsys.readouterr().out
    assert "sample decodes" in printed and any(w in printed for w in scan.COMMAND_WORDS)
    result = train_cli.main(["--checkpoint", str(tmp_path), "--decode", "jump twice"])
    assert set(result["greedy"].split()) <= set(scan.ACTIONS) | {"<s>"}     # written as actions, not letters
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        train_cli.main(["--checkpoint", str(tmp_path), "--decode", "fly away"])
    assert stop.value.code == 2 and "demos.train: error: --decode: not a SCAN command" in capsys.readouterr().err


def test_unknown_task_names_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown task 'sort'.*'copy'.*'scan-jump'"):
        make_task(TrainConfig(task="sort"))
    assert np.array_equal(tasks.answer("reverse", np.array([3, 4, 5])), [5, 4, 3])


@pytest.fixture
def task_module(tmp_path, monkeypatch):
    """A module of the user's own, outside the project, that registers tasks when imported."""
    (tmp_path / "my_tasks.py").write_text(
        "import numpy as np\nfrom transformer.data.registry import register_toy_task\n"
        "register_toy_task('sort', np.sort)\nregister_toy_task('shift', lambda s: s + 1)\n"
        "register_toy_task('down', lambda s: s - 1)\nregister_toy_task('nothing', lambda s: s[:0])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_tasks"
    sys.modules.pop("my_tasks", None)                  # the next test imports it afresh
    for name in ("sort", "shift", "down", "nothing"):
        TASKS.pop(name, None)
        tasks.ANSWERS.pop(name, None)


def test_a_task_in_a_users_module_is_found_by_module_and_name(task_module, tmp_path, capsys):
    metrics = train_cli.main(["--task", "my_tasks:sort", "--steps", "2", "--eval-every", "2", "--beam-examples", "2",
                              "--d-model", "16", "--d-ff", "32", "--layers", "1", "--out", str(tmp_path / "sort")])
    assert metrics["steps"] == 2
    batch = make_task(TrainConfig(task="my_tasks:sort")).heldout(3, seed=0)
    assert all(tasks.strip(out) == sorted(int(t) for t in src) for src, out in zip(batch.src, batch.tgt_out))
    with pytest.raises(ValueError, match="importing 'my_tasks' registered no task 'zzz'"):
        make_task(TrainConfig(task="my_tasks:zzz"))
    with pytest.raises(ValueError, match="cannot import module 'no_such_module'"):
        make_task(TrainConfig(task="no_such_module:sort"))


@pytest.mark.parametrize("task, says", [("shift", r"holds id 13, outside the task's symbols 3\.\.12"),
                                        ("down", r"holds id 2, outside the task's symbols 3\.\.12 \(ids 0-2 are PAD, BOS"),
                                        ("nothing", "is empty; an answer needs at least one symbol")])
def test_an_answer_outside_the_vocabulary_or_empty_is_refused_naming_the_task(task_module, tmp_path, capsys, task, says):
    with pytest.raises(ValueError, match=f"task '{task}': its answer to the source '[a-j ]+' {says}"):
        make_task(TrainConfig(task=f"my_tasks:{task}")).heldout(2, seed=0)
    with pytest.raises(SystemExit) as stop:
        train_cli.main(["--task", f"my_tasks:{task}", "--out", str(tmp_path / task)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith(f"demos.train: error: --task: task '{task}'")
    assert not (tmp_path / task).exists()


def test_any_registered_score_is_chosen_from_the_command_line(tmp_path, capsys):
    from transformer.scores import SCORES, CosineScore
    train_cli.main(["--task", "copy", "--score", "cosine", "--steps", "2", "--eval-every", "2", "--beam-examples", "2",
                    "--d-model", "16", "--d-ff", "32", "--layers", "1", "--out", str(tmp_path / "cosine")])
    from transformer.training.seq2seq import load_model
    model = load_model(str(tmp_path / "cosine"))
    assert model.config.score == "cosine" and isinstance(model.encoder.layers[0].self_attn.score, CosineScore)
    assert set(SCORES) <= set(train_cli.CHOICES["score"])
    with pytest.raises(SystemExit) as stop:
        train_cli.main(["--score", "additive", "--positional", "rope", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "--score additive needs positions added to the embeddings" in err
    assert not (tmp_path / "x").exists()
