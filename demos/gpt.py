"""Train a character-level GPT on real text with nanoGPT's CPU recipe, then sample from it.

    python -m demos.gpt                          # the standard library's docstrings, about 1 MB
    python -m demos.gpt --data my_text.txt --max-iters 5000 --out runs/mine

The defaults are nanoGPT's CPU recipe for its Shakespeare character model: 4 layers, 4
heads, 128 wide, context 64, batch 12, 2000 iterations, dropout 0, AdamW (beta2 0.99,
weight decay 0.1 on weight matrices), lr 1e-3 warmed up over 100 iterations and cosine-
decayed to 1e-4, gradient clipping at 1.  Without --data it trains on the docstrings of
this Python's standard library, so it runs offline out of the box.

Writes to --out: loss.png (train and validation loss), metrics.json, checkpoint.npz
(model, optimizer, configuration, vocabulary and the run's state) and sample.txt.  Then
try `python -m demos.sample --checkpoint OUT --prompt "Return the"`.

Ctrl-C stops after the current iteration, writes the checkpoint, metrics and loss plot,
and prints the command that resumes (`--resume OUT`, which continues bit for bit);
--save-every N also checkpoints every N iterations (checkpoint.npz, and best.npz at the
lowest validation loss).  --detect-anomaly stops at the first op that makes a NaN or inf.
"""

import argparse
import contextlib
import dataclasses
import json
import os
import sys

import numpy as np

from autograd import default_generator, detect_anomaly, manual_seed
from transformer.decoder_only import DecoderOnly, DecoderOnlyConfig, gpt_config
from transformer.lm_training import LMTrainConfig, our_engine, resume_state, save_lm, train_lm
from transformer.run_state import INTERRUPTED_EXIT_CODE, restore_generator
from transformer.text import CharDataset, CharVocab, read_text, stdlib_docstrings


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    d = LMTrainConfig()
    p.add_argument("--data", help="a UTF-8 text file (default: the standard library's docstrings)")
    p.add_argument("--block-size", type=int, default=d.block_size, help="context length in characters")
    p.add_argument("--batch-size", type=int, default=d.batch_size)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--bias", action="store_true", help="biases in Linear and LayerNorm (nanoGPT's bias=True)")
    p.add_argument("--max-iters", type=int, default=d.max_iters)
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate")
    p.add_argument("--min-lr", type=float, default=d.min_lr, help="learning rate at the end of the cosine decay")
    p.add_argument("--warmup", type=int, default=d.warmup, help="warm-up iterations")
    p.add_argument("--weight-decay", type=float, default=d.weight_decay)
    p.add_argument("--beta2", type=float, default=d.beta2)
    p.add_argument("--grad-clip", type=float, default=d.grad_clip)
    p.add_argument("--eval-every", type=int, default=d.eval_every)
    p.add_argument("--eval-iters", type=int, default=d.eval_iters, help="batches per loss estimate")
    p.add_argument("--log-every", type=int, default=d.log_every, help="iterations between progress lines")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--attention", choices=("fused", "composed"), default="fused",
                   help="fused: one op (the default, faster); composed: matmul, masked_fill, softmax, matmul, "
                        "the nodes to step through in a debugger")
    p.add_argument("--sample-tokens", type=int, default=500, help="characters in the sample written at the end")
    p.add_argument("--save-every", type=int, default=d.save_every, help="checkpoint every N iterations (0: at the end)")
    p.add_argument("--resume", metavar="DIR", help="continue the run saved in DIR exactly where it stopped")
    p.add_argument("--detect-anomaly", action="store_true", help="stop at the first op that produces NaN or inf")
    p.add_argument("--out", default=None, help="output folder (default runs/gpt, or the --resume folder)")
    return p.parse_args(argv)


def load_corpus(path):
    """(text, a short description) of --data, or of the default corpus."""
    if path:
        return read_text(path), path
    return stdlib_docstrings(), "the standard library's docstrings"


