"""Export a GPT trained here to Hugging Face's format or to nanoGPT, to go on there (on a GPU, say).

    python -m demos.export --checkpoint runs/gpt --hf out/gpt-hf
    python -m demos.export --checkpoint runs/gpt --nanogpt out/ckpt.pt
    python -m demos.export --from-hf models/smollm2 --hf out/smollm2-again

--hf writes a folder that `transformers` loads with its fast tokenizer (AutoModelForCausalLM
/ AutoTokenizer.from_pretrained): as GPT2LMHeadModel (demos.gpt --arch gpt2) or as
LlamaForCausalLM (--arch llama; interleaved RoPE pairs reordered to Hugging Face's
half-split ones), in model.safetensors, config.json, generation_config.json, tokenizer.json
(byte-level BPE or characters, as trained) and tokenizer_config.json.  It needs no PyTorch;
a model neither can express (say learned positions with RMSNorm, a biased output layer, a
padding mask) is refused in one line, nothing written.  The mapping lives in
transformer/training/huggingface.py.  --from-hf takes instead a folder the importer reads
(demos.sample --hf: GPT-2, Llama with grouped-query attention and RoPE scaling, Qwen2, Mistral
without a sliding window) and writes it back through the same two steps, from_hf then save_hf:
what you studied here, in the files transformers reads (the tokenizer, if the folder had one).

--nanogpt writes ckpt.pt as nanoGPT's train.py writes it: `model` (the weights under nanoGPT's names,
q, k and v stacked into c_attn), `model_args`, `iter_num`, `best_val_loss`, `config` (our
training configuration under nanoGPT's names) and `optimizer` (AdamW's moments and step
mapped onto nanoGPT's parameter order and its two groups, weight matrices first; a
checkpoint with no optimizer state gets an empty one, and training there starts its moments
afresh). Beside it go meta.pkl (the character vocabulary as nanoGPT's prepare.py pickles
it) and train.bin / val.bin (the run's training and validation text as uint16 token ids, as
prepare.py writes them): copy those three into nanoGPT's data/attention_from_scratch/.
On resume nanoGPT's train.py takes the model's shape from the checkpoint but its training
settings from its flags, so the command printed at the end passes them (block size, batch,
learning rates, iterations, CPU).

Writing a torch.save file takes PyTorch: the optional `bench` extra (`pip install -e
".[bench]"`); --nanogpt is the only command that needs it.  Its mapping lives in
transformer/training/nanogpt.py, with the reading side.
"""

import dataclasses
import json
import os
import pickle

import numpy as np

from demos._flags import a_path, command_line, fail
from demos.gpt import load_corpus
from transformer.data.text import split_text
from transformer.training.checkpoints import load_checkpoint, model_from
from transformer.training.huggingface import from_hf, save_hf
from transformer.training.lm import LMTrainConfig, decay_groups, load_lm, vocab_of
from transformer.training.nanogpt import (adam_moments_to_nanogpt, nanogpt_model_args, nanogpt_parameter_order,
                                          to_nanogpt)

PROG = "demos.export"
DATASET = "attention_from_scratch"               # config['dataset']: where nanoGPT's sample.py looks for meta.pkl


def nanogpt_config(train_config, model_args, out_dir):
    """Our LMTrainConfig (a dict) under the names of nanoGPT's train.py globals."""
    t = train_config
    return {"out_dir": out_dir, "eval_interval": t["eval_every"], "log_interval": t["log_every"],
            "eval_iters": t["eval_iters"], "eval_only": False, "always_save_checkpoint": True, "init_from": "resume",
            "wandb_log": False, "dataset": DATASET, "gradient_accumulation_steps": 1, "batch_size": t["batch_size"],
            "block_size": t["block_size"], **{k: model_args[k] for k in ("n_layer", "n_head", "n_embd", "dropout", "bias")},
            "learning_rate": t["lr"], "max_iters": t["max_iters"], "weight_decay": t["weight_decay"], "beta1": 0.9,
            "beta2": t["beta2"], "grad_clip": t["grad_clip"], "decay_lr": True, "warmup_iters": t["warmup"],
            "lr_decay_iters": t["max_iters"], "min_lr": t["min_lr"], "device": "cpu", "dtype": "float32",
            "compile": False}


