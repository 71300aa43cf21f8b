"""Train a GPT on real text with nanoGPT's CPU recipe, then sample from it.

    python -m demos.gpt                          # the standard library's docstrings, about 1 MB
    python -m demos.gpt --data my_text.txt --max-iters 5000 --out runs/mine
    python -m demos.gpt --tokenizer bpe --vocab-size 512     # byte-level BPE tokens, not characters
    python -m demos.gpt --arch llama             # Llama's block: RMSNorm, SwiGLU, RoPE; an untied output layer
    python -m demos.gpt --arch llama --kv-heads 2    # and grouped-query attention: 2 kv heads for 4 heads

The defaults are nanoGPT's CPU recipe for its Shakespeare character model: 4 layers, 4
heads, 128 wide, context 64, batch 12, 2000 iterations, dropout 0, AdamW (beta2 0.99,
weight decay 0.1 on weight matrices), lr 1e-3 warmed up over 100 iterations and cosine-
decayed to 1e-4, gradient clipping at 1.  Without --data it trains on the docstrings of
this Python's standard library, so it runs offline out of the box.

--arch llama trains the same model with Llama's block in place of GPT-2's (llama_config in
transformer/families/decoder_only.py): RMSNorm for LayerNorm, a SwiGLU feed-forward for the
GELU MLP, rotary positions in every attention for the learned table, no biases, and an
output projection of its own (--tie-weights: the token embedding, as GPT-2's); --kv-heads K
makes its attention grouped-query: K key/value heads, each shared by --heads / K query heads.

--tokenizer bpe trains a byte-level BPE tokenizer (transformer/data/bpe.py) on the training
split only and saves it in the checkpoint. The validation loss is reported per token and in
bits per byte, which compares a character model with a BPE one.

Writes to --out: loss.png (train and validation loss), metrics.json, checkpoint.npz
(model, optimizer, configuration, vocabulary and the run's state; best.npz the same at the
best validation loss, step-N.npz at the last save) and sample.txt.  Then
try `python -m demos.sample --checkpoint OUT --prompt "Return the"`.

Ctrl-C stops after the current iteration, writes the checkpoint, metrics and loss plot,
and prints the command that resumes (`--resume OUT`, which continues bit for bit);
every checkpoint is written as checkpoint.npz and step-N.npz (N: its iteration; the last
one kept), with best.npz at the lowest validation loss; --save-every N also checkpoints
every N iterations.  --detect-anomaly stops at the first op that makes a NaN or inf.
"""

import contextlib
import dataclasses
import json
import os
import sys
import time

import numpy as np

from autograd import detect_anomaly, kernels, manual_seed
from demos._flags import (add_config_flags, command_line, counted, fail, fail_config, given, integer_at_least,
                          refuse_contradictions, refuse_finished)
from demos._live import LiveLine
from transformer.config import ATTENTION_KINDS
from transformer.data.bpe_training import train as train_bpe
from transformer.data.text import TextDataset, read_text, split_text, stdlib_docstrings
from transformer.families.decoder_only import DecoderOnly, gpt_config, llama_config
from transformer.layers import FeedForward
from transformer.relative_position import ROPE_PAIRINGS
from transformer.training.checkpoints import model_from
from transformer.training.lm import LMJob, LMTrainConfig, step_functions, resume_state, train_lm, vocab_of
from transformer.training.loop import INTERRUPTED_EXIT_CODE

TRAIN_FLAGS = ("block_size", "batch_size", "max_iters", "lr", "min_lr", "warmup", "weight_decay", "beta2", "grad_clip",
               "eval_every", "eval_iters", "log_every", "save_every", "seed")
MODEL_FLAGS = ("n_layer", "n_head", "n_embd", "dropout", "bias", "attention", "activation")   # gpt_config's parameters
LLAMA_FLAGS = ("tie_weights", "rope_base", "rope_pairing", "n_kv_head")     # llama_config's parameters of its own
ARCHS = {"gpt2": (gpt_config, MODEL_FLAGS), "llama": (llama_config, tuple(f for f in MODEL_FLAGS if f not in (
    "bias", "activation")) + LLAMA_FLAGS)}   # (config, its flags): Llama has no biases, and SwiGLU's SiLU
MODEL_FIELDS = {"n_layer": "num_layers", "n_head": "num_heads", "n_embd": "d_model",
                "n_kv_head": "num_kv_heads"}                                   # their DecoderOnlyConfig names
