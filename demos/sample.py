"""Generate text from a trained GPT: ours (demos.gpt, characters or BPE tokens), a Hugging Face
folder (GPT-2, Llama, Qwen2 or Mistral; see transformer/training/huggingface.py), or one
nanoGPT trained.

    python -m demos.sample --checkpoint runs/gpt --prompt "Return the" --tokens 300
    python -m demos.sample --hf out/gpt-hf --prompt "Return the" --top-k 1
    python -m demos.sample --hf smollm2 --prompt-ids 1,2,3 --tokens 20 --top-k 1
    python -m demos.sample --hf smollm2 --prompt-ids 1,20,300,4000 --attention-maps out/maps --tokens 1
    python -m demos.sample --nanogpt out-shakespeare-char/ckpt.pt --meta data/shakespeare_char/meta.pkl \\
        --prompt "ROMEO:" --top-k 1          # --top-k 1: greedy decoding

A folder saved by transformers' save_pretrained holds weights only, no tokenizer.json: give
its prompt as token ids (--prompt-ids), and the ids are printed.  --attention-maps OUT
writes each layer's attention over the prompt, a PNG per layer with a column per head
(attention_layer00.png, ...), as demos.train plots its models'.  Under demos.debug an
imported model's attention runs as the composed ops a learner steps through (fused, the
default elsewhere, is one op; --attention composed asks for them without a debugger too):

    python -m demos.debug -b transformer/attention.py:scaled_dot_product_attention \\
        demos.sample --hf smollm2 --prompt-ids 1,2,3 --tokens 1

Generation runs with the key/value cache; when the text outgrows the model's context only
the last block_size characters are fed, as nanoGPT's sample.py does.  Reading nanoGPT's
ckpt.pt or Hugging Face's model.safetensors needs no PyTorch (transformer/training/nanogpt.py
and huggingface.py read the files themselves).
"""

import argparse
import dataclasses
import pickle
import zipfile

import numpy as np

from demos._flags import a_path, command_line, fail, integer_at_least, number
from demos._plotting import output_dir
from demos.plots import prompt_attention_heatmaps
from transformer.attention import MultiHeadAttention
from transformer.config import ATTENTION_KINDS
from transformer.data.text import CharVocab
from transformer.training.huggingface import from_hf
from transformer.training.lm import load_lm
from transformer.training.nanogpt import load_nanogpt_checkpoint, read_meta

PROG = "demos.sample"


def token_ids(text):
    """An argparse type: comma-separated token ids >= 0, e.g. "1,2,3" (its error is what
    argparse prints: an ArgumentTypeError's message, where a ValueError's is dropped)."""
    try:
        ids = [int(part) for part in text.split(",")]
    except ValueError:
        ids = [-1]
    if not ids or min(ids) < 0:
        raise argparse.ArgumentTypeError(f"expected comma-separated token ids >= 0 such as 1,2,3, got {text!r}")
    return ids


def parse_args(argv=None):
    p = command_line(PROG, __doc__)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", type=a_path, help="a folder (or checkpoint.npz) written by demos.gpt")
    source.add_argument("--hf", metavar="DIR", type=a_path, help="a Hugging Face folder: config.json, model.safetensors "
                        "(or its shards and index), tokenizer.json if any (demos.export --hf writes one, "
                        "transformers' save_pretrained too)")
    source.add_argument("--nanogpt", type=a_path, help="a ckpt.pt written by nanoGPT's train.py (needs --meta)")
    p.add_argument("--meta", type=a_path, help="nanoGPT's meta.pkl with the character vocabulary")
    prompt = p.add_mutually_exclusive_group()
    prompt.add_argument("--prompt", help="the text to continue (default: a newline)")
    prompt.add_argument("--prompt-ids", type=token_ids, metavar="IDS", help="the prompt as token ids, e.g. 1,2,3 "
                        "(for a folder without tokenizer.json)")
    p.add_argument("--tokens", type=integer_at_least(1), default=500,
                   help="tokens to generate (characters, for a character model)")
    p.add_argument("--temperature", type=number(lambda t: t >= 0, ">= 0"), default=0.8,
                   help="0 picks the most likely character")
    p.add_argument("--top-k", type=integer_at_least(1), default=200, help="sample among the k most likely (1: greedy)")
    p.add_argument("--seed", type=integer_at_least(0), default=1337)
    p.add_argument("--attention", choices=ATTENTION_KINDS, help="run attention as one fused op or as the composed "
                   "ops a debugger steps through (default: as the model was configured)")
    p.add_argument("--attention-maps", metavar="OUT", help="a folder to write each layer's attention over the prompt "
                   "into, a PNG per layer (made if missing)")
    args = p.parse_args(argv)
    if args.nanogpt is not None and args.meta is None:
        fail(PROG, "--nanogpt needs --meta (nanoGPT's meta.pkl) for the character vocabulary")
    return args


