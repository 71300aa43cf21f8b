"""Training a character-level GPT with nanoGPT's recipe: its job for the training loop
(transformer/training/loop.py), evaluation and checkpoints.

The job (`LMJob`) is written against two functions, `step(x, y, lr) -> loss` and
`evaluate(x, y) -> loss`, so that the very same data, schedule and evaluation drive our
engine (`step_functions`) and, in the benchmark, the same GPT in PyTorch.
"""

import dataclasses
import json
import math

import numpy as np

import nn
from autograd import default_generator, no_grad
from nn import functional as F
from nn.optim import AdamW
from nn.recipe import optimize
from nn.schedule import warmup_cosine
from transformer.config import require, require_positive
from transformer.data.text import tokenizer_from
from transformer.training.checkpoints import generator_state, load_checkpoint, model_from, restore_generator, run_state
from transformer.training.loop import train_loop


@dataclasses.dataclass
class LMTrainConfig:
    """nanoGPT's CPU recipe for its Shakespeare character model (its README): batch 12,
    context 64, 2000 iterations, AdamW (0.9, 0.99) with weight decay 0.1 on weight
    matrices, lr 1e-3 warmed up over 100 iterations and cosine-decayed to 1e-4, clipping 1."""
    block_size: int = 64
    batch_size: int = 12
    max_iters: int = 2000
    lr: float = 1e-3
    min_lr: float = 1e-4
    warmup: int = 100
    weight_decay: float = 0.1
    beta2: float = 0.99
    grad_clip: float = 1.0
    eval_every: int = 250
    eval_iters: int = 20
    log_every: int = 100
    save_every: int = 0              # also checkpoint every this many iterations (0: only at the end)
    seed: int = 1337

    def __post_init__(self):
        require_positive("LMTrainConfig", **{name: getattr(self, name) for name in (
            "block_size", "batch_size", "max_iters", "eval_every", "eval_iters", "log_every")})
        require("LMTrainConfig", "lr", self.lr, self.lr > 0, "> 0")
        require("LMTrainConfig", "seed", self.seed, self.seed >= 0, ">= 0")
        require("LMTrainConfig", "min_lr", self.min_lr, 0 <= self.min_lr <= self.lr, f"in [0, lr = {self.lr}]")
        for name in ("warmup", "weight_decay", "save_every"):
            require("LMTrainConfig", name, getattr(self, name), getattr(self, name) >= 0, ">= 0")
        require("LMTrainConfig", "beta2", self.beta2, 0 <= self.beta2 < 1, "in [0, 1)")
        require("LMTrainConfig", "grad_clip", self.grad_clip, self.grad_clip > 0, "> 0")

    def lr_at(self, it):
        """The learning rate of iteration `it` (from 0): linear warm-up, cosine decay to min_lr."""
        return self.lr * warmup_cosine(self.warmup, self.max_iters, self.min_lr / self.lr)(it)


def decay_groups(model, weight_decay):
    """AdamW parameter groups: weight decay on the weight matrices and embeddings (2-D and
    up), none on biases and LayerNorm gains (nanoGPT's rule)."""
    params = model.parameters()
    return [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]


def step_functions(model, cfg):
    """(step, evaluate, optimizer) for our DecoderOnly: the two functions LMJob drives (the
    benchmark gives it PyTorch's twins)."""
    optimizer = AdamW(decay_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, cfg.beta2))

    def step(x, y, lr):
        for group in optimizer.param_groups:
            group["lr"] = lr
        return optimize(F.cross_entropy(model(x), y), optimizer, None, cfg.grad_clip)

    def evaluate(x, y):
        model.eval()
        with no_grad():
            loss = F.cross_entropy(model(x), y).item()
        model.train()
        return loss
    return step, evaluate, optimizer


def estimate_loss(evaluate, data, cfg, rng):
    """Mean loss over cfg.eval_iters random batches of each split."""
    return {split: float(np.mean([evaluate(*data.batch(split, cfg.batch_size, rng)) for _ in range(cfg.eval_iters)]))
            for split in ("train", "val")}