def torch_optimizer_state(torch, weights, model, state, train_config):
    """nanoGPT's AdamW state_dict: its two groups over its parameter order, our moments in it."""
    order = [name for name in nanogpt_parameter_order(model.config.num_layers, model.config.bias) if name in weights]
    tensors = {name: torch.zeros(weights[name].shape) for name in order}
    decay = [name for name in order if weights[name].ndim >= 2]
    no_decay = [name for name in order if weights[name].ndim < 2]
    t = train_config
    optimizer = torch.optim.AdamW([{"params": [tensors[n] for n in decay], "weight_decay": t["weight_decay"]},
                                   {"params": [tensors[n] for n in no_decay], "weight_decay": 0.0}],
                                  lr=t["lr"], betas=(0.9, t["beta2"]))
    if "optimizer" not in state:
        return optimizer.state_dict(), "no optimizer state in the checkpoint: nanoGPT starts AdamW's moments afresh"
    ours = [p for group in decay_groups(model, 0.0) for p in group["params"]]     # as demos.gpt's AdamW holds them
    moments, step = adam_moments_to_nanogpt(model, state["optimizer"], ours)
    for name in decay + no_decay:
        average, square = moments[name]
        optimizer.state[tensors[name]] = {"step": torch.tensor(float(step)),
                                          "exp_avg": torch.from_numpy(np.array(average, np.float32)),
                                          "exp_avg_sq": torch.from_numpy(np.array(square, np.float32))}
    return optimizer.state_dict(), f"AdamW's moments after {step} steps"


def read_checkpoint(checkpoint):
    """(the checkpoint's entries, our model, its vocabulary), of a model nanoGPT can be."""
    state = load_checkpoint(checkpoint, needs=("vocab",), kinds=("DecoderOnly",))
    model, vocab = model_from(state), vocab_of(state)
    nanogpt_model_args(model.config)                                   # refuses a model nanoGPT cannot be
    if vocab.kind != "char":
        raise ValueError(f"the model reads {vocab.kind} tokens; nanoGPT's meta.pkl holds a character vocabulary only")
    return state, model, vocab


def export(state, model, vocab, path):
    """Write path (ckpt.pt) and meta.pkl beside it; returns what was written, to print."""
    import torch
    model_args = nanogpt_model_args(model.config)
    weights = to_nanogpt(model)
    history = json.loads(str(state["history"])) if "history" in state else {"step": [], "evals": []}
    train_config = (json.loads(str(state["train_config"])) if "train_config" in state
                    else dataclasses.asdict(LMTrainConfig()))              # a model saved alone: the recipe's
    optimizer, optimizer_note = torch_optimizer_state(torch, weights, model, state, train_config)
    out_dir = os.path.dirname(os.path.abspath(path))
    os.makedirs(out_dir, exist_ok=True)
    torch.save({"model": {k: torch.from_numpy(np.array(v, np.float32)) for k, v in weights.items()},
                "optimizer": optimizer, "model_args": model_args, "iter_num": len(history["step"]),
                "best_val_loss": min((e["val"] for e in history["evals"]), default=1e9),
                "config": nanogpt_config(train_config, model_args, os.path.dirname(path) or ".")}, path)
    with open(os.path.join(out_dir, "meta.pkl"), "wb") as f:
        pickle.dump({"vocab_size": len(vocab), "itos": dict(enumerate(vocab.chars)),
                     "stoi": {c: i for i, c in enumerate(vocab.chars)}}, f)
    text, _ = load_corpus(str(state["data"]) if "data" in state and str(state["data"]) else None)
    for name, part in zip(("train.bin", "val.bin"), split_text(text)):
        vocab.encode(part).astype(np.uint16).tofile(os.path.join(out_dir, name))
    return (f"wrote {path} (iteration {len(history['step'])}, {sum(v.size for v in weights.values()):,} numbers; "
            f"{optimizer_note}), and meta.pkl, train.bin and val.bin beside it"), train_config, len(history["step"])


