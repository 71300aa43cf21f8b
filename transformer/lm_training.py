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
from autograd import default_generator, kernels, no_grad
from nn import functional as F
from nn.optim import AdamW, clip_grad_norm_
from nn.schedule import warmup_cosine
from transformer.decoder_only import DecoderOnly, DecoderOnlyConfig
from transformer.run_state import StopOnInterrupt, generator_state, restore_generator
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
    save_every: int = 0              # also checkpoint every this many iterations (0: only at the end)
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
    """(step, evaluate, optimizer) for our DecoderOnly, the kernels prepared for it."""
    optimizer = AdamW(decay_groups(model, cfg.weight_decay), lr=cfg.lr, betas=(0.9, cfg.beta2))
    params = model.parameters()
    kernels.prepare(params[0].dtype, fused_attention=model.config.attention == "fused")   # not on the clock

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


def train_lm(data, step, evaluate, cfg, log=print, start=None, should_stop=None, checkpoint=None):
    """Run cfg.max_iters steps on random training blocks, estimating train and validation
    loss every cfg.eval_every iterations and at the end.  Batches come from a generator
    seeded with cfg.seed, evaluation batches from one seeded with cfg.seed + 1, so two
    engines given the same data see the same batches.

    start: the saved run of an earlier, interrupted one (resume_state), to continue it
    exactly.  Ctrl-C, or should_stop(iteration) returning True, ends the loop after the
    current step.  checkpoint(history) is called every cfg.save_every iterations.  Returns
    the history, whose "progress" entry (the generators' states) lets save_lm write a
    checkpoint that resumes."""
    batch_rng, eval_rng = np.random.default_rng(cfg.seed), np.random.default_rng(cfg.seed + 1)
    history = {"iter": [], "loss": [], "lr": [], "evals": [], "seconds": 0.0}
    if start is not None:
        history = json.loads(start["history"])
        restore_generator(batch_rng, start["batch_rng"])
        restore_generator(eval_rng, start["eval_rng"])
    tokens_per_iter = cfg.batch_size * cfg.block_size
    earlier_seconds = history["seconds"]                # of the run this one resumes
    started = time.perf_counter() - earlier_seconds
    first = len(history["iter"])
    interrupted = False

    def snapshot():
        history["seconds"] = time.perf_counter() - started
        history["interrupted"] = interrupted and len(history["iter"]) < cfg.max_iters
        history["progress"] = {"batch_rng": generator_state(batch_rng), "eval_rng": generator_state(eval_rng)}
        return history

    with StopOnInterrupt() as interrupt:
        for it in range(first, cfg.max_iters):
            lr = cfg.lr_at(it)
            loss = step(*data.batch("train", cfg.batch_size, batch_rng), lr)
            if not math.isfinite(loss):
                raise FloatingPointError(f"train_lm: the loss became {loss} at iteration {it} "
                                         "(run with --detect-anomaly to find the op that made it)")
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
                rate = (done - first) * tokens_per_iter / max(elapsed - earlier_seconds, 1e-9)
                log(f"iter {done:5d}/{cfg.max_iters}  loss {np.mean(history['loss'][-cfg.log_every:]):.4f}{val}  "
                    f"lr {lr:.2e}  {rate:7.0f} tokens/s  "
                    f"{elapsed:5.1f}s, {(cfg.max_iters - done) * tokens_per_iter / rate:5.1f}s left")
            interrupted = interrupt.requested or bool(should_stop and should_stop(done))
            if interrupted and done < cfg.max_iters:
                break
            if checkpoint and cfg.save_every and done % cfg.save_every == 0 and done < cfg.max_iters:
                checkpoint(snapshot())
    return snapshot()


def save_lm(path, model, vocab, optimizer=None, train_config=None, history=None, data=""):
    """A checkpoint with the model, its configuration and vocabulary; with the optimizer,
    the training configuration and the history (train_lm's) it can also resume the run."""
    state = {"model": model.state_dict(), "config": json.dumps(dataclasses.asdict(model.config)),
             "vocab": vocab.to_array()}
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    if train_config is not None:
        state["train_config"] = json.dumps(dataclasses.asdict(train_config))
        state["data"] = data or ""                  # the text file trained on ("" for the default corpus)
    if history is not None:
        progress = history["progress"]
        state["run"] = {"history": json.dumps({k: v for k, v in history.items() if k != "progress"}),
                        "batch_rng": progress["batch_rng"], "eval_rng": progress["eval_rng"],
                        "dropout_rng": generator_state(default_generator())}
    return nn.save(state, path)


def resume_state(path):
    """(checkpoint state, LMTrainConfig, start) of a run saved by save_lm with its history.
    Restore start["dropout_rng"] into the default generator after building the model."""
    if os.path.isdir(path):
        path = os.path.join(path, "checkpoint.npz")
    state = nn.load(path)
    if "run" not in state or "train_config" not in state or "optimizer" not in state:
        raise ValueError(f"resume: {path!r} holds no resumable run (written by demos.gpt?)")
    run = {k: str(v) for k, v in state["run"].items()}
    saved = json.loads(str(state["train_config"]))
    saved.pop("attention", None)      # how attention runs is the model's config now, not the training's
    return state, LMTrainConfig(**saved), run


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