class LMJob:
    """Language modelling for the training loop (transformer/training/loop.py), nanoGPT's way: a
    step is a batch of random blocks of the training split at the recipe's learning rate;
    an evaluation estimates the loss on random blocks of each split.  Batches come from a
    generator seeded with cfg.seed, evaluation batches from one seeded with cfg.seed + 1,
    so two engines given the same data see the same batches.  With model given, the loop
    prepares the kernels for it; with model, optimizer and vocab given, its checkpoints hold
    everything to go on."""

    def __init__(self, data, step, evaluate, cfg, model=None, optimizer=None, data_path=""):
        self.data, self.train_step, self.evaluate_loss, self.cfg = data, step, evaluate, cfg
        self.model, self.optimizer, self.data_path = model, optimizer, data_path
        self.batch_rng, self.eval_rng = np.random.default_rng(cfg.seed), np.random.default_rng(cfg.seed + 1)

    def kernel_needs(self):
        """What the model's kernels need (None without a model: PyTorch's twin in the benchmark)."""
        if self.model is None:
            return None
        return self.model.parameters()[0].dtype, self.model.config.attention == "fused"

    def step(self, number):
        lr = self.cfg.lr_at(number - 1)
        loss = self.train_step(*self.data.batch("train", self.cfg.batch_size, self.batch_rng), lr)
        if not math.isfinite(loss):
            raise FloatingPointError(f"train_lm: the loss became {loss} at iteration {number} "
                                     "(run with --detect-anomaly to find the op that made it)")
        return loss, lr

    def evaluate(self, number):
        return estimate_loss(self.evaluate_loss, self.data, self.cfg, self.eval_rng)

    def done(self, metrics):
        return False

    def score(self, metrics):
        return -metrics["val"]

    def progress(self, number, history, since):
        first, earlier_seconds = since
        cfg, elapsed = self.cfg, history["seconds"]
        tokens_per_iter = cfg.batch_size * cfg.block_size
        last = history["evals"][-1] if history["evals"] else None
        val = f"  val {last['val']:.4f} (at {last['step']})" if last else ""
        rate = (number - first + 1) * tokens_per_iter / max(elapsed - earlier_seconds, 1e-9)
        recent = history["loss"][-cfg.log_every:]                   # nanoGPT prints the last batch's alone
        return (f"iter {number:5d}/{cfg.max_iters}  loss {np.mean(recent):.4f} (mean of {len(recent)}){val}  "
                f"lr {history['lr'][-1]:.2e}  {rate:7.0f} tokens/s  "
                f"{elapsed:5.1f}s, {(cfg.max_iters - number) * tokens_per_iter / rate:5.1f}s left")

    def checkpoint(self, history):
        return run_state(self.model, self.cfg, history, optimizer=self.optimizer.state_dict(),
                         vocab=self.data.vocab.to_array(), tokenizer=self.data.vocab.kind, data=self.data_path or "",
                         batch_rng=generator_state(self.batch_rng), eval_rng=generator_state(self.eval_rng),
                         dropout_rng=generator_state(default_generator()))

    def load_state_dict(self, state):
        """Go on from a checkpoint's random generators (the optimizer is step_functions')."""
        restore_generator(self.batch_rng, state["batch_rng"])
        restore_generator(self.eval_rng, state["eval_rng"])
        restore_generator(default_generator(), state["dropout_rng"])


def train_lm(job, log=print, start=None, should_stop=None, out_dir=None, on_step=None):
    """Run job (an LMJob) for its config's max_iters iterations, estimating train and
    validation loss every eval_every iterations and at the end.  start: the checkpoint of an
    earlier, interrupted run (resume_state), to continue it exactly.  Ctrl-C, or
    should_stop(iteration) returning True, ends the loop after the current step.  With
    out_dir, checkpoints go there every save_every iterations and at the end.  on_step: the
    loop's hook after each step (a live view).  Returns the history."""
    history = None
    if start is not None:
        job.load_state_dict(start)
        history = json.loads(str(start["history"]))
    cfg = job.cfg
    return train_loop(job, cfg.max_iters, cfg.eval_every, cfg.log_every, out_dir=out_dir, save_every=cfg.save_every,
                      history=history, log=log, should_stop=should_stop, on_step=on_step)


def save_lm(path, model, vocab):
    """A checkpoint of a model and its vocabulary alone (no run to resume), for sampling."""
    return nn.save(run_state(model, vocab=vocab.to_array(), tokenizer=vocab.kind), path)


RESUME_ENTRIES = ("model", "optimizer", "vocab", "train_config", "history", "batch_rng", "eval_rng", "dropout_rng")


def resume_state(path):
    """(checkpoint state, LMTrainConfig) of a run written by train_lm, to go on with."""
    state = load_checkpoint(path, needs=RESUME_ENTRIES, kinds=("DecoderOnly",))
    return state, LMTrainConfig(**json.loads(str(state["train_config"])))


def vocab_of(state):
    """The vocabulary (CharVocab or BPETokenizer) a checkpoint was trained with."""
    return tokenizer_from(str(state["tokenizer"]) if "tokenizer" in state else "char", state["vocab"])


def load_lm(path):
    """(model in eval mode, vocabulary) from a checkpoint written by train_lm (a file, or the
    folder holding checkpoint.npz)."""
    state = load_checkpoint(path, needs=("vocab",), kinds=("DecoderOnly",))
    return model_from(state).eval(), vocab_of(state)