def resume_command(out_dir, t, iteration):
    """nanoGPT's train.py command that goes on from the exported checkpoint with our recipe."""
    more = iteration + t["max_iters"]
    return (f"python train.py --init_from=resume --out_dir={out_dir} --dataset={DATASET} --device=cpu --compile=False "
            f"--dtype=float32 --block_size={t['block_size']} --batch_size={t['batch_size']} "
            f"--learning_rate={t['lr']} --min_lr={t['min_lr']} --warmup_iters={t['warmup']} --max_iters={more} "
            f"--lr_decay_iters={more} --beta2={t['beta2']} --weight_decay={t['weight_decay']} "
            f"--grad_clip={t['grad_clip']} --eval_interval={t['eval_every']} --eval_iters={t['eval_iters']}")


def export_hf(source, flag, folder):
    """Write a model and its tokenizer into folder as Hugging Face's files: source, a checkpoint
    trained here (flag --checkpoint) or a Hugging Face folder, imported first (--from-hf)."""
    try:
        model, vocab = (load_lm if flag == "--checkpoint" else from_hf)(source)
    except (OSError, ValueError) as err:
        fail(PROG, f"{flag}: {err}")
    if os.path.exists(folder) and not os.path.isdir(folder):
        fail(PROG, f"--hf: {folder} is a file; expected a folder to write into (made if missing)")
    try:
        architecture = save_hf(model, vocab, folder)
    except ValueError as err:
        fail(PROG, f"{flag}: {err}")
    except OSError as err:
        fail(PROG, f"--hf: {err}")
    tokenizer = "no tokenizer (the folder had none)" if vocab is None else f"its {vocab.kind} tokenizer"
    print(f"wrote {folder}: {architecture} ({sum(p.data.size for p in model.parameters()):,} parameters) and "
          f"{tokenizer}\nin transformers:\n  from transformers import AutoModelForCausalLM, AutoTokenizer\n"
          f"  model = AutoModelForCausalLM.from_pretrained({folder!r})\n"
          f"  tokenizer = AutoTokenizer.from_pretrained({folder!r})")


def main(argv=None):
    p = command_line(PROG, __doc__)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", type=a_path, help="a folder (or checkpoint.npz) written by demos.gpt")
    source.add_argument("--from-hf", metavar="DIR", type=a_path, help="a Hugging Face model folder (as demos.sample "
                        "--hf reads), written back with --hf")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--hf", metavar="DIR", type=a_path, help="the folder to write Hugging Face's files into (made if missing)")
    target.add_argument("--nanogpt", metavar="CKPT_PT", type=a_path, help="the ckpt.pt to write (meta.pkl goes beside it)")
    args = p.parse_args(argv)
    if args.hf is not None:
        flag, source = ("--checkpoint", args.checkpoint) if args.checkpoint is not None else ("--from-hf", args.from_hf)
        return export_hf(source, flag, args.hf)
    if args.from_hf is not None:
        fail(PROG, "--from-hf goes with --hf: a nanoGPT checkpoint carries a run's training state, which only "
                   "--checkpoint has")
    try:
        state, model, vocab = read_checkpoint(args.checkpoint)
    except (OSError, ValueError) as err:
        fail(PROG, f"--checkpoint: {err}")
    if os.path.isdir(args.nanogpt):
        fail(PROG, f"--nanogpt: {args.nanogpt} is a folder; expected the path of the ckpt.pt to write")
    try:
        import torch  # noqa: F401
    except ImportError:
        fail(PROG, "--nanogpt writes a PyTorch checkpoint and needs PyTorch: pip install -e \".[bench]\"")
    try:
        message, train_config, iteration = export(state, model, vocab, args.nanogpt)
    except OSError as err:
        fail(PROG, f"--nanogpt: {err}")
    out_dir = os.path.dirname(args.nanogpt) or "."
    print(message)
    print(f"in nanoGPT: copy {out_dir}/meta.pkl, train.bin and val.bin into data/{DATASET}/, then "
          f"(training {train_config['max_iters']} iterations more):\n  "
          + resume_command(out_dir, train_config, iteration))


if __name__ == "__main__":
    main()
