"""Training an encoder-decoder on a toy task: the loop, evaluation, logs and checkpoints."""

import dataclasses
import json
import os
import time

import numpy as np

import nn
from autograd import default_generator, kernels, manual_seed, no_grad
from nn import functional as F
from nn.recipe import make_optimizer, optimize
from transformer import tasks
from transformer.decoding import greedy_decode
from transformer.model import Transformer, TransformerConfig
from transformer.task_registry import make_task
from transformer.run_state import CheckpointRotation, StopOnInterrupt, generator_state, restore_generator
from transformer.validation import require_positive


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
                         eval_size=self.eval_size, keep_last=self.keep_last)
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


def train(cfg, model=None, log=print, resume=None, should_stop=None, data=None, **model_overrides):
    """Train until the held-out exact match reaches cfg.target_accuracy or cfg.max_steps.

    data: what to train on (default: the task cfg.task names, see transformer/task_registry.py).

    Every cfg.save_every steps (and at the end) the whole run state goes to
    cfg.out_dir/checkpoint.npz (plus step-N.npz for the last cfg.keep_last saves and
    best.npz); `resume` (such a checkpoint, or its folder) continues that run exactly.
    Ctrl-C, or should_stop(step) returning True, ends the run after the current step
    with everything saved.  Returns (model, metrics); metrics["interrupted"] says which."""
    manual_seed(cfg.seed)
    saved = load_run(resume) if resume else None
    if saved:
        model = Transformer(TransformerConfig(**json.loads(str(saved["model_config"]))))
    data = data or make_task(cfg)
    model = model or build_model(cfg, data, **model_overrides)
    kernels.prepare(model.parameters()[0].dtype,                    # a first run compiles here, not on the clock
                    fused_attention=getattr(model.config, "attention", "composed") == "fused")
    started = time.perf_counter()
    optimizer, schedule = make_optimizer(model.parameters(), cfg.lr, cfg.warmup, cfg.decay_steps, cfg.schedule,
                                         getattr(model.config, "d_model", None))
    stream = data.stream(cfg.batch_size, seed=cfg.seed)
    heldout = data.heldout(cfg.eval_size, seed=cfg.seed + 10_000)
    history = {"step": [], "loss": [], "eval": []}
    first = 1
    if saved:
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        schedule.load_state_dict(saved["schedule"])
        restore_generator(stream.rng, saved["stream_rng"])
        restore_generator(default_generator(), saved["dropout_rng"])
        history = json.loads(str(saved["history"]))
        first = int(saved["step"]) + 1
        log(f"resumed from {resume} at step {first - 1}")
    rotation = CheckpointRotation(cfg.out_dir, cfg.keep_last)
    result = history["eval"][-1] if history["eval"] else {"exact_match": 0.0, "token_accuracy": 0.0}
    result = {k: result[k] for k in ("exact_match", "token_accuracy")}
    step, interrupted = first - 1, False
    with StopOnInterrupt() as interrupt:
        for step in range(first, cfg.max_steps + 1):
            batch = next(stream)
            logits = model(batch.src, batch.tgt_in)                       # (B, T, V)
            loss = F.cross_entropy(logits, batch.tgt_out, ignore_index=tasks.PAD,
                                   label_smoothing=cfg.label_smoothing)
            history["step"].append(step)
            history["loss"].append(optimize(loss, optimizer, schedule, cfg.clip_norm))
            interrupted = interrupt.requested or bool(should_stop and should_stop(step))
            reached = False
            if step % cfg.eval_every == 0 or step == cfg.max_steps:
                result = evaluate(model, heldout, data.max_output_len + 1)
                elapsed = time.perf_counter() - started
                lr = optimizer.param_groups[0]["lr"]
                history["eval"].append({"step": step, "seconds": elapsed, "lr": lr, **result})
                log(f"step {step:5d}  loss {np.mean(history['loss'][-cfg.eval_every:]):.4f}  "
                    f"lr {lr:.2e}  exact {result['exact_match']:.1%}  "
                    f"tokens {result['token_accuracy']:.1%}  {elapsed:5.1f}s")
                reached = result["exact_match"] >= cfg.target_accuracy
            done = reached or interrupted or step == cfg.max_steps
            if done or (cfg.save_every and step % cfg.save_every == 0):
                state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                         "schedule": schedule.state_dict(), "step": step, "interrupted": interrupted,
                         "train_config": json.dumps(dataclasses.asdict(cfg)),
                         "model_config": json.dumps(dataclasses.asdict(model.config)),
                         "stream_rng": generator_state(stream.rng), "dropout_rng": generator_state(default_generator()),
                         "history": json.dumps(history)}
                rotation.save(state, step, result["exact_match"])
            if done:
                break
    metrics = {"task": cfg.task, "steps": step, "seconds": time.perf_counter() - started, "interrupted": interrupted,
               "final_loss": history["loss"][-1] if history["loss"] else None, **result,
               "reached_target": result["exact_match"] >= cfg.target_accuracy,
               "train_config": dataclasses.asdict(cfg), "model_config": dataclasses.asdict(model.config),
               "history": history}
    with open(os.path.join(cfg.out_dir, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    return model, metrics


def load_run(path):
    """The state a `train` checkpoint holds (path: the file, or the folder with checkpoint.npz)."""
    if os.path.isdir(path):
        path = os.path.join(path, "checkpoint.npz")
    state = nn.load(path)
    missing = [k for k in ("model", "optimizer", "schedule", "train_config", "model_config", "stream_rng",
                           "dropout_rng", "history", "step") if k not in state]
    if missing:
        raise ValueError(f"resume: {path!r} lacks {missing}; only checkpoints written by demos.train "
                         "(transformer.training.train) can be resumed")
    return state


def resumed_config(path, **overrides):
    """The TrainConfig of the run saved at `path`, with `overrides` (e.g. max_steps, out_dir)."""
    saved = json.loads(str(load_run(path)["train_config"]))
    saved.update({k: v for k, v in overrides.items() if v is not None})
    return TrainConfig(**saved)


def load_model(path, model_config=None):
    """A Transformer (in eval mode) with the weights of a checkpoint written by `train`
    (the file, or its folder); its configuration is read from the checkpoint unless given."""
    if os.path.isdir(path):
        path = os.path.join(path, "checkpoint.npz")
    state = nn.load(path)
    if model_config is None:
        if "model_config" not in state:
            raise ValueError(f"load_model: {path!r} records no model_config; pass the TransformerConfig")
        model_config = TransformerConfig(**json.loads(str(state["model_config"])))
    model = Transformer(model_config)
    model.load_state_dict(state["model"])
    return model.eval()


def sample_decodes(model, data, count=3, seed=123):
    """A few (source, expected, greedy output) triples as token lists, from data.heldout."""
    batch = data.heldout(count, seed)
    with no_grad():
        model.eval()
        out = greedy_decode(model, batch.src, data.max_output_len + 1, tasks.BOS, tasks.EOS, tasks.PAD)
        model.train()
    return [(tasks.strip(s), tasks.strip(t), tasks.strip(o)) for s, t, o in zip(batch.src, batch.tgt_out, out)]
