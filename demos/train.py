"""Train the encoder-decoder Transformer on a toy task and show what it learned.

    python -m demos.train --task reverse          # or --task copy
    python -m demos.train --task reverse --seed 3 --out runs/reverse-3
    python -m demos.train --resume runs/reverse   # continue an interrupted run exactly
    python -m demos.train --checkpoint runs/reverse --decode "a b c d"   # decode your own input

Ctrl-C stops after the current step and writes everything so far (checkpoint, metrics,
plots), then prints the command that resumes.  A run checkpoints its last step (step-N.npz)
and its best evaluation (best.npz); --save-every N also every N steps, keeping the last
--keep-last of them.
--average-last K evaluates the average of the last K checkpoints too (a training tip of
the original Transformer).  --detect-anomaly stops at the first op that makes a NaN or inf.

Prints progress and sample decodes, compares greedy decoding with beam search, and
writes to --out: loss.png (training loss and held-out accuracy), attention_*.png (one
panel per head for encoder self-attention, decoder masked self-attention and
encoder-decoder cross-attention; for reverse, cross-attention shows the anti-diagonal),
metrics.json, checkpoint.npz, step-N.npz and best.npz.
"""

import argparse
import contextlib
import dataclasses
import json
import os
import sys

import numpy as np

import nn
from autograd import detect_anomaly, kernels
from demos._flags import (add_config_flags, command_line, fail, fail_config, given, integer_at_least,
                          refuse_contradictions, refuse_finished)
from demos._live import LiveLine
from transformer.config import ATTENTION_KINDS
from transformer.data import tasks
from transformer.data.registry import make_task
from transformer.decoding import beam_search, greedy_decode
from transformer.encoder_decoder import TransformerConfig
from transformer.layers import FeedForward
from transformer.positional import POSITIONAL_KINDS
from transformer.scores import SCORES
from transformer.training.checkpoints import CheckpointRotation, load_checkpoint
from transformer.training.loop import INTERRUPTED_EXIT_CODE
from transformer.training.seq2seq import (RESUME_ENTRIES, TrainConfig, evaluate, load_model, resumed_config,
                                          sample_decodes, train)

TRAIN_FLAGS = ("task", "seed", "max_steps", "target_accuracy", "batch_size", "lr", "warmup", "decay_steps",
               "label_smoothing", "eval_every", "num_symbols", "max_len", "schedule", "save_every", "keep_last")
MODEL_FLAGS = ("d_model", "num_heads", "d_ff", "dropout", "norm_first", "activation", "positional", "score",
               "attention")
RENAME = {"max_steps": "steps", "target_accuracy": "target", "num_symbols": "symbols", "num_heads": "heads"}
FLAG_NAMES = {field: RENAME.get(field, field.replace("_", "-")) for field in TRAIN_FLAGS + MODEL_FLAGS}
HELPS = {"score": "self-attention's score function (transformer/scores.py), with positions added to the embeddings",
         "task": "a toy task over symbols a, b, c, ..., a SCAN split, or MODULE:NAME for a task your module "
                 "registers (transformer/data/registry.py)",
         "max_steps": "at most this many steps (stops at --target)", "target_accuracy": "stop at this held-out exact match",
         "lr": "peak learning rate (warm-up, then decay)", "decay_steps": "cosine decay to lr/10 over this many steps",
         "max_len": "longest training sequence; held-out sequences have this length",
         "schedule": "cosine: warm-up then cosine decay; noam: the paper's warm-up then 1/sqrt(step), peaking at --lr",
         "save_every": "also checkpoint every N steps (0: only the last step and the best)", "keep_last": "keep this many periodic checkpoints",
         "norm_first": "pre-norm instead of the paper's post-norm",
         "activation": "the feed-forward's nonlinearity (FeedForward.ACTIVATIONS in transformer/layers.py)",
         "attention": "composed: the ops you can step through; fused: one op that keeps no weights "
                      "(slower at this demo's short sequences, faster at a GPT's 64-token blocks)"}
CHOICES = {"schedule": ["cosine", "noam"], "positional": POSITIONAL_KINDS, "score": sorted(SCORES),
           "attention": ATTENTION_KINDS, "activation": sorted(FeedForward.ACTIVATIONS)}
PROG = "demos.train"


