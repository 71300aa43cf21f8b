"""Training an encoder-decoder on a toy task: its job for the training loop (transformer/training/loop.py),
evaluation by greedy decoding, and its checkpoints."""

import dataclasses
import json
import os

import numpy as np

from autograd import default_generator, manual_seed, no_grad
from nn import functional as F
from nn.recipe import make_optimizer, optimize
from transformer.config import require, require_positive
from transformer.data import tasks
from transformer.data.registry import make_task
from transformer.decoding import greedy_decode
from transformer.encoder_decoder import Transformer, TransformerConfig
from transformer.training.checkpoints import generator_state, load_checkpoint, model_from, restore_generator, run_state
from transformer.training.loop import train_loop


@dataclasses.dataclass
class TrainConfig:
    task: str = "reverse"
    num_symbols: int = 10
    min_len: int = 1
    max_len: int = 10
    batch_size: int = 64
    max_steps: int = 4000            # stop here if the target accuracy is not reached first
    lr: float = 3e-3                 # peak learning rate, reached after `warmup` steps
    warmup: int = 200
    decay_steps: int = 1000          # cosine decay to lr/10 by this step, then constant
    label_smoothing: float = 0.0
    clip_norm: float = 1.0
    eval_every: int = 100
    eval_size: int = 1000
    target_accuracy: float = 0.99
    seed: int = 0
    out_dir: str = "runs/train"
    schedule: str = "cosine"         # or "noam"
    save_every: int = 0              # also checkpoint every this many steps (0: only at the end)
    keep_last: int = 1               # keep step-N.npz of the last this many checkpoints

    def __post_init__(self):
        require_positive("TrainConfig", num_symbols=self.num_symbols, min_len=self.min_len, max_len=self.max_len,
                         batch_size=self.batch_size, max_steps=self.max_steps, eval_every=self.eval_every,
                         eval_size=self.eval_size, keep_last=self.keep_last, decay_steps=self.decay_steps)
        require("TrainConfig", "lr", self.lr, self.lr > 0, "> 0")
        require("TrainConfig", "seed", self.seed, self.seed >= 0, ">= 0")
        require("TrainConfig", "warmup", self.warmup, self.warmup >= (1 if self.schedule == "noam" else 0),
                ">= 1 with the noam schedule" if self.schedule == "noam" else ">= 0")
        require("TrainConfig", "label_smoothing", self.label_smoothing, 0 <= self.label_smoothing < 1, "in [0, 1)")
        require("TrainConfig", "clip_norm", self.clip_norm, self.clip_norm > 0, "> 0")
        require("TrainConfig", "target_accuracy", self.target_accuracy, self.target_accuracy > 0, "> 0")   # > 1: never
        if self.schedule not in ("cosine", "noam"):
            raise ValueError(f"TrainConfig: schedule must be 'cosine' or 'noam', got {self.schedule!r}")
        if self.save_every < 0:
            raise ValueError(f"TrainConfig: save_every must be >= 0, got {self.save_every}")
        if self.min_len > self.max_len:
            raise ValueError(f"TrainConfig: min_len {self.min_len} is greater than max_len {self.max_len}")


def evaluate(model, heldout, max_len, chunk=1000):
    """Greedy exact-sequence accuracy and token accuracy on a held-out Batch (decoded
    `chunk` rows at a time, so a large test set needs little memory)."""
    model.eval()
    decoded = [row for start in range(0, len(heldout.src), chunk)
               for row in greedy_decode(model, heldout.src[start:start + chunk], max_len, tasks.BOS, tasks.EOS,
                                        tasks.PAD)]
    model.train()
    exact, correct_tokens, total_tokens = 0, 0, 0
    for row, want in zip(decoded, heldout.tgt_out):
        got, expected = tasks.strip(row), tasks.strip(want)
        exact += got == expected
        correct_tokens += sum(a == b for a, b in zip(got, expected))
        total_tokens += len(expected)
    return {"exact_match": exact / len(decoded), "token_accuracy": correct_tokens / max(total_tokens, 1)}


def build_model(train_cfg, data=None, **model_overrides):
    """A Transformer sized for the data (by default the config's toy task): its
    vocabularies, and positions for BOS + the longest answer + EOS (model_overrides may
    change any TransformerConfig field)."""
    data = data or make_task(train_cfg)
    config = dict(src_vocab=data.src_vocab, tgt_vocab=data.tgt_vocab, max_len=data.max_output_len + 2,
                  pad_id=tasks.PAD)
    config.update(model_overrides)
    return Transformer(TransformerConfig(**config))


