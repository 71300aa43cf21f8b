"""Text data for a language model: a vocabulary (characters, or BPE tokens:
transformer/data/bpe.py), a train/validation split and random blocks of `block_size + 1` tokens.

The default corpus needs no download: the docstrings of the running Python's standard
library (English prose about code), read in a fixed order, about 1 MB.  Any UTF-8 text
file works instead (`read_text`).
"""

import ast
import math
import os
import sysconfig
from collections import deque

import numpy as np

SKIPPED_FOLDERS = {"test", "tests", "idlelib", "site-packages", "__pycache__", "lib2to3", "turtledemo", "ensurepip"}


def stdlib_docstrings(limit=1_000_000, min_length=40):
    """The docstrings (module, class and function) of the standard library's .py files,
    in sorted path order, each at least `min_length` characters, joined by blank lines,
    until `limit` characters.  The same Python version gives the same text."""
    root = sysconfig.get_paths()["stdlib"]
    parts, total = [], 0
    for path in _python_files(root):
        try:
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue                                   # a few files are templates or not UTF-8
        for node in _definitions(tree):
            doc = ast.get_docstring(node)
            if doc and len(doc) >= min_length:
                parts.append(doc)
                total += len(doc) + 2
        if total >= limit:
            break
    return "\n\n".join(parts)[:limit]


def _definitions(tree):
    """The module, class and function nodes of a syntax tree in ast.walk's (breadth-first)
    order, without descending into expressions: no expression holds a definition with a
    docstring, and expressions are most of a tree's nodes: walking them all would take
    several times as long as walking the definitions."""
    queue = deque([tree])
    while queue:
        node = queue.popleft()
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node
        queue.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.expr))


def _python_files(root):
    for folder, subfolders, files in os.walk(root):
        subfolders[:] = sorted(s for s in subfolders if s not in SKIPPED_FOLDERS)
        yield from (os.path.join(folder, name) for name in sorted(files) if name.endswith(".py"))


def read_text(path):
    """The text of a UTF-8 file, with a clear error for a missing, empty or binary file."""
    if os.path.isdir(path):
        raise IsADirectoryError(f"read_text: {path!r} is a folder; expected a text file")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"read_text: no file at {path!r}")
    with open(path, "rb") as f:
        raw = f.read()
    if not raw:
        raise ValueError(f"read_text: {path!r} is empty")
    if b"\0" in raw:
        raise ValueError(f"read_text: {path!r} looks binary (it contains NUL bytes); expected UTF-8 text")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ValueError(f"read_text: {path!r} is not UTF-8 text ({err.reason} at byte {err.start})") from None


class CharVocab:
    """The distinct characters of a text, sorted; a character's id is its index."""

    kind = "char"

    def __init__(self, chars):
        self.chars = list(chars)
        self.index = {c: i for i, c in enumerate(self.chars)}
        if len(self.index) != len(self.chars):
            raise ValueError("CharVocab: characters must be distinct")

    @classmethod
    def from_text(cls, text):
        return cls(sorted(set(text)))

    def __len__(self):
        return len(self.chars)

    def encode(self, text):
        unknown = sorted(set(text) - set(self.index))
        if unknown:
            raise ValueError(f"CharVocab.encode: characters not in the vocabulary: {unknown[:10]!r} "
                             f"(the vocabulary has {len(self)} characters from the training text)")
        return np.array([self.index[c] for c in text], dtype=np.int64)

    def decode(self, ids):
        return "".join(self.chars[i] for i in np.asarray(ids).reshape(-1))

    def to_array(self):
        """The characters as their Unicode code points (int32), for a checkpoint."""
        return np.array([ord(c) for c in self.chars], dtype=np.int32)

    @classmethod
    def from_array(cls, codes):
        return cls(chr(int(c)) for c in codes)


def split_text(text, val_fraction=0.1):
    """(training text, validation text): the first 1 - val_fraction of the characters and the
    rest, contiguous, as nanoGPT does. A tokenizer is trained on the first part only."""
    cut = int(len(text) * (1 - val_fraction))
    return text[:cut], text[cut:]


def tokenizer_from(kind, array):
    """A vocabulary saved in a checkpoint: its kind ('char' or 'bpe') and its array."""
    from transformer.data.bpe import BPETokenizer
    kinds = {"char": CharVocab, "bpe": BPETokenizer}
    if kind not in kinds:
        raise ValueError(f"the checkpoint's tokenizer is {kind!r}; expected one of {sorted(kinds)}")
    return kinds[kind].from_array(array)


class TextDataset:
    """A text as token ids (vocab: a CharVocab or a BPETokenizer; by default the text's
    characters), split by split_text into training and validation. `batch` draws random
    blocks. `bytes_per_token[split]` turns a loss per token into bits per byte, a measure
    that compares models whatever their tokens are."""

    def __init__(self, text, block_size, val_fraction=0.1, vocab=None):
        if block_size < 1:
            raise ValueError(f"TextDataset: block_size must be >= 1, got {block_size}")
        self.vocab = vocab or CharVocab.from_text(text)
        self.block_size = block_size
        self.splits, self.bytes_per_token = {}, {}
        for name, part in zip(("train", "val"), split_text(text, val_fraction)):
            ids = self.vocab.encode(part)
            if len(ids) < block_size + 1:
                raise ValueError(f"TextDataset: the {name} split has {len(ids)} tokens, fewer than "
                                 f"block_size + 1 = {block_size + 1}; the text ({len(text)} characters) is too short "
                                 f"for this block size")
            self.splits[name] = ids
            self.bytes_per_token[name] = len(part.encode("utf-8")) / len(ids)

    def bits_per_byte(self, split, loss):
        """A loss in nats per token of split, in bits per byte of its text."""
        return loss / math.log(2) / self.bytes_per_token[split]

    def batch(self, split, batch_size, rng):
        """(inputs, targets), each (batch_size, block_size): random contiguous blocks of
        block_size + 1 tokens from `split`, targets shifted by one."""
        data = self.splits[split]
        starts = rng.integers(0, len(data) - self.block_size, size=batch_size)
        blocks = data[starts[:, None] + np.arange(self.block_size + 1)]     # (B, block_size + 1)
        return blocks[:, :-1], blocks[:, 1:]