def parse_args(argv=None):
    p = command_line(PROG, __doc__)
    add_config_flags(p, TrainConfig, TRAIN_FLAGS, RENAME, CHOICES, HELPS)
    add_config_flags(p, TransformerConfig, MODEL_FLAGS, RENAME, CHOICES, HELPS)
    layers = TransformerConfig.__dataclass_fields__["num_encoder_layers"].default
    p.add_argument("--layers", type=integer_at_least(1), default=argparse.SUPPRESS,
                   help=f"encoder layers and decoder layers, each (default: {layers})")
    p.add_argument("--out", default=None, help="output folder (default runs/<task>, or the --resume folder)")
    p.add_argument("--beam-size", type=integer_at_least(1), default=4)
    p.add_argument("--beam-examples", type=integer_at_least(1), default=200, help="held-out sequences to compare greedy and beam on")
    p.add_argument("--average-last", type=integer_at_least(0), default=0, metavar="K",
                   help="also evaluate the average of the last K checkpoints (use with --save-every)")
    p.add_argument("--resume", metavar="DIR", help="continue the run saved in DIR exactly where it stopped")
    p.add_argument("--detect-anomaly", action="store_true", help="stop at the first op that produces NaN or inf")
    p.add_argument("--checkpoint", metavar="DIR", help="with --decode: the trained run to decode with")
    p.add_argument("--decode", metavar="TEXT",
                   help='decode your own input, e.g. "a b c d" or "jump twice" (needs --checkpoint)')
    args = p.parse_args(argv)
    if args.decode is not None and not args.checkpoint:
        p.error("--decode needs --checkpoint DIR (a folder written by demos.train)")
    return args


def model_flags(args):
    """The TransformerConfig fields the flags set (--layers sets both layer counts)."""
    asked = given(args, MODEL_FLAGS)
    if hasattr(args, "layers"):
        asked.update(num_encoder_layers=args.layers, num_decoder_layers=args.layers)
    return asked


def configs(args):
    """(TrainConfig, the model's config fields as a dict, whether resuming) from the flags, or,
    with --resume, from the checkpoint (a flag that contradicts it is an error)."""
    train_fields, model_fields = given(args, TRAIN_FLAGS), model_flags(args)
    if args.average_last:
        train_fields["keep_last"] = max(train_fields.get("keep_last", TrainConfig.keep_last), args.average_last)
    if not args.resume:
        out = args.out or os.path.join("runs", train_fields.get("task", TrainConfig.task).rpartition(":")[2])
        return TrainConfig(**train_fields, out_dir=out), model_fields
    try:
        state = load_checkpoint(args.resume, needs=RESUME_ENTRIES, kinds=("Transformer",))
    except (OSError, ValueError) as err:
        fail(PROG, f"--resume: {err}")
    saved_train, saved_model = json.loads(str(state["train_config"])), json.loads(str(state["model_config"]))
    refuse_contradictions(PROG, train_fields, saved_train, allowed={"max_steps"}, rename=RENAME)
    refuse_finished(PROG, "--steps", train_fields.get("max_steps"), state)
    refuse_contradictions(PROG, model_fields, saved_model, allowed=(), rename={**RENAME, "num_encoder_layers": "layers",
                                                                               "num_decoder_layers": "layers"})
    saved_train.update(train_fields, out_dir=args.out or args.resume)
    return TrainConfig(**saved_train), saved_model


def main(argv=None):
    args = parse_args(argv)
    if args.decode is not None:
        return decode_input(args.checkpoint, args.decode, args.beam_size)
    try:
        cfg, model_fields = configs(args)
    except ValueError as err:                     # a flag's value out of range
        fail_config(PROG, err, FLAG_NAMES)
    out = cfg.out_dir
    shape = {field.name: field.default for field in dataclasses.fields(TransformerConfig)} | model_fields
    kernels.prepare_in_background(fused_attention=shape["attention"] == "fused")     # a first run compiles meanwhile
    try:
        data = make_task(cfg)
        data.heldout(2, seed=0)               # samples the task once: an answer it cannot train on is refused here
    except ValueError as err:
        fail(PROG, f"--task: {err}")
    if not args.resume:
        try:
            TransformerConfig(src_vocab=data.src_vocab, tgt_vocab=data.tgt_vocab, **model_fields)   # checked now
        except ValueError as err:
            fail_config(PROG, err, FLAG_NAMES)
    if isinstance(data, tasks.ToyTask):
        what = (f"to {cfg.task} sequences of {cfg.min_len}-{cfg.max_len} symbols; held-out: {cfg.eval_size} "
                f"sequences of length {cfg.max_len}")
    else:
        what = f"on {cfg.task}; progress on {cfg.eval_size} held-out examples"
    print(f"training a Transformer ({shape['num_encoder_layers']}+{shape['num_decoder_layers']} layers, "
          f"d_model {shape['d_model']}, {shape['num_heads']} heads) {what}")
    with detect_anomaly() if args.detect_anomaly else contextlib.nullcontext(), LiveLine() as live:
        model, metrics = train(cfg, resume=args.resume, data=data, log=live.log, on_step=live.step,
                               **({} if args.resume else model_fields))
    from demos import plots
    plots.loss_curve(metrics["history"], os.path.join(out, "loss.png"), title=f"{cfg.task}: training")
    if metrics["interrupted"]:
        print(f"\nstopped at step {metrics['steps']}; wrote {out}/checkpoint.npz, metrics.json and loss.png. "
              f"Resume with:\n  python -m demos.train --resume {out}")
        sys.exit(INTERRUPTED_EXIT_CODE)
    verdict = "reached" if metrics["reached_target"] else "did NOT reach"
    print(f"\n{verdict} {cfg.target_accuracy:.0%} exact match: {metrics['exact_match']:.1%} after "
          f"{metrics['steps']} steps, {metrics['seconds']:.1f} s")

    print("\nsample decodes (source -> greedy output):")
    metrics["sample_decodes"] = []                       # as printed (the README quotes them)
    for src, want, got in sample_decodes(model, data, count=4):
        mark = "ok" if got == want else f"WRONG, expected {spell(want, data.tgt_label)}"
        metrics["sample_decodes"].append(f"  {spell(src, data.src_label):<20} -> {spell(got, data.tgt_label):<20} {mark}")
        print(metrics["sample_decodes"][-1])

    metrics["beam_vs_greedy"] = compare_beam_and_greedy(model, data, cfg.seed, args.beam_size, args.beam_examples)
    if args.average_last:
        metrics["averaged"] = evaluate_average(model, data, cfg, args.average_last)
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)

    plots.attention_heatmaps(model, data.heldout(1, seed=7), out, data.src_label, data.tgt_label)
    print(f"wrote to {out}: {', '.join(files_in(out))}")
    return metrics


