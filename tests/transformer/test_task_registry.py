"""Adding a task: register it, train on it with the same loop, decode it in its own symbols."""

import numpy as np
import pytest

from demos import train as train_cli
from transformer import scan, tasks
from transformer.task_registry import TASKS, make_task, register_toy_task
from transformer.training import TrainConfig, evaluate, train


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
    with pytest.raises(SystemExit, match="not a SCAN command"):
        train_cli.main(["--checkpoint", str(tmp_path), "--decode", "fly away"])


def test_unknown_task_names_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown task 'sort'.*'copy'.*'scan-jump'"):
        make_task(TrainConfig(task="sort"))
    assert np.array_equal(tasks.answer("reverse", np.array([3, 4, 5])), [5, 4, 3])
