"""Byte-level byte-pair encoding (BPE), the tokenizer of GPT-2: a vocabulary learned from text.

A language model reads tokens, "the minimum input unit an LLM processes". Characters make
a small vocabulary but long sequences; whole words make short sequences but cannot spell a
word never seen. BPE learns the units in between from the text itself:

1. start from the 256 byte values, so that any text (any byte string, in fact) can be
   written down: a UTF-8 character is one to four bytes;
2. count every pair of adjacent tokens in the training text, and merge the most frequent
   pair into one new token (ties: the pair of smallest ids, so that training is
   deterministic);
3. repeat until the vocabulary has the size asked for.

Merges never cross the boundaries of a *pre-split*: as in GPT-2, the text is first cut into
words (with their leading space), numbers, runs of punctuation and runs of spaces, so
"dog." and "dog" share the token " dog". GPT-2's pattern uses the Unicode classes \\p{L}
and \\p{N} of the `regex` package; Python's own `re` has no such classes, so PATTERN writes
a letter as `[^\\W\\d_]` (a word character that is neither a digit nor an underscore) and a
number as `\\d`: the same pieces for every script `re` knows as letters or digits.

`encode` applies the merges in the order they were learned, which reproduces the
training's segmentation; `decode` joins the tokens' bytes. Special tokens (the end of a
text) are never split and never learned from. The trainer here, `train_reference`,
recounts every pair after every merge: the readable definition, and quadratic.
`transformer/data/bpe_training.py` updates only the counts a merge changes; tests check that both
learn the same merges.
"""

import json
import re
from collections import Counter

import numpy as np

PATTERN = r"""'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"
BYTES = 256                                   # ids 0-255 are the byte values themselves


def check_training_input(text, vocab_size, special_tokens):
    """The errors a trainer raises before it starts: empty text, too small a vocabulary."""
    if not isinstance(text, str) or not text:
        raise ValueError(f"BPE training: expected a non-empty str of training text, got {type(text).__name__} "
                         f"of length {len(text) if hasattr(text, '__len__') else '?'}")
    least = BYTES + len(special_tokens)
    if vocab_size < least:
        raise ValueError(f"BPE training: vocab_size {vocab_size} is under {least}: the 256 byte values "
                         f"and {len(special_tokens)} special token(s) come first, merges after them")


def split_specials(text, special_tokens):
    """text cut around its special tokens: ['a ', '<|endoftext|>', 'b'] (specials kept)."""
    if not special_tokens:
        return [text]
    pattern = "(" + "|".join(re.escape(s) for s in sorted(special_tokens, key=len, reverse=True)) + ")"
    return [piece for piece in re.split(pattern, text) if piece]


def chunk_counts(text, pattern, special_tokens):
    """How often each pre-split chunk occurs, as a tuple of byte values: the unit training
    works on (merges never cross chunks, so each distinct chunk is merged once)."""
    regex = re.compile(pattern)
    counts = Counter()
    for piece in split_specials(text, special_tokens):
        if piece not in special_tokens:
            counts.update(tuple(chunk.encode("utf-8", "surrogateescape")) for chunk in regex.findall(piece))
    return counts


def merge(word, pair, new_id):
    """word with every occurrence of pair, left to right, replaced by new_id."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and word[i] == pair[0] and word[i + 1] == pair[1]:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def most_frequent(pair_counts):
    """The pair to merge: the most frequent, and of those the smallest (a, b)."""
    return min(pair_counts, key=lambda pair: (-pair_counts[pair], pair))


def train_reference(text, vocab_size, pattern=PATTERN, special_tokens=(END_OF_TEXT,)):
    """A BPETokenizer learned from text, recounting every pair after every merge.

    Stops early when no pair is left to merge (a text shorter than its vocabulary)."""
    check_training_input(text, vocab_size, special_tokens)
    words = chunk_counts(text, pattern, special_tokens)
    merges = []
    for new_id in range(BYTES, vocab_size - len(special_tokens)):
        pairs = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        pair = most_frequent(pairs)
        merges.append(pair)
        words = Counter({merge(word, pair, new_id): count for word, count in words.items()})
    return BPETokenizer(merges, special_tokens, pattern)