RENAME = {"n_layer": "layers", "n_head": "heads", "n_embd": "d-model", "n_kv_head": "kv-heads"}
CONFIG_FLAGS = {"num_layers": "layers", "num_heads": "heads", "d_model": "d-model", "dropout": "dropout",
                "num_kv_heads": "kv-heads",
                "rope_base": "rope-base", "rope_pairing": "rope-pairing",
                "max_len": "block-size", **{field: field.replace("_", "-") for field in TRAIN_FLAGS}}
# the flag that sets each field of LMTrainConfig and DecoderOnlyConfig
HELPS = {"block_size": "context length in tokens", "lr": "peak learning rate",
         "min_lr": "learning rate at the end of the cosine decay", "warmup": "warm-up iterations",
         "eval_iters": "batches per loss estimate", "log_every": "iterations between progress lines",
         "save_every": "checkpoint every N iterations (0: at the end)",
         "bias": "biases in Linear and LayerNorm (what nanoGPT's bias=True sets)",
         "activation": "the MLP's nonlinearity (FeedForward.ACTIVATIONS in transformer/layers.py; nanoGPT's is gelu)",
         "attention": "fused: one op (faster); composed: matmul, masked_fill, softmax, matmul, the nodes to step "
                      "through in a debugger",
         "tie_weights": "--arch llama: the output projection is the token embedding",
         "rope_base": "--arch llama: RoPE's theta",
         "n_kv_head": "--arch llama: key/value heads of grouped-query attention, --heads a multiple of it "
                      "(default: as many as --heads; 1: multi-query attention)", "rope_pairing": "--arch llama: RoPE's pairs of dimensions, "
         "half (i, i + d/2) as Hugging Face's Llama, or interleaved (2i, 2i + 1) as Meta's"}
PROG = "demos.gpt"
TOKENIZERS = ("char", "bpe")
BPE_VOCAB = 512                      # --vocab-size's default: 256 bytes, 255 merges, the end-of-text token


def parse_args(argv=None):
    p = command_line(PROG, __doc__)
    p.add_argument("--data", help="a UTF-8 text file (default: the standard library's docstrings)")
    add_config_flags(p, LMTrainConfig, TRAIN_FLAGS, helps=HELPS)
    p.add_argument("--arch", choices=ARCHS, help="the block: GPT-2's (the default) or Llama's")
    add_config_flags(p, gpt_config, MODEL_FLAGS, RENAME, {"attention": ATTENTION_KINDS,
                                                          "activation": sorted(FeedForward.ACTIVATIONS)}, HELPS)
    add_config_flags(p, llama_config, LLAMA_FLAGS, RENAME, {"rope_pairing": ROPE_PAIRINGS}, HELPS)
    p.add_argument("--tokenizer", choices=TOKENIZERS, help="characters (the default), or byte-level BPE tokens "
                   "learned from the training split")
    p.add_argument("--vocab-size", type=int, help=f"BPE's vocabulary size, at least 257 (default {BPE_VOCAB})")
    p.add_argument("--sample-tokens", type=integer_at_least(1), default=500, help="tokens in the sample written at the end")
    p.add_argument("--resume", metavar="DIR", help="continue the run saved in DIR exactly where it stopped")
    p.add_argument("--detect-anomaly", action="store_true", help="stop at the first op that produces NaN or inf")
    p.add_argument("--out", default=None, help="output folder (default runs/gpt, or the --resume folder)")
    return p.parse_args(argv)


def load_corpus(path):
    """(text, a short description) of --data, or of the default corpus."""
    if path:
        return read_text(path), path
    return stdlib_docstrings(), "the standard library's docstrings"


def read_data(path):
    """(text, its description) of --data, or of the default corpus; a file that cannot be
    used (missing, empty, binary) is the user's mistake: one line, exit status 2."""
    try:
        return load_corpus(path)
    except (OSError, ValueError) as err:
        fail(PROG, f"--data: {err}")


def make_vocab(args, text):
    """None for characters (the dataset takes the text's), or a BPE tokenizer trained on the
    training split."""
    if (args.tokenizer or "char") == "char":
        if args.vocab_size is not None:
            fail(PROG, "--vocab-size is for --tokenizer bpe (a character vocabulary is the text's characters)")
        return None
    vocab_size = BPE_VOCAB if args.vocab_size is None else args.vocab_size
    started = time.perf_counter()
    try:
        vocab = train_bpe(split_text(text)[0], vocab_size)
    except ValueError as err:
        fail(PROG, f"--vocab-size: {err}")
    print(f"BPE: {len(vocab.merges)} merges learned from the training split in {time.perf_counter() - started:.1f} s")
    return vocab


