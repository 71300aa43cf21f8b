"""Byte-level byte-pair encoding (BPE), the tokenizer of GPT-2: a vocabulary learned from text.

A language model reads tokens, "the minimum input unit an LLM processes". Characters make
a small vocabulary but long sequences; whole words make short sequences but cannot spell a
word never seen. BPE learns the units in between from the text itself:

1. start from the 256 byte values, so that any text (any byte string, in fact) can be
   written down: a UTF-8 character is one to four bytes;
2. count every pair of adjacent tokens in the training text, and merge the most frequent
   pair into one new token (ties, so that training is deterministic: tie_break="ids" takes
   the pair of smallest ids; "bytes" the lexicographically greatest pair of byte strings,
   the rule of other from-scratch trainers, e.g. Stanford's CS336);
3. repeat until the vocabulary has the size asked for.

Merges never cross the boundaries of a *pre-split*: as in GPT-2, the text is first cut into
words (with their leading space), numbers, runs of punctuation and runs of spaces, so
"dog." and "dog" share the token " dog". GPT-2's pattern uses the Unicode classes \\p{L}
and \\p{N} of the `regex` package; Python's own `re` has no such classes, so PATTERN writes
a letter as `[^\\W\\d_]` (a word character that is neither a digit nor an underscore) and a
number as `\\d`: the same pieces for every script `re` knows as letters or digits.

`encode` applies the merges in the order they were learned, which reproduces the
training's segmentation; `decode` joins the tokens' bytes.  `encode_iterable` encodes a
stream of strings (a file's lines) lazily, cutting it only where a pre-split piece must end
whatever follows: before whitespace that follows a non-space (see `stream_cut`). Special tokens (the end of a
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


def _check_text_and_size(text, vocab_size, special_tokens):
    if not isinstance(text, str) or not text:
        raise ValueError(f"BPE training: expected a non-empty str of training text, got {type(text).__name__} "
                         f"of length {len(text) if hasattr(text, '__len__') else '?'}")
    least = BYTES + len(special_tokens)
    if vocab_size < least:
        raise ValueError(f"BPE training: vocab_size {vocab_size} is under {least}: the 256 byte values "
                         f"and {len(special_tokens)} special token(s) come first, merges after them")


TIE_BREAKS = ("ids", "bytes")
STREAM_CUTS = re.compile(r"\S(?=\s)")          # a non-space followed by whitespace: a piece ends after it


def check_training_input(text, vocab_size, special_tokens, tie_break="ids"):
    """The errors a trainer raises before it starts: empty text, too small a vocabulary,
    an unknown tie-break."""
    if tie_break not in TIE_BREAKS:
        raise ValueError(f"BPE training: tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    _check_text_and_size(text, vocab_size, special_tokens)


def streamable(pattern, special_tokens, owner):
    """Raise unless a text may be cut at stream_cut's places for `pattern`: the pre-split of
    PATTERN (and GPT-2's) never puts whitespace after a non-space in one piece, nor may a
    special token hold whitespace."""
    if pattern != PATTERN or any(any(c.isspace() for c in token) for token in special_tokens):
        raise ValueError(f"{owner}: cutting the text needs the pre-split PATTERN and special tokens without "
                         f"whitespace; got pattern {pattern!r}, special tokens {list(special_tokens)}")


def stream_cut(text, start=0):
    """The first place c >= start with text[c - 1] a non-space and text[c] whitespace (len(text)
    if none): no pre-split piece and no special token spans it, whatever text follows, since
    a piece holds whitespace only at its start or as a whole run."""
    found = STREAM_CUTS.search(text, max(start - 1, 0))
    return len(text) if found is None else found.end()


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


def most_frequent(pair_counts, tie_break="ids", token_bytes=None):
    """The pair to merge: the most frequent; of those, the smallest (a, b) (tie_break "ids"),
    or the greatest (bytes of a, bytes of b) ("bytes")."""
    if tie_break == "bytes":
        return max(pair_counts, key=lambda pair: (pair_counts[pair], token_bytes[pair[0]], token_bytes[pair[1]]))
    return min(pair_counts, key=lambda pair: (-pair_counts[pair], pair))


def train_reference(text, vocab_size, pattern=PATTERN, special_tokens=(END_OF_TEXT,), tie_break="ids"):
    """A BPETokenizer learned from text, recounting every pair after every merge.

    Stops early when no pair is left to merge (a text shorter than its vocabulary)."""
    check_training_input(text, vocab_size, special_tokens, tie_break)
    words = chunk_counts(text, pattern, special_tokens)
    merges, token_bytes = [], [bytes([b]) for b in range(BYTES)]
    for new_id in range(BYTES, vocab_size - len(special_tokens)):
        pairs = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        pair = most_frequent(pairs, tie_break, token_bytes)
        merges.append(pair)
        token_bytes.append(token_bytes[pair[0]] + token_bytes[pair[1]])
        words = Counter({merge(word, pair, new_id): count for word, count in words.items()})
    return BPETokenizer(merges, special_tokens, pattern)


class BPETokenizer:
    """Merges learned by a trainer, applied to text: ids 0-255 are bytes, 256 + i is the
    i-th merge, and the special tokens come last.  ids: another numbering of the same tokens,
    ids[our id] = its id there (a permutation), as GPT-2's vocab.json numbers its bytes
    (transformer/data/bpe_files.py); encode returns and decode takes those ids."""

    kind = "bpe"

    def __init__(self, merges, special_tokens=(END_OF_TEXT,), pattern=PATTERN, ids=None):
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
        self.ids = None if ids is None else np.asarray(ids, dtype=np.int64)
        if self.ids is not None and not np.array_equal(np.sort(self.ids), np.arange(len(self))):
            raise ValueError(f"BPETokenizer: ids must number the {len(self)} tokens 0..{len(self) - 1}, "
                             f"each once; got {len(self.ids)} ids from {self.ids.min(initial=0)} to "
                             f"{self.ids.max(initial=0)}")
        self.our_id = None if ids is None else np.argsort(self.ids)           # their id -> ours

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
        ids = np.array(ids, dtype=np.int64)
        return ids if self.ids is None else self.ids[ids]

    def encode(self, text):
        """The ids (int64 array) of a text; special tokens in it become their own ids."""
        if not isinstance(text, str):
            raise TypeError(f"BPETokenizer.encode: expected str, got {type(text).__name__} (encode_bytes takes bytes)")
        return self.encode_pieces(text)

    def encode_iterable(self, strings):
        """The ids of the concatenation of `strings` (a file opened as text gives its lines),
        one at a time, lazily: the same ids as encode of the whole text, holding only the
        text since the last place it could be cut (stream_cut), so a file of any size is
        encoded in the memory of its longest stretch without a space-after-non-space."""
        streamable(self.pattern, self.special, "BPETokenizer.encode_iterable")
        pending = ""
        for string in strings:
            pending += string
            # pending held no cut but at 0 before, so the last cut, if any, is in the new part
            for cut in range(len(pending) - 1, max(len(pending) - len(string), 1) - 1, -1):
                if pending[cut].isspace() and not pending[cut - 1].isspace():
                    yield from self.encode(pending[:cut]).tolist()
                    pending = pending[cut:]
                    break
        yield from self.encode(pending).tolist()

    def encode_bytes(self, data):
        """The ids of any byte string: bytes that are not UTF-8 stay single-byte tokens."""
        return self.encode_pieces(bytes(data).decode("utf-8", "surrogateescape"))

    def decode_bytes(self, ids):
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        bad = (ids < 0) | (ids >= len(self))
        if bad.any():
            raise ValueError(f"BPETokenizer.decode: token id {ids[bad][0]} is outside the vocabulary "
                             f"(0-{len(self) - 1})")
        out = []
        for i in (ids if self.our_id is None else self.our_id[ids]):
            out.append(self.special_of_id[i].encode("utf-8") if i in self.special_of_id else self.token_bytes[i])
        return b"".join(out)

    def decode(self, ids):
        """The text of ids; a cut through a character (a prefix of a sample) shows as U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", "replace")

    def to_json(self):
        spec = {"kind": "byte-level BPE", "pattern": self.pattern, "merges": self.merges,
                "special_tokens": list(self.special)}
        return json.dumps(spec if self.ids is None else {**spec, "ids": self.ids.tolist()})

    @classmethod
    def from_json(cls, text):
        try:
            spec = json.loads(text)
            assert spec["kind"] == "byte-level BPE"
            return cls(spec["merges"], spec["special_tokens"], spec["pattern"], spec.get("ids"))
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
