"""The one training loop (transformer/training/loop.py), driven by a job that records what it is asked."""

import json
import os

import numpy as np
import pytest

import nn
from autograd import kernels
from transformer.training.loop import train_loop


class CountingJob:
    """Loss 1/step; an evaluation's score is the step; done once a step reaches `target`;
    its kernels need `needs` (None: it runs none of ours)."""

    def __init__(self, target=None, needs=None):
        self.target, self.needs, self.calls = target, needs, []

    def kernel_needs(self):
        return self.needs

    def step(self, number):
        self.calls.append(("step", number))
        return 1.0 / number, 0.1 * number

    def evaluate(self, number):
        self.calls.append(("evaluate", number))
        return {"score": float(number)}

    def done(self, metrics):
        return self.target is not None and metrics["score"] >= self.target

    def score(self, metrics):
        return -abs(metrics["score"] - 4)                     # best at step 4

    def progress(self, number, history, since):
        return f"step {number} since {since[0]}"

    def checkpoint(self, history):
        return {"history": json.dumps(history), "marker": np.array(len(history["step"]))}


def test_evaluates_logs_and_checkpoints_on_their_cadences(tmp_path):
    lines = []
    history = train_loop(CountingJob(), max_steps=7, eval_every=2, log_every=3, out_dir=str(tmp_path), save_every=2,
                         keep_last=2, log=lines.append)
    assert history["step"] == list(range(1, 8)) and history["loss"] == [1.0 / n for n in range(1, 8)]
    assert [e["step"] for e in history["evals"]] == [2, 4, 6, 7] and history["evals"][1]["lr"] == 0.4
    assert lines == ["step 2 since 1", "step 3 since 1", "step 4 since 1", "step 6 since 1", "step 7 since 1"]   # evals too
    assert sorted(os.listdir(tmp_path)) == ["best.npz", "checkpoint.npz", "step-6.npz", "step-7.npz"]
    assert int(nn.load(str(tmp_path / "best.npz"))["marker"]) == 4 and not history["interrupted"]


def test_stops_when_the_job_is_done_or_asked_and_goes_on_from_a_history():
    job = CountingJob(target=4)
    history = train_loop(job, max_steps=10, eval_every=2, log=lambda line: None)
    assert history["step"] == [1, 2, 3, 4] and not history["interrupted"]
    cut = train_loop(CountingJob(), max_steps=10, eval_every=5, log=lambda line: None, should_stop=lambda n: n == 3)
    assert cut["step"] == [1, 2, 3] and cut["interrupted"]
    resumed_job = CountingJob()
    lines = []
    resumed = train_loop(resumed_job, max_steps=6, eval_every=5, history=json.loads(json.dumps(cut)), log=lines.append)
    assert resumed["step"] == list(range(1, 7)) and resumed_job.calls[0] == ("step", 4)
    assert lines == ["step 5 since 4", "step 6 since 4"] and not resumed["interrupted"]
    asked_at_last = train_loop(CountingJob(), max_steps=2, eval_every=5, log=lambda line: None,
                               should_stop=lambda n: True)
    assert asked_at_last["step"] == [1] and asked_at_last["interrupted"]


def test_a_new_run_in_a_folder_replaces_an_earlier_runs_checkpoints(tmp_path):
    train_loop(CountingJob(), max_steps=20, eval_every=5, out_dir=str(tmp_path), save_every=5, log=lambda line: None)
    assert sorted(os.listdir(tmp_path)) == ["best.npz", "checkpoint.npz", "step-20.npz"]
    lines = []
    train_loop(CountingJob(), max_steps=3, eval_every=5, out_dir=str(tmp_path), log=lines.append)
    assert lines[0] == f"{tmp_path} held an earlier run's step-20.npz, best.npz: removed (this run writes its own)"
    assert sorted(os.listdir(tmp_path)) == ["best.npz", "checkpoint.npz", "step-3.npz"]     # not the earlier step-20
    assert int(nn.load(str(tmp_path / "best.npz"))["marker"]) == 3


@pytest.mark.parametrize("needs", [(np.dtype(np.float64), True), (np.dtype(np.float32), False)])
def test_each_run_prepares_the_jobs_kernels_once_before_its_first_step(monkeypatch, needs):
    """kernels.prepare is called by the loop, once a run, before any step, with the
    job's dtype and kind of attention; a job that runs no kernels of ours is not prepared."""
    job = CountingJob(needs=needs)
    monkeypatch.setattr(kernels, "prepare", lambda dtype, fused_attention: job.calls.append(("prepare", dtype,
                                                                                              fused_attention)))
    cut = train_loop(job, max_steps=5, eval_every=2, log=lambda line: None, should_stop=lambda n: n == 3)
    assert job.calls[:2] == [("prepare", *needs), ("step", 1)]
    train_loop(job, max_steps=5, eval_every=2, history=cut, log=lambda line: None)     # going on: a second run
    assert [call for call in job.calls if call[0] == "prepare"] == [("prepare", *needs)] * 2
    assert job.calls[job.calls.index(("step", 3)) + 1] == ("prepare", *needs)        # before step 4
    none = CountingJob()
    train_loop(none, max_steps=2, eval_every=2, log=lambda line: None)
    assert [call[0] for call in none.calls] == ["step", "step", "evaluate"]
