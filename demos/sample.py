"""Generate text from a trained GPT: ours (demos.gpt, characters or BPE tokens), a Hugging Face
GPT-2 or Llama folder (with its tokenizer.json), or one nanoGPT trained.

    python -m demos.sample --checkpoint runs/gpt --prompt "Return the" --tokens 300
    python -m demos.sample --hf out/gpt-hf --prompt "Return the" --top-k 1
    python -m demos.sample --nanogpt out-shakespeare-char/ckpt.pt --meta data/shakespeare_char/meta.pkl \\
        --prompt "ROMEO:" --top-k 1          # --top-k 1: greedy decoding

Generation runs with the key/value cache; when the text outgrows the model's context only
the last block_size characters are fed, as nanoGPT's sample.py does.  Reading nanoGPT's
ckpt.pt or Hugging Face's model.safetensors needs no PyTorch (transformer/training/nanogpt.py
and huggingface.py read the files themselves).
"""

import pickle
import zipfile

import numpy as np

from demos._flags import a_path, command_line, fail, integer_at_least, number
from transformer.data.text import CharVocab
from transformer.training.huggingface import from_hf
from transformer.training.lm import load_lm
from transformer.training.nanogpt import load_nanogpt_checkpoint, read_meta

PROG = "demos.sample"


def parse_args(argv=None):
    p = command_line(PROG, __doc__)
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", type=a_path, help="a folder (or checkpoint.npz) written by demos.gpt")
    source.add_argument("--hf", metavar="DIR", type=a_path, help="a Hugging Face GPT-2 or Llama folder: config.json, model.safetensors, "
                        "tokenizer.json (demos.export --hf writes one)")
    source.add_argument("--nanogpt", type=a_path, help="a ckpt.pt written by nanoGPT's train.py (needs --meta)")
    p.add_argument("--meta", type=a_path, help="nanoGPT's meta.pkl with the character vocabulary")
    p.add_argument("--prompt", default="\n")
    p.add_argument("--tokens", type=integer_at_least(1), default=500,
                   help="tokens to generate (characters, for a character model)")
    p.add_argument("--temperature", type=number(lambda t: t >= 0, ">= 0"), default=0.8,
                   help="0 picks the most likely character")
    p.add_argument("--top-k", type=integer_at_least(1), default=200, help="sample among the k most likely (1: greedy)")
    p.add_argument("--seed", type=integer_at_least(0), default=1337)
    args = p.parse_args(argv)
    if args.nanogpt is not None and args.meta is None:
        fail(PROG, "--nanogpt needs --meta (nanoGPT's meta.pkl) for the character vocabulary")
    return args


def load(args):
    """(model, vocab) from either kind of checkpoint."""
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


def main(argv=None):
    args = parse_args(argv)
    model, vocab = load(args)
    if len(vocab) != model.config.vocab:
        fail(PROG, f"the vocabulary has {len(vocab)} tokens but the model {model.config.vocab}")
    if not args.prompt:
        fail(PROG, "--prompt must hold at least one character")
    try:
        prompt = vocab.encode(args.prompt)[None, :]                     # (1, P)
    except ValueError as err:
        fail(PROG, f"--prompt: {err}")
    tokens = model.generate(prompt, args.tokens, temperature=args.temperature, top_k=args.top_k,
                            generator=np.random.default_rng(args.seed))
    text = vocab.decode(tokens[0])
    print(text)
    return text


if __name__ == "__main__":
    main()
