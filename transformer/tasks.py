"""Toy sequence-to-sequence tasks: copy the source, or reverse it.

Vocabulary: PAD=0, BOS=1, EOS=2, then `num_symbols` symbols 3, 4, ...  Sources are
padded on the right with PAD; targets are BOS + answer + EOS, padded likewise.
"""

import dataclasses

import numpy as np

PAD, BOS, EOS = 0, 1, 2
NUM_SPECIAL = 3
TASKS = ("copy", "reverse")


@dataclasses.dataclass
class Batch:
    src: np.ndarray      # (B, S) source tokens
    tgt_in: np.ndarray   # (B, T) decoder input:  BOS y1 ... yn  (PAD after)
    tgt_out: np.ndarray  # (B, T) decoder target: y1 ... yn EOS (PAD after)


def vocab_size(num_symbols):
    return NUM_SPECIAL + num_symbols


def answer(task, sequence):
    if task == "copy":
        return sequence
    if task == "reverse":
        return sequence[::-1]
    raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")


def make_batch(task, batch_size, min_len, max_len, num_symbols, rng):
    """A batch of random sequences with lengths uniform in [min_len, max_len]."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; expected one of {TASKS}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    lengths = rng.integers(min_len, max_len + 1, size=batch_size)
    symbols = rng.integers(NUM_SPECIAL, NUM_SPECIAL + num_symbols, size=(batch_size, max_len))
    src = np.full((batch_size, max_len), PAD, dtype=np.int64)
    tgt = np.full((batch_size, max_len + 2), PAD, dtype=np.int64)
    for i, n in enumerate(lengths):
        seq = symbols[i, :n]
        src[i, :n] = seq
        tgt[i, 0] = BOS
        tgt[i, 1:n + 1] = answer(task, seq)
        tgt[i, n + 1] = EOS
    return Batch(src, tgt[:, :-1], tgt[:, 1:])


class batches:
    """An endless stream of training batches from its own seeded generator; `rng` is
    exposed so that a checkpoint can save the stream's position and a resumed run
    continue it."""

    def __init__(self, task, batch_size, min_len, max_len, num_symbols, seed):
        self.args = (task, batch_size, min_len, max_len, num_symbols)
        self.rng = np.random.default_rng(seed)

    def __iter__(self):
        return self

    def __next__(self):
        return make_batch(*self.args, self.rng)


def heldout_set(task, size, length, num_symbols, seed):
    """`size` sequences of exactly `length` symbols from their own seed, for evaluation."""
    return make_batch(task, size, length, length, num_symbols, np.random.default_rng(seed))


@dataclasses.dataclass
class ToyTask:
    """A toy task as the training loop sees a data set (transformer/scan.py's ScanTask is
    another): vocabulary sizes, the longest source and answer, a seeded stream of training
    batches and a held-out set for the progress lines."""
    name: str
    num_symbols: int
    min_len: int
    max_len: int

    @property
    def src_vocab(self):
        return vocab_size(self.num_symbols)

    tgt_vocab = src_vocab

    @property
    def max_output_len(self):
        return self.max_len

    def stream(self, batch_size, seed):
        return batches(self.name, batch_size, self.min_len, self.max_len, self.num_symbols, seed)

    def heldout(self, size, seed):
        """`size` held-out sequences of the longest training length."""
        return heldout_set(self.name, size, self.max_len, self.num_symbols, seed)


def strip(tokens):
    """The symbols of a decoded row, up to (not including) the first EOS or PAD."""
    out = []
    for t in tokens:
        if t in (EOS, PAD):
            break
        out.append(int(t))
    return out