class BPETokenizer:
    """Merges learned by a trainer, applied to text: ids 0-255 are bytes, 256 + i is the
    i-th merge, and the special tokens come last."""

    kind = "bpe"

    def __init__(self, merges, special_tokens=(END_OF_TEXT,), pattern=PATTERN):
        self.merges = [tuple(int(x) for x in pair) for pair in merges]
        self.pattern = pattern
        self.regex = re.compile(pattern)
        self.rank = {pair: BYTES + i for i, pair in enumerate(self.merges)}      # pair -> its new id
        self.token_bytes = [bytes([b]) for b in range(BYTES)]
        for a, b in self.merges:
            if max(a, b) >= len(self.token_bytes):
                raise ValueError(f"BPETokenizer: merge {len(self.token_bytes) - BYTES} ({a}, {b}) uses an id "
                                 f"not yet defined (ids up to {len(self.token_bytes) - 1} exist at that point)")
            self.token_bytes.append(self.token_bytes[a] + self.token_bytes[b])
        self.special = {token: len(self.token_bytes) + i for i, token in enumerate(special_tokens)}
        self.special_of_id = {i: token for token, i in self.special.items()}
        self.cache = {}                                                     # chunk bytes -> ids

    def __len__(self):
        return len(self.token_bytes) + len(self.special)

    def encode_chunk(self, chunk):
        """The ids of one pre-split chunk (bytes): merges applied in the order learned."""
        if chunk not in self.cache:
            word = tuple(chunk)
            while len(word) > 1:
                pair = min(zip(word, word[1:]), key=lambda p: self.rank.get(p, len(self)))
                if pair not in self.rank:
                    break                                                   # no learned merge applies
                word = merge(word, pair, self.rank[pair])
            self.cache[chunk] = word
        return self.cache[chunk]

    def encode_pieces(self, text):
        """The ids of a str, which may hold lone surrogates (bytes that were not UTF-8)."""
        ids = []
        for piece in split_specials(text, self.special):
            if piece in self.special:
                ids.append(self.special[piece])
            else:
                for chunk in self.regex.findall(piece):
                    ids.extend(self.encode_chunk(chunk.encode("utf-8", "surrogateescape")))
        return np.array(ids, dtype=np.int64)

    def encode(self, text):
        """The ids (int64 array) of a text; special tokens in it become their own ids."""
        if not isinstance(text, str):
            raise TypeError(f"BPETokenizer.encode: expected str, got {type(text).__name__} (encode_bytes takes bytes)")
        return self.encode_pieces(text)

    def encode_bytes(self, data):
        """The ids of any byte string: bytes that are not UTF-8 stay single-byte tokens."""
        return self.encode_pieces(bytes(data).decode("utf-8", "surrogateescape"))

    def decode_bytes(self, ids):
        out = []
        for i in np.asarray(ids, dtype=np.int64).reshape(-1):
            if not 0 <= i < len(self):
                raise ValueError(f"BPETokenizer.decode: token id {i} is outside the vocabulary (0-{len(self) - 1})")
            out.append(self.special_of_id[i].encode("utf-8") if i in self.special_of_id else self.token_bytes[i])
        return b"".join(out)

    def decode(self, ids):
        """The text of ids; a cut through a character (a prefix of a sample) shows as U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", "replace")

    def to_json(self):
        return json.dumps({"kind": "byte-level BPE", "pattern": self.pattern, "merges": self.merges,
                           "special_tokens": list(self.special)})

    @classmethod
    def from_json(cls, text):
        try:
            spec = json.loads(text)
            assert spec["kind"] == "byte-level BPE"
            return cls(spec["merges"], spec["special_tokens"], spec["pattern"])
        except (ValueError, KeyError, TypeError, AssertionError) as err:
            raise ValueError(f"BPETokenizer.from_json: not a saved byte-level BPE tokenizer ({err!r})") from None

    def save(self, path):
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            return cls.from_json(f.read())

    def to_array(self):
        """The tokenizer as its JSON's UTF-8 bytes (uint8), for a checkpoint."""
        return np.frombuffer(self.to_json().encode("utf-8"), dtype=np.uint8).copy()

    @classmethod
    def from_array(cls, array):
        return cls.from_json(np.asarray(array, dtype=np.uint8).tobytes().decode("utf-8"))
