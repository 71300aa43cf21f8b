"""Watch byte-pair encoding learn a vocabulary from text.

    python -m demos.bpe                              # the standard library's docstrings
    python -m demos.bpe --data my_text.txt --vocab-size 1000 --save runs/bpe/tokenizer.json

Trains a byte-level BPE tokenizer (transformer/data/bpe.py) on the training split (the first
90%) and prints the first merges as text, the longest tokens learned, the compression on
the validation split (bytes per token: 1.0 is the bytes themselves), and how a sentence
splits into tokens. --save writes the tokenizer as JSON, which BPETokenizer.load reads.

--trainer reference learns with train_reference (transformer/data/bpe.py), the trainer to
read: it recounts every pair of the text after every merge, so it is slow on a megabyte
(try --vocab-size 300).  The default, fast, is transformer/data/bpe_training.py's, which
updates only the counts a merge changes; both learn the same merges, tie for tie.
"""

import os
import time

from demos._flags import command_line, fail
from demos.gpt import BPE_VOCAB, load_corpus
from transformer.data.bpe import train_reference
from transformer.data.bpe_training import train
from transformer.data.text import split_text

PROG = "demos.bpe"
SENTENCE = "Return the number of items in a container, unless it is empty."
TRAINERS = {"fast": train, "reference": train_reference}


def show(token_bytes):
    """A token as readable text: its bytes decoded, spaces shown as '·'."""
    return repr(token_bytes.decode("utf-8", "replace").replace(" ", "·"))[1:-1]


def main(argv=None):
    p = command_line(PROG, __doc__)
    p.add_argument("--data", help="a UTF-8 text file (default: the standard library's docstrings)")
    p.add_argument("--vocab-size", type=int, default=BPE_VOCAB, help="256 bytes + merges + 1 special token")
    p.add_argument("--sentence", default=SENTENCE, help="a sentence to show split into tokens")
    p.add_argument("--save", metavar="FILE", help="write the tokenizer as JSON to FILE")
    p.add_argument("--trainer", choices=TRAINERS, default="fast",
                   help="reference: the readable trainer, recounting every pair after each merge (slow on a megabyte); "
                        "fast: only the counts each merge changes (the same merges)")
    args = p.parse_args(argv)
    if args.save and os.path.isdir(args.save):
        fail(PROG, f"--save: {args.save} is a folder; expected the path of the JSON file to write")
    try:
        text, source = load_corpus(args.data)
    except (OSError, ValueError) as err:
        fail(PROG, f"--data: {err}")
    train_text, val_text = split_text(text)
    started = time.perf_counter()
    try:
        tokenizer = TRAINERS[args.trainer](train_text, args.vocab_size)
    except ValueError as err:
        fail(PROG, f"--vocab-size: {err}")
    seconds = time.perf_counter() - started
    print(f"{source}: {len(train_text.encode()):,} bytes of training text; {len(tokenizer.merges)} merges "
          f"learned in {seconds:.2f} s by the {args.trainer} trainer (vocabulary {len(tokenizer)}, '·' is a space)")
    print("\nthe first merges (the most frequent pairs, in order):")
    for i, (a, b) in enumerate(tokenizer.merges[:20]):
        print(f"  {256 + i:4d} = {show(tokenizer.token_bytes[a]):>10} + {show(tokenizer.token_bytes[b]):<10} "
              f"-> {show(tokenizer.token_bytes[256 + i])}")
    longest = sorted(range(256, 256 + len(tokenizer.merges)), key=lambda i: (-len(tokenizer.token_bytes[i]), i))
    print("\nthe longest tokens: " + ", ".join(show(tokenizer.token_bytes[i]) for i in longest[:12]))
    val_bytes = len(val_text.encode("utf-8"))
    print(f"\ncompression on the validation split: {val_bytes:,} bytes -> {len(tokenizer.encode(val_text)):,} tokens, "
          f"{val_bytes / len(tokenizer.encode(val_text)):.2f} bytes a token")
    ids = tokenizer.encode(args.sentence)
    print(f"\n{args.sentence!r} is {len(ids)} tokens ({len(args.sentence.encode())} bytes):")
    print("  " + " | ".join(show(tokenizer.token_bytes[i]) if i < len(tokenizer.token_bytes) else "<special>"
                            for i in ids))
    if args.save:
        os.makedirs(os.path.dirname(os.path.abspath(args.save)), exist_ok=True)
        tokenizer.save(args.save)
        print(f"\nwrote {args.save}")
    return tokenizer


if __name__ == "__main__":
    main()