def load(args):
    """(model, vocab or None) from either kind of checkpoint."""
    if args.checkpoint is not None:
        return read("checkpoint", load_lm, args.checkpoint)
    if args.hf is not None:
        return read("hf", from_hf, args.hf)
    itos = read("meta", read_meta, args.meta)["itos"]
    vocab = CharVocab(itos[i] for i in range(len(itos)))
    return read("nanogpt", load_nanogpt_checkpoint, args.nanogpt), vocab


def read(flag, reader, path):
    """reader(path); a file that cannot be read is the user's mistake, named by its flag."""
    try:
        return reader(path)
    except (OSError, ValueError, KeyError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile) as err:
        fail(PROG, f"--{flag}: {err}")


def prompt_tokens(args, model, vocab):
    """The prompt as (1, P) token ids, from --prompt-ids or --prompt (a newline by default)."""
    if args.prompt_ids is not None:
        if max(args.prompt_ids) >= model.config.vocab:
            fail(PROG, f"--prompt-ids: id {max(args.prompt_ids)} is not below the model's vocabulary of "
                       f"{model.config.vocab}")
        return np.array([args.prompt_ids])
    if vocab is None:
        fail(PROG, f"--hf {args.hf} has no tokenizer.json to encode --prompt with: give the prompt as token ids "
                   "(--prompt-ids 1,2,3)")
    text = "\n" if args.prompt is None else args.prompt
    if not text:
        fail(PROG, "--prompt must hold at least one character")
    try:
        return vocab.encode(text)[None, :]                             # (1, P)
    except ValueError as err:
        fail(PROG, f"--prompt: {err}")


def use_attention(model, kind):
    """Run every attention of model fused or composed (MultiHeadAttention's fused flag)."""
    model.config = dataclasses.replace(model.config, attention=kind)
    for module in model.modules():
        if isinstance(module, MultiHeadAttention):
            module.fused = kind == "fused"


def shown(vocab, tokens):
    """tokens (T,) as text, or as ids where there is no vocabulary or an id lies beyond it
    (a padded vocabulary's rows)."""
    if vocab is None or tokens.max() >= len(vocab):
        return " ".join(str(t) for t in tokens)
    return vocab.decode(tokens)


def main(argv=None):
    args = parse_args(argv)
    model, vocab = load(args)
    if vocab is not None and (len(vocab) > model.config.vocab or (args.hf is None and len(vocab) != model.config.vocab)):
        fail(PROG, f"the vocabulary has {len(vocab)} tokens but the model {model.config.vocab}")
    if args.attention is not None:
        use_attention(model, args.attention)
    prompt = prompt_tokens(args, model, vocab)
    if args.attention_maps is not None:
        labels = [repr(shown(vocab, prompt[0, i:i + 1]))[1:-1] for i in range(prompt.shape[1])]
        prompt_attention_heatmaps(model, prompt, labels, output_dir(args.attention_maps))
    tokens = model.generate(prompt, args.tokens, temperature=args.temperature, top_k=args.top_k,
                            generator=np.random.default_rng(args.seed))
    text = shown(vocab, tokens[0])
    print(text)
    return text


if __name__ == "__main__":
    main()
