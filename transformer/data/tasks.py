"""Toy sequence-to-sequence tasks: copy the source, or reverse it (or any answer function
in ANSWERS; see transformer/data/registry.py for adding one).

Vocabulary: PAD=0, BOS=1, EOS=2, then `num_symbols` symbols 3, 4, ... (written a, b, c, ...).
Sources are padded on the right with PAD; targets are BOS + answer + EOS, padded likewise.
An answer may be of any length (not only the source's).
"""

import dataclasses

import numpy as np

PAD, BOS, EOS = 0, 1, 2
NUM_SPECIAL = 3
# task name -> answer(source symbols) -> answer symbols (numpy int arrays of symbol ids)
ANSWERS = {"copy": lambda sequence: sequence, "reverse": lambda sequence: sequence[::-1]}


@dataclasses.dataclass
class Batch:
    src: np.ndarray      # (B, S) source tokens
    tgt_in: np.ndarray   # (B, T) decoder input:  BOS y1 ... yn  (PAD after)
    tgt_out: np.ndarray  # (B, T) decoder target: y1 ... yn EOS (PAD after)


def vocab_size(num_symbols):
    return NUM_SPECIAL + num_symbols


def answer(task, sequence, num_symbols=None):
    """The task's answer to a source of symbol ids; with num_symbols, checked: an answer must
    hold at least one symbol, and only the task's symbols (ids 3 .. 2 + num_symbols; 0-2
    are PAD, BOS and EOS), or the decoder would be asked for tokens it has no embedding of."""
    if task not in ANSWERS:
        raise ValueError(f"unknown task {task!r}; expected one of {sorted(ANSWERS)}")
    result = np.asarray(ANSWERS[task](sequence), dtype=np.int64).reshape(-1)
    if num_symbols is not None:
        source = " ".join(symbol_label(t) for t in sequence)
        if result.size == 0:
            raise ValueError(f"task {task!r}: its answer to the source {source!r} is empty; an answer needs at "
                             "least one symbol (the target would be BOS EOS, nothing to learn)")
        outside = result[(result < NUM_SPECIAL) | (result >= NUM_SPECIAL + num_symbols)]
        if outside.size:
            raise ValueError(f"task {task!r}: its answer to the source {source!r} holds id {int(outside[0])}, outside "
                             f"the task's symbols {NUM_SPECIAL}..{NUM_SPECIAL + num_symbols - 1} (ids 0-2 are PAD, BOS "
                             "and EOS); answers are symbol ids like the sources'")
    return result


def make_batch(task, batch_size, min_len, max_len, num_symbols, rng):
    """A batch of random sequences with lengths uniform in [min_len, max_len]."""
    if task not in ANSWERS:
        raise ValueError(f"unknown task {task!r}; expected one of {sorted(ANSWERS)}")
    if not 1 <= min_len <= max_len:
        raise ValueError(f"need 1 <= min_len <= max_len, got {min_len}, {max_len}")
    lengths = rng.integers(min_len, max_len + 1, size=batch_size)
    symbols = rng.integers(NUM_SPECIAL, NUM_SPECIAL + num_symbols, size=(batch_size, max_len))
    src = np.full((batch_size, max_len), PAD, dtype=np.int64)
    answers = []
    for i, n in enumerate(lengths):
        src[i, :n] = symbols[i, :n]
        answers.append(answer(task, symbols[i, :n], num_symbols))
    width = max(max_len, max(len(a) for a in answers)) + 2      # BOS + answer + EOS, at least as wide as sources
    tgt = np.full((batch_size, width), PAD, dtype=np.int64)
    for i, a in enumerate(answers):
        tgt[i, 0] = BOS
        tgt[i, 1:len(a) + 1] = a
        tgt[i, len(a) + 1] = EOS
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


def symbol_label(token):
    """PAD -> '_', BOS -> '<s>', EOS -> '</s>', symbols -> a, b, c, ..."""
    names = {PAD: "_", BOS: "<s>", EOS: "</s>"}
    return names.get(int(token), chr(ord("a") + int(token) - NUM_SPECIAL))


@dataclasses.dataclass
class ToyTask:
    """A toy task as the training loop sees a data set (transformer/data/scan.py's ScanTask is
    another; transformer/data/registry.py lists both): vocabulary sizes, the longest answer,
    a seeded stream of training batches, a held-out set, and how tokens are written."""
    name: str
    num_symbols: int
    min_len: int
    max_len: int

    @property
    def src_vocab(self):
        return vocab_size(self.num_symbols)

    tgt_vocab = src_vocab
    src_label = tgt_label = staticmethod(symbol_label)

    @property
    def max_output_len(self):
        """The longest answer to a source of up to max_len symbols (measured on the
        longest sources, so an answer of any length is allowed)."""
        probe = make_batch(self.name, 64, self.max_len, self.max_len, self.num_symbols, np.random.default_rng(0))
        return max(self.max_len, probe.tgt_out.shape[1] - 1)

    def encode_source(self, text):
        """"a b c" -> the source token ids, checked against the task's symbols."""
        letters = [symbol_label(NUM_SPECIAL + i) for i in range(self.num_symbols)]
        words = text.split()
        if not words or any(w not in letters for w in words):
            raise ValueError(f"use the task's symbols {' '.join(letters)} separated by spaces; got {text!r}")
        return np.array([[letters.index(w) + NUM_SPECIAL for w in words]])

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
