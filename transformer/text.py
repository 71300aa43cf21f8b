"""Character-level text data for a language model: a vocabulary, a train/validation split
and random blocks of `block_size + 1` characters.

The default corpus needs no download: the docstrings of the running Python's standard
library (English prose about code), read in a fixed order, about 1 MB.  Any UTF-8 text
file works instead (`read_text`).
"""

import ast
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


class CharDataset:
    """A text as character ids, split into the first (1 - val_fraction) for training and
    the rest for validation (contiguous, as nanoGPT does).  `batch` draws random blocks."""

    def __init__(self, text, block_size, val_fraction=0.1, vocab=None):
        if block_size < 1:
            raise ValueError(f"CharDataset: block_size must be >= 1, got {block_size}")
        self.vocab = vocab or CharVocab.from_text(text)
        ids = self.vocab.encode(text)
        cut = int(len(ids) * (1 - val_fraction))
        self.block_size = block_size
        self.splits = {"train": ids[:cut], "val": ids[cut:]}
        for name, part in self.splits.items():
            if len(part) < block_size + 1:
                raise ValueError(f"CharDataset: the {name} split has {len(part)} characters, fewer than "
                                 f"block_size + 1 = {block_size + 1}; the text ({len(ids)} characters) is too short "
                                 f"for this block size")

    def batch(self, split, batch_size, rng):
        """(inputs, targets), each (batch_size, block_size): random contiguous blocks of
        block_size + 1 characters from `split`, targets shifted by one."""
        data = self.splits[split]
        starts = rng.integers(0, len(data) - self.block_size, size=batch_size)
        blocks = data[starts[:, None] + np.arange(self.block_size + 1)]     # (B, block_size + 1)
        return blocks[:, :-1], blocks[:, 1:]