def files_in(folder):
    """The files in `folder`, sorted: all this run wrote there (a new run's first step
    removes an earlier run's checkpoints; its other files it writes again)."""
    return sorted(name for name in os.listdir(folder) if os.path.isfile(os.path.join(folder, name)))


def spell(tokens, label):
    return " ".join(label(t) for t in tokens)


def compare_beam_and_greedy(model, data, seed, beam_size, count):
    """Exact match of greedy decoding and of beam search on the same held-out sequences."""
    heldout = data.heldout(count, seed=seed + 20_000)
    model.eval()
    greedy = greedy_decode(model, heldout.src, data.max_output_len + 1, tasks.BOS, tasks.EOS, tasks.PAD)
    beams = beam_search(model, heldout.src, data.max_output_len + 1, tasks.BOS, tasks.EOS, beam_size=beam_size)
    wanted = [tasks.strip(t) for t in heldout.tgt_out]
    greedy_acc = float(np.mean([tasks.strip(g) == w for g, w in zip(greedy, wanted)]))
    beam_acc = float(np.mean([tasks.strip(b) == w for b, w in zip(beams, wanted)]))
    print(f"\non {count} other held-out sequences: greedy exact match {greedy_acc:.1%}, "
          f"beam search (beam {beam_size}) {beam_acc:.1%}")
    return {"examples": count, "beam_size": beam_size, "greedy_exact_match": greedy_acc, "beam_exact_match": beam_acc}


def evaluate_average(model, data, cfg, count):
    """Exact match of the average of the last `count` periodic checkpoints, beside the final model's."""
    paths = CheckpointRotation(cfg.out_dir).numbered()[-count:]
    heldout = data.heldout(cfg.eval_size, seed=cfg.seed + 10_000)
    final = evaluate(model, heldout, data.max_output_len + 1)
    original = model.state_dict()
    model.load_state_dict(nn.average_checkpoints(paths))
    averaged = evaluate(model, heldout, data.max_output_len + 1)
    model.load_state_dict(original)
    steps = [os.path.basename(p)[5:-4] for p in paths]
    print(f"average of the checkpoints of steps {', '.join(steps)}: exact match {averaged['exact_match']:.1%} "
          f"(the final model: {final['exact_match']:.1%})")
    return {"steps": steps, "averaged_exact_match": averaged["exact_match"], "final_exact_match": final["exact_match"]}


def decode_input(checkpoint, text, beam_size):
    """Greedy and beam decoding of one typed input ("a b c", or a SCAN command), and its
    attention heatmaps, written in the task's own symbols."""
    try:
        model = load_model(checkpoint)
        data = make_task(resumed_config(checkpoint))
    except (OSError, ValueError) as err:
        fail(PROG, f"--checkpoint: {err}")
    try:
        src = data.encode_source(text)
    except ValueError as err:
        fail(PROG, f"--decode: {err}")
    if src.shape[1] + 2 > model.config.max_len:
        fail(PROG, f"--decode: at most {model.config.max_len - 2} tokens for this model, got {src.shape[1]}")
    max_len = data.max_output_len + 1
    greedy = tasks.strip(greedy_decode(model, src, max_len, tasks.BOS, tasks.EOS, tasks.PAD)[0])
    beam = tasks.strip(beam_search(model, src, max_len, tasks.BOS, tasks.EOS, beam_size=beam_size)[0])
    from demos import plots
    print(f"input:          {text}\ngreedy:         {spell(greedy, data.tgt_label)}\n"
          f"beam ({beam_size}):       {spell(beam, data.tgt_label)}")
    example = tasks.Batch(src, np.array([[tasks.BOS] + greedy]), np.array([greedy + [tasks.EOS]]))
    folder = os.path.join(checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint), "decode")
    os.makedirs(folder, exist_ok=True)
    paths = plots.attention_heatmaps(model, example, folder, data.src_label, data.tgt_label)
    return {"greedy": spell(greedy, data.tgt_label), "beam": spell(beam, data.tgt_label), "plots": paths}


if __name__ == "__main__":
    main()
