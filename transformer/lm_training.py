"""Training a character-level GPT with nanoGPT's recipe: the loop, evaluation and checkpoints.

The loop (`train_lm`) is written against two functions, `step(x, y, lr) -> loss` and
`evaluate(x, y) -> loss`, so that the very same data, schedule and evaluation drive our
engine (`our_engine`) and, in the benchmark, the same GPT in PyTorch.
"""

import dataclasses
import json
import math
import os
import time

import numpy as np

import nn
from autograd import no_grad
from nn import functional as F
from nn.optim import AdamW, clip_grad_norm_
from nn.schedule import warmup_cosine
from transformer.decoder_only import DecoderOnly, DecoderOnlyConfig
from transformer.text import CharVocab
from transformer.validation import require_positive


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
    seed: int = 1337

    def __post_init__(self):
        require_positive("LMTrainConfig", **{name: getattr(self, name) for name in (
            "block_size", "batch_size", "max_iters", "eval_every", "eval_iters", "log_every")})
        if not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"LMTrainConfig: need 0 <= min_lr <= lr, got min_lr={self.min_lr}, lr={self.lr}")

    def lr_at(self, it):
        """The learning rate of iteration `it` (from 0): linear warm-up, cosine decay to min_lr."""
        return self.lr * warmup_cosine(self.warmup, self.max_iters, self.min_lr / self.lr)(it)


def decay_groups(model, weight_decay):
    """AdamW parameter groups: weight decay on the weight matrices and embeddings (2-D and
    up), none on biases and LayerNorm gains (nanoGPT's rule)."""
    params = model.parameters()
    return [{"params": [p for p in params if p.ndim >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}]


def our_engine(model, cfg):
    """(step, evaluate, optimizer) for our DecoderOnly."""
    optimizer = AdamW(decay_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, cfg.beta2))
    params = model.parameters()

    def step(x, y, lr):
        for group in optimizer.param_groups:
            group["lr"] = lr
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        clip_grad_norm_(params, cfg.grad_clip)
        optimizer.step()
        return loss.item()

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


def train_lm(data, step, evaluate, cfg, log=print):
    """Run cfg.max_iters steps on random training blocks, estimating train and validation
    loss every cfg.eval_every iterations and at the end.  Batches come from a generator
    seeded with cfg.seed, evaluation batches from one seeded with cfg.seed + 1, so two
    engines given the same data see the same batches.  Returns the history."""
    batch_rng, eval_rng = np.random.default_rng(cfg.seed), np.random.default_rng(cfg.seed + 1)
    history = {"iter": [], "loss": [], "lr": [], "evals": []}
    tokens_per_iter = cfg.batch_size * cfg.block_size
    started = time.perf_counter()
    for it in range(cfg.max_iters):
        lr = cfg.lr_at(it)
        loss = step(*data.batch("train", cfg.batch_size, batch_rng), lr)
        if not math.isfinite(loss):
            raise FloatingPointError(f"train_lm: the loss became {loss} at iteration {it}")
        history["iter"].append(it)
        history["loss"].append(loss)
        history["lr"].append(lr)
        done = it + 1
        if done % cfg.eval_every == 0 or done == cfg.max_iters:
            history["evals"].append({"iter": done, "seconds": time.perf_counter() - started,
                                     **estimate_loss(evaluate, data, cfg, eval_rng)})
        if done % cfg.log_every == 0 or done == cfg.max_iters:
            elapsed = time.perf_counter() - started
            last = history["evals"][-1] if history["evals"] else None
            val = f"  val {last['val']:.4f} (at {last['iter']})" if last else ""
            log(f"iter {done:5d}/{cfg.max_iters}  loss {np.mean(history['loss'][-cfg.log_every:]):.4f}{val}  "
                f"lr {lr:.2e}  {done * tokens_per_iter / elapsed:7.0f} tokens/s  "
                f"{elapsed:5.1f}s, {elapsed / done * (cfg.max_iters - done):5.1f}s left")
    history["seconds"] = time.perf_counter() - started
    return history


def save_lm(path, model, vocab, optimizer=None, **extra):
    """A checkpoint with the model, its configuration and vocabulary (and the optimizer)."""
    state = {"model": model.state_dict(), "config": json.dumps(dataclasses.asdict(model.config)),
             "vocab": vocab.to_array(), **extra}
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    return nn.save(state, path)


def load_lm(path):
    """(model in eval mode, CharVocab) from a checkpoint written by save_lm (a file, or the
    folder holding checkpoint.npz)."""
    if os.path.isdir(path):
        path = os.path.join(path, "checkpoint.npz")
    state = nn.load(path)
    for key in ("model", "config", "vocab"):
        if key not in state:
            raise ValueError(f"load_lm: {path!r} has no {key!r} entry; was it written by demos.gpt?")
    model = DecoderOnly(DecoderOnlyConfig(**json.loads(str(state["config"]))))
    model.load_state_dict(state["model"])
    return model.eval(), CharVocab.from_array(state["vocab"])