def main(argv=None):
    args = parse_args(argv)
    out = args.out or args.resume or "runs/gpt"
    start = None
    if args.resume:
        state, cfg, start = resume_state(args.resume)
        data_path = str(state["data"]) or None
        text, source = load_corpus(data_path)
        data = CharDataset(text, cfg.block_size, vocab=CharVocab.from_array(state["vocab"]))
        manual_seed(cfg.seed)
        model = DecoderOnly(DecoderOnlyConfig(**json.loads(str(state["config"]))))
        model.load_state_dict(state["model"])
    else:
        cfg = LMTrainConfig(block_size=args.block_size, batch_size=args.batch_size, max_iters=args.max_iters,
                            lr=args.lr, min_lr=args.min_lr, warmup=args.warmup, weight_decay=args.weight_decay,
                            beta2=args.beta2, grad_clip=args.grad_clip, eval_every=args.eval_every,
                            eval_iters=args.eval_iters, log_every=args.log_every, save_every=args.save_every,
                            seed=args.seed)
        data_path = args.data
        text, source = load_corpus(data_path)
        data = CharDataset(text, cfg.block_size)
        manual_seed(cfg.seed)
        model = DecoderOnly(gpt_config(len(data.vocab), cfg.block_size, args.layers, args.heads, args.d_model,
                                       args.dropout, args.bias, args.attention))
    c = model.config
    n_params = sum(p.data.size for p in model.parameters())
    print(f"{source}: {len(text):,} characters, vocabulary {len(data.vocab)}; train {len(data.splits['train']):,}, "
          f"validation {len(data.splits['val']):,}")
    print(f"GPT: {c.num_layers} layers, {c.num_heads} heads, d_model {c.d_model}, context {cfg.block_size}, "
          f"{n_params:,} parameters; {cfg.max_iters} iterations of batch {cfg.batch_size}, {c.attention} attention")
    step, evaluate, optimizer = our_engine(model, cfg)
    if start is not None:
        optimizer.load_state_dict(state["optimizer"])
        restore_generator(default_generator(), start["dropout_rng"])          # dropout continues too
        print(f"resumed from {args.resume} at iteration {len(json.loads(start['history'])['iter'])}")
    os.makedirs(out, exist_ok=True)
    checkpoint_path = os.path.join(out, "checkpoint.npz")

    def checkpoint(history):
        """checkpoint.npz always; best.npz too when the latest validation loss is the lowest yet."""
        save_lm(checkpoint_path, model, data.vocab, optimizer, cfg, history, data_path)
        vals = [e["val"] for e in history["evals"]]
        if vals and vals[-1] == min(vals):
            save_lm(os.path.join(out, "best.npz"), model, data.vocab, optimizer, cfg, history, data_path)

    with detect_anomaly() if args.detect_anomaly else contextlib.nullcontext():
        history = train_lm(data, step, evaluate, cfg, start=start, checkpoint=checkpoint)
    checkpoint(history)
    from demos import plots
    title = f"character GPT on {source}"
    if history["interrupted"]:
        if history["evals"]:
            plots.lm_loss_curve(history, os.path.join(out, "loss.png"), title=title)
        write_metrics(out, source, text, data, n_params, cfg, model, history)
        print(f"\nstopped at iteration {len(history['iter'])}; wrote {checkpoint_path}, metrics.json and loss.png. "
              f"Resume with:\n  python -m demos.gpt --resume {out}")
        sys.exit(INTERRUPTED_EXIT_CODE)
    model.eval()
    prompt = data.vocab.encode(text[:1])[None, :]
    generated = model.generate(prompt, args.sample_tokens, temperature=0.8, top_k=200,
                               generator=np.random.default_rng(cfg.seed))
    sample = data.vocab.decode(generated[0])
    with open(os.path.join(out, "sample.txt"), "w", encoding="utf-8") as f:
        f.write(sample)
    metrics = write_metrics(out, source, text, data, n_params, cfg, model, history)
    plots.lm_loss_curve(history, os.path.join(out, "loss.png"), title=title)
    final = history["evals"][-1]
    print(f"\nafter {cfg.max_iters} iterations ({history['seconds']:.0f} s): train loss {final['train']:.4f}, "
          f"validation loss {final['val']:.4f}")
    print(f"sample (temperature 0.8, top-k 200):\n{'-' * 60}\n{sample}\n{'-' * 60}")
    print(f"wrote {out}/checkpoint.npz, metrics.json, loss.png and sample.txt")
    return metrics


def write_metrics(out, source, text, data, n_params, cfg, model, history):
    final = history["evals"][-1] if history["evals"] else {"train": None, "val": None}
    done = len(history["iter"])
    metrics = {"source": source, "characters": len(text), "vocab": len(data.vocab), "parameters": n_params,
               "iterations": done, "interrupted": history["interrupted"], "train_loss": final["train"],
               "val_loss": final["val"], "seconds": history["seconds"],
               "tokens_per_second": done * cfg.batch_size * cfg.block_size / max(history["seconds"], 1e-9),
               "train_config": dataclasses.asdict(cfg), "model_config": dataclasses.asdict(model.config),
               "history": {k: v for k, v in history.items() if k != "progress"}}
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    return metrics


if __name__ == "__main__":
    main()
