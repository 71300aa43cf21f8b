"""BPE training and encoding times on 1 MB of the default corpus, one thread.

    python -m demos.bench.bpe [--merges 1000] [--rounds 3] [--json FILE]

Times, in interleaved rounds (medians reported):
- training `--merges` merges with transformer/data/bpe_training.py (incremental counts), and
  with the readable reference (transformer/data/bpe.py, recounting every pair after each merge)
  for `--reference-merges` merges only, its time per merge showing what a full run would take;
- encoding the whole text with our merges, from an empty cache;
- where installed (the `bench` extra), Hugging Face `tokenizers`' BPE trainer (byte-level,
  the same number of merges, RAYON_NUM_THREADS=1) and `tiktoken` encoding with *our* merges
  and pattern, whose tokens are first checked equal to ours.
"""

import os
import statistics
import time

os.environ.setdefault("RAYON_NUM_THREADS", "1")        # tokenizers' trainer: one thread, as ours

from demos._flags import a_file_to_write, command_line
from demos._results import write_json  # noqa: E402
from transformer.data import bpe, bpe_training  # noqa: E402
from transformer.data.text import stdlib_docstrings  # noqa: E402


def seconds(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def huggingface_trainer(text, merges):
    """A function that trains `tokenizers`' byte-level BPE with `merges` merges, or None."""
    try:
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    except ImportError:
        return None

    def train():
        tokenizer = Tokenizer(models.BPE())
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(vocab_size=256 + merges + 1, special_tokens=[bpe.END_OF_TEXT], show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tokenizer.train_from_iterator([text], trainer)
        return tokenizer
    return train


def tiktoken_encoder(tokenizer):
    """tiktoken's Encoding with our merges and pattern, or None."""
    try:
        import tiktoken
    except ImportError:
        return None
    ranks = {token: rank for rank, token in enumerate(tokenizer.token_bytes)}
    return tiktoken.Encoding("ours", pat_str=tokenizer.pattern, mergeable_ranks=ranks,
                             special_tokens=tokenizer.special)


def main(argv=None):
    p = command_line("demos.bench.bpe", __doc__)
    p.add_argument("--merges", type=int, default=1000)
    p.add_argument("--reference-merges", type=int, default=10)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json", type=a_file_to_write, help="write the figures to this file")
    args = p.parse_args(argv)
    text = stdlib_docstrings()
    size = len(text.encode("utf-8"))
    vocab_size = 256 + args.merges + 1
    tokenizer = bpe_training.train(text, vocab_size)
    hf_train, encoder = huggingface_trainer(text, args.merges), tiktoken_encoder(tokenizer)
    ours_ids = tokenizer.encode(text).tolist()
    same_tokens = encoder is not None and encoder.encode(text, allowed_special="all") == ours_ids
    times = {"train": [], "reference_per_merge": [], "encode": [], "tokenizers_train": [], "tiktoken_encode": []}
    for _ in range(args.rounds):
        times["train"].append(seconds(lambda: bpe_training.train(text, vocab_size))[0])
        if hf_train:
            times["tokenizers_train"].append(seconds(hf_train)[0])
        fresh = bpe.BPETokenizer(tokenizer.merges)                   # an empty cache
        times["encode"].append(seconds(lambda: fresh.encode(text))[0])
        if encoder:
            times["tiktoken_encode"].append(seconds(lambda: encoder.encode(text, allowed_special="all"))[0])
    reference = seconds(lambda: bpe.train_reference(text, 256 + args.reference_merges + 1))[0]
    times["reference_per_merge"].append(reference / args.reference_merges)
    result = {"bytes": size, "merges": args.merges, "tokens": len(ours_ids), "bytes_per_token": size / len(ours_ids),
              "tiktoken_tokens_equal_ours": same_tokens,
              **{f"{name}_s": statistics.median(values) if values else None for name, values in times.items()}}
    print(f"{size:,} bytes of the standard library's docstrings, {args.merges} merges, one thread; "
          f"medians of {args.rounds} interleaved rounds")
    print(f"  train (incremental)        {result['train_s']:7.2f} s")
    print(f"  train (reference)          {result['reference_per_merge_s'] * args.merges:7.1f} s for {args.merges} merges "
          f"at its {result['reference_per_merge_s']:.2f} s a merge (timed over {args.reference_merges})")
    if hf_train:
        print(f"  train (tokenizers)         {result['tokenizers_train_s']:7.2f} s")
    print(f"  encode (ours, empty cache) {result['encode_s']:7.2f} s   {result['bytes_per_token']:.2f} bytes a token")
    if encoder:
        print(f"  encode (tiktoken, our merges) {result['tiktoken_encode_s']:4.2f} s   "
              f"tokens {'equal to' if same_tokens else 'DIFFERENT from'} ours")
    if args.json:
        write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