class ToyTaskJob:
    """An encoder-decoder (Transformer or RNN) on a toy task, for the training loop
    (transformer/training/loop.py): a step is a batch from the task's stream, cross-entropy over the
    target tokens and an optimizer step; an evaluation is greedy decoding of held-out
    sequences; the run stops when their exact match reaches cfg.target_accuracy."""

    def __init__(self, model, data, cfg):
        self.model, self.data, self.cfg = model, data, cfg
        self.optimizer, self.schedule = make_optimizer(model.parameters(), cfg.lr, cfg.warmup, cfg.decay_steps,
                                                       cfg.schedule, getattr(model.config, "d_model", None))
        self.stream = data.stream(cfg.batch_size, seed=cfg.seed)
        self.heldout = data.heldout(cfg.eval_size, seed=cfg.seed + 10_000)

    def kernel_needs(self):
        """The model's dtype and whether its attention is fused (an RNN's config names none)."""
        return self.model.parameters()[0].dtype, getattr(self.model.config, "attention", "composed") == "fused"

    def step(self, number):
        batch = next(self.stream)
        logits = self.model(batch.src, batch.tgt_in)                       # (B, T, V)
        loss = F.cross_entropy(logits, batch.tgt_out, ignore_index=tasks.PAD, label_smoothing=self.cfg.label_smoothing)
        loss = optimize(loss, self.optimizer, self.schedule, self.cfg.clip_norm)
        return loss, self.optimizer.param_groups[0]["lr"]

    def evaluate(self, number):
        return evaluate(self.model, self.heldout, self.data.max_output_len + 1)

    def done(self, metrics):
        return metrics["exact_match"] >= self.cfg.target_accuracy

    def score(self, metrics):
        return metrics["exact_match"]

    def progress(self, number, history, since):
        last = history["evals"][-1]
        return (f"step {number:5d}  loss {np.mean(history['loss'][-self.cfg.eval_every:]):.4f}  lr {last['lr']:.2e}  "
                f"exact {last['exact_match']:.1%}  tokens {last['token_accuracy']:.1%}  {last['seconds']:5.1f}s")

    def checkpoint(self, history):
        return run_state(self.model, self.cfg, history, optimizer=self.optimizer.state_dict(),
                         schedule=self.schedule.state_dict(), stream_rng=generator_state(self.stream.rng),
                         dropout_rng=generator_state(default_generator()))

    def load_state_dict(self, state):
        """Go on from a checkpoint's optimizer, schedule and random generators."""
        self.optimizer.load_state_dict(state["optimizer"])
        self.schedule.load_state_dict(state["schedule"])
        restore_generator(self.stream.rng, state["stream_rng"])
        restore_generator(default_generator(), state["dropout_rng"])


RESUME_ENTRIES = ("model", "optimizer", "schedule", "train_config", "stream_rng", "dropout_rng", "history")


def train(cfg, model=None, log=print, resume=None, should_stop=None, data=None, on_step=None, **model_overrides):
    """Train until the held-out exact match reaches cfg.target_accuracy or cfg.max_steps.

    data: what to train on (default: the task cfg.task names, see transformer/data/registry.py).

    Every cfg.save_every steps (and at the end) the whole run state goes to
    cfg.out_dir/checkpoint.npz (plus step-N.npz for the last cfg.keep_last saves and
    best.npz); `resume` (such a checkpoint, or its folder) continues that run exactly.
    Ctrl-C, or should_stop(step) returning True, ends the run after the current step
    with everything saved.  on_step: the loop's hook after each step (a live view).  Returns
    (model, metrics); metrics["interrupted"] says which."""
    manual_seed(cfg.seed)
    saved = load_checkpoint(resume, needs=RESUME_ENTRIES) if resume else None
    if saved:
        model = model_from(saved)
    data = data or make_task(cfg)
    model = model or build_model(cfg, data, **model_overrides)
    job = ToyTaskJob(model, data, cfg)
    history = None
    if saved:
        job.load_state_dict(saved)
        history = json.loads(str(saved["history"]))
        log(f"resumed from {resume} at step {len(history['step'])}")
    history = train_loop(job, cfg.max_steps, cfg.eval_every, out_dir=cfg.out_dir, save_every=cfg.save_every,
                         keep_last=cfg.keep_last, history=history, log=log, should_stop=should_stop, on_step=on_step)
    result = history["evals"][-1] if history["evals"] else {"exact_match": 0.0, "token_accuracy": 0.0}
    metrics = {"task": cfg.task, "steps": len(history["step"]), "seconds": history["seconds"],
               "interrupted": history["interrupted"], "final_loss": history["loss"][-1] if history["loss"] else None,
               "exact_match": result["exact_match"], "token_accuracy": result["token_accuracy"],
               "reached_target": result["exact_match"] >= cfg.target_accuracy,
               "train_config": dataclasses.asdict(cfg), "model_config": dataclasses.asdict(model.config),
               "history": history}
    with open(os.path.join(cfg.out_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    return model, metrics


def resumed_config(path, **overrides):
    """The TrainConfig of the run saved at `path`, with `overrides` (e.g. max_steps, out_dir)."""
    saved = json.loads(str(load_checkpoint(path, needs=("train_config",))["train_config"]))
    saved.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig(**saved)


def load_model(path):
    """The Transformer (in eval mode) of a checkpoint written by `train` (the file, or its folder)."""
    return model_from(load_checkpoint(path, kinds=("Transformer",))).eval()


def sample_decodes(model, data, count=3, seed=123):
    """A few (source, expected, greedy output) triples as token lists, from data.heldout."""
    batch = data.heldout(count, seed)
    with no_grad():
        model.eval()
        out = greedy_decode(model, batch.src, data.max_output_len + 1, tasks.BOS, tasks.EOS, tasks.PAD)
        model.train()
    return [(tasks.strip(s), tasks.strip(t), tasks.strip(o)) for s, t, o in zip(batch.src, batch.tgt_out, out)]