def dataset(text, cfg, vocab):
    try:
        return TextDataset(text, cfg.block_size, vocab=vocab)
    except ValueError as err:
        fail(PROG, f"--data: {err}")


def train_config(make, *args, **train_fields):
    """make(*args, **train_fields), an LMTrainConfig; a flag's value out of range is one line."""
    try:
        return make(*args, **train_fields)
    except ValueError as err:
        fail_config(PROG, err, CONFIG_FLAGS)


def arch_of(model_config):
    """"llama" or "gpt2": the block a DecoderOnlyConfig (a dict) describes."""
    return "llama" if model_config.get("feed_forward") == "swiglu" else "gpt2"


def model_flags(args, arch):
    """{parameter: value} of the model flags given, for `arch`'s config; a flag of the other
    architecture's is one line (--bias is GPT-2's; Llama has no biases)."""
    own = ARCHS[arch][1]
    foreign = [name for name in given(args, MODEL_FLAGS + LLAMA_FLAGS) if name not in own]
    if foreign:
        flag = "--" + RENAME.get(foreign[0], foreign[0].replace("_", "-"))
        fail(PROG, f"{flag} is not a flag of --arch {arch}")
    return given(args, own)


def main(argv=None):
    args = parse_args(argv)
    out = args.out or args.resume or "runs/gpt"
    arch = args.arch or "gpt2"
    train_fields = given(args, TRAIN_FLAGS)
    state = None
    if args.resume:
        try:
            state, cfg = resume_state(args.resume)
        except (OSError, ValueError) as err:
            fail(PROG, f"--resume: {err}")
        saved = dataclasses.asdict(cfg)
        refuse_contradictions(PROG, train_fields, saved, allowed={"max_iters"})
        refuse_finished(PROG, "--max-iters", train_fields.get("max_iters"), state)
        saved_model = json.loads(str(state["model_config"]))
        if args.arch not in (None, arch_of(saved_model)):
            fail(PROG, f"--arch {args.arch} contradicts the resumed run's --arch {arch_of(saved_model)}")
        arch = arch_of(saved_model)
        model_fields = model_flags(args, arch)
        refuse_contradictions(PROG, {MODEL_FIELDS.get(k, k): v for k, v in model_fields.items()}, saved_model,
                              allowed=(), rename={field: RENAME[name] for name, field in MODEL_FIELDS.items()})
        if args.data and args.data != (str(state["data"]) or None):
            fail(PROG, f"--data {args.data} contradicts the resumed run's data {str(state['data']) or 'the default corpus'}")
        cfg = train_config(dataclasses.replace, cfg, **train_fields)
        data_path = str(state["data"]) or None
        vocab = vocab_of(state)
        if args.tokenizer not in (None, vocab.kind) or (args.vocab_size not in (None, len(vocab))):
            fail(PROG, f"--tokenizer/--vocab-size contradict the resumed run's {vocab.kind} vocabulary of {len(vocab)}")
        kernels.prepare_in_background(fused_attention=saved_model["attention"] == "fused")   # overlaps reading
        text, source = read_data(data_path)
        data = dataset(text, cfg, vocab)
        manual_seed(cfg.seed)
        model = model_from(state)
    else:
        cfg = train_config(LMTrainConfig, **train_fields)
        data_path = args.data
        model_fields = model_flags(args, arch)
        text, source = read_data(data_path)
        data = dataset(text, cfg, make_vocab(args, text))
        try:
            model_config = ARCHS[arch][0](len(data.vocab), cfg.block_size, **model_fields)   # the vocabulary read
        except ValueError as err:
            fail_config(PROG, err, CONFIG_FLAGS)
        kernels.prepare_in_background(fused_attention=model_config.attention == "fused")
        manual_seed(cfg.seed)
        model = DecoderOnly(model_config)
    c = model.config
    n_params = sum(p.data.size for p in model.parameters())
    print(f"{source}: {len(text):,} characters, {data.vocab.kind} vocabulary of {len(data.vocab)}; "
          f"tokens: train {len(data.splits['train']):,}, validation {len(data.splits['val']):,} "
          f"({data.bytes_per_token['val']:.2f} bytes a token)")
    kv_heads = "" if c.num_kv_heads in (None, c.num_heads) else f" ({counted(c.num_kv_heads, 'key/value head')})"
    mlp = f", a {c.activation} MLP" if c.feed_forward == "mlp" and c.activation != "gelu" else ""   # not nanoGPT's
    print(f"GPT, {arch}'s block: {counted(c.num_layers, 'layer')}, {counted(c.num_heads, 'head')}{kv_heads}, "
          f"d_model {c.d_model}, context {cfg.block_size}, {n_params:,} parameters; {counted(cfg.max_iters, 'iteration')} of batch "
          f"{cfg.batch_size}, {c.attention} attention{mlp}")
    step, evaluate, optimizer = step_functions(model, cfg)
    job = LMJob(data, step, evaluate, cfg, model, optimizer, data_path)
    if state is not None:
        optimizer.load_state_dict(state["optimizer"])
        print(f"resumed from {args.resume} at iteration {len(json.loads(str(state['history']))['step'])}")
    os.makedirs(out, exist_ok=True)
    with detect_anomaly() if args.detect_anomaly else contextlib.nullcontext(), LiveLine() as live:
        history = train_lm(job, start=state, out_dir=out, log=live.log, on_step=live.step)
    from demos import plots
    title = f"GPT, {arch}'s block ({data.vocab.kind} tokens) on {source}"
    unit = "character" if data.vocab.kind == "char" else "token"
    if history["interrupted"]:
        if history["evals"]:
            plots.lm_loss_curve(history, os.path.join(out, "loss.png"), title=title, unit=unit)
        write_metrics(out, source, text, data, n_params, cfg, model, history, arch)
        written = "metrics.json and loss.png" if history["evals"] else "metrics.json (no evaluation yet: no loss.png)"
        print(f"\nstopped at iteration {len(history['step'])}; wrote {out}/checkpoint.npz, {written}. "
              f"Resume with:\n  python -m demos.gpt --resume {out}")
        sys.exit(INTERRUPTED_EXIT_CODE)
    model.eval()
    prompt = data.vocab.encode(text[:1])[None, :]
    generated = model.generate(prompt, args.sample_tokens, temperature=0.8, top_k=200,
                               generator=np.random.default_rng(cfg.seed))
    sample = data.vocab.decode(generated[0])
    with open(os.path.join(out, "sample.txt"), "w", encoding="utf-8") as f:
        f.write(sample)
    metrics = write_metrics(out, source, text, data, n_params, cfg, model, history, arch)
    plots.lm_loss_curve(history, os.path.join(out, "loss.png"), title=title, unit=unit)
    final = history["evals"][-1]
    print(f"\nafter {counted(cfg.max_iters, 'iteration')} ({history['seconds']:.0f} s): train loss {final['train']:.4f}, "
          f"validation loss {final['val']:.4f} nats a token, {metrics['val_bits_per_byte']:.4f} bits a byte")
    print(f"sample (temperature 0.8, top-k 200):\n{'-' * 60}\n{sample}\n{'-' * 60}")
    print(f"wrote {out}/checkpoint.npz (the last iteration's; best.npz, the best validation loss's; "
          f"step-{len(history['step'])}.npz), metrics.json, loss.png and sample.txt")
    return metrics


def write_metrics(out, source, text, data, n_params, cfg, model, history, arch):
    final = history["evals"][-1] if history["evals"] else {"train": None, "val": None}
    done = len(history["step"])
    bits = {f"{split}_bits_per_byte": None if final[split] is None else data.bits_per_byte(split, final[split])
            for split in ("train", "val")}
    metrics = {"arch": arch, "source": source, "characters": len(text), "tokenizer": data.vocab.kind,
               "vocab": len(data.vocab),
               "bytes_per_token": data.bytes_per_token, "parameters": n_params,
               "iterations": done, "interrupted": history["interrupted"], "train_loss": final["train"],
               "val_loss": final["val"], **bits, "seconds": history["seconds"],
               "tokens_per_second": done * cfg.batch_size * cfg.block_size / max(history["seconds"], 1e-9),
               "train_config": dataclasses.asdict(cfg), "model_config": dataclasses.asdict(model.config),
               "history": history}
    with open(os.path.join(out, "metrics.json"), "w") as f:
        json.dump(metrics, f, indent=1)
    return metrics


if __name__ == "__main__":
    main()
