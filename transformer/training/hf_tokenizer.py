"""Our tokenizers as Hugging Face's tokenizer.json, and tokenizer.json read back without the
`tokenizers` library.

A tokenizer.json names a model (here "BPE"), the pre-tokenizer that cuts text into chunks
before the merges (our pre-split), the added (special) tokens and a decoder.  Two kinds are
written and read:

- **byte-level BPE** (transformer/data/bpe.py): Hugging Face writes each byte as a printable
  character (GPT-2's `bytes_to_unicode`: a space is "Ġ"), a token as the string of its bytes'
  characters, and a merge as the pair of strings.  Our ids stay: bytes 0-255, merge i is
  256 + i, the specials last.  A tokenizer.json numbered otherwise (GPT-2's own, or one
  trained by `tokenizers`) reads as a `RenumberedBPE`: our BPE on its merges, ids mapped.
- **characters** (CharVocab): a BPE with no merges whose vocabulary is the characters,
  no pre-tokenizer, and the Fuse decoder (tokens joined without spaces).  A character
  outside the vocabulary is dropped by `tokenizers` (a BPE with no unknown token), and
  refused by CharVocab.

The pre-split is a regular expression, and the two sides run different engines: Python's
`re` here, Oniguruma in `tokenizers`, whose classes differ (`\\w` takes combining marks
there, `\\s` leaves out U+001C-U+001F).  So each pattern is kept in both dialects, written
to cut every character of the Unicode database the same way: `PATTERNS` maps the Oniguruma
form to ours (ours, and GPT-2's `\\p{L}`/`\\p{N}` one spelled out as ranges for `re`).
Characters assigned after the Python's Unicode version may still be cut differently.
"""

import functools
import json
import os
import re
import unicodedata

import numpy as np

from transformer.data.bpe import BYTES, PATTERN, BPETokenizer
from transformer.data.text import CharVocab


def bytes_to_unicode():
    """GPT-2's printable character for each byte value: printable Latin-1 bytes stand for
    themselves, the others (controls, space) for 256, 257, ... in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(BYTES) if b not in printable]
    table = dict(zip(printable, printable)) | {b: BYTES + i for i, b in enumerate(others)}
    return {b: chr(table[b]) for b in range(BYTES)}


BYTE_CHAR = bytes_to_unicode()
CHAR_BYTE = {c: b for b, c in BYTE_CHAR.items()}


def _ranges(category_initial):
    """A regex class body (no brackets) of every character whose Unicode category starts
    with category_initial ("L": letters, "N": numbers), as ranges."""
    spans, start = [], None
    for code in range(0x110001):
        inside = code < 0x110000 and unicodedata.category(chr(code))[0] == category_initial
        if inside and start is None:
            start = code
        elif not inside and start is not None:
            spans.append(re.escape(chr(start)) + (f"-{re.escape(chr(code - 1))}" if code - 1 > start else ""))
            start = None
    return "".join(spans)


ONIG_SPACE = r"[\s\x1c-\x1f]"                 # Python's \s in Oniguruma: it adds U+001C-U+001F
ONIG_PATTERN = (r"'(?:s|t|re|ve|m|ll|d)| ?[\p{L}\p{Nl}\p{No}]+| ?\p{Nd}+| ?(?:[^\s\x1c-\x1f\p{L}\p{N}]|_)+|"
                rf"{ONIG_SPACE}+(?![^\s\x1c-\x1f])|{ONIG_SPACE}+")           # bpe.PATTERN, for tokenizers
GPT2_ONIG_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"


@functools.cache
def gpt2_pattern():
    """GPT-2's pre-split (GPT2_ONIG_PATTERN) for `re`: \\p{L} and \\p{N} spelled out as ranges,
    and Oniguruma's \\s (Python's without U+001C-U+001F).  Made on first use (it scans
    the Unicode database)."""
    letters, numbers, space = _ranges("L"), _ranges("N"), r"[^\S\x1c-\x1f]"
    return (rf"'s|'t|'re|'ve|'m|'ll|'d| ?[{letters}]+| ?[{numbers}]+| ?(?:[\x1c-\x1f]|[^\s{letters}{numbers}])+"
            rf"|{space}+(?![\S\x1c-\x1f])|{space}+")


PATTERNS = {ONIG_PATTERN: lambda: PATTERN, GPT2_ONIG_PATTERN: gpt2_pattern}    # Oniguruma's form -> ours


def _added(tokens):
    return [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
             "special": True} for t, i in tokens.items()]


def _bpe_model(vocab, merges):
    return {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": vocab, "merges": merges}


def _string(token):
    """A token's bytes as tokenizer.json writes them: one printable character a byte."""
    return "".join(BYTE_CHAR[b] for b in token)


def to_tokenizer_json(tokenizer):
    """tokenizer.json's object for a CharVocab, a BPETokenizer or a RenumberedBPE (in its
    own numbering); ValueError for what it cannot hold (two ids for the same bytes, a
    pre-split with no Oniguruma form)."""
    if isinstance(tokenizer, CharVocab):
        return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
                "pre_tokenizer": None, "post_processor": None, "decoder": {"type": "Fuse"},
                "model": _bpe_model({c: i for i, c in enumerate(tokenizer.chars)}, [])}
    inner = getattr(tokenizer, "inner", tokenizer)                  # a RenumberedBPE's merges are its inner BPE's
    onig = next((theirs for theirs, ours in PATTERNS.items() if ours() == inner.pattern), None)
    if onig is None:
        raise ValueError("tokenizer.json: this BPE tokenizer's pre-split pattern is neither bpe.PATTERN nor GPT-2's, "
                         "the ones known in the Oniguruma dialect tokenizers needs")
    special_ids = set(tokenizer.special.values())
    strings = {i: _string(token) for i, token in enumerate(tokenizer.token_bytes) if i not in special_ids}
    vocab = {s: i for i, s in strings.items()}
    if len(vocab) != len(strings):
        first, other = next((i, vocab[s]) for i, s in strings.items() if vocab[s] != i)
        raise ValueError(f"tokenizer.json: tokens {first} and {other} are the same bytes "
                         f"{tokenizer.token_bytes[first]!r}; a tokenizer.json holds one id per string")
    merges = [[_string(inner.token_bytes[a]), _string(inner.token_bytes[b])] for a, b in inner.merges]
    split = {"type": "Split", "pattern": {"Regex": onig}, "behavior": "Isolated", "invert": False}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    if vocab.keys() & tokenizer.special.keys():
        raise ValueError(f"tokenizer.json: special tokens {sorted(vocab.keys() & tokenizer.special.keys())} are also "
                         "ordinary tokens' strings")
    vocab |= tokenizer.special            # tokenizers numbers an added token absent from the vocabulary anew
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": _added(tokenizer.special),
            "normalizer": None, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, byte_level]},
            "post_processor": None, "decoder": byte_level, "model": _bpe_model(vocab, merges)}


class RenumberedBPE:
    """A byte-level BPE whose ids are not ours (a tokenizer.json from elsewhere): our
    BPETokenizer on its merges encodes, then each id is mapped to theirs; decoding reads
    their tokens' bytes.  Same interface as BPETokenizer's encode / decode / len."""

    kind = "bpe"

    def __init__(self, inner, to_theirs, token_bytes):
        self.inner, self.to_theirs, self.token_bytes = inner, np.asarray(to_theirs, np.int64), token_bytes

    @property
    def special(self):
        """{special token: its id in this numbering}."""
        return {token: int(self.to_theirs[i]) for token, i in self.inner.special.items()}

    def __len__(self):
        return len(self.token_bytes)

    def encode(self, text):
        return self.to_theirs[self.inner.encode(text)]

    def decode(self, ids):
        ids = np.asarray(ids, dtype=np.int64).reshape(-1)
        if ids.size and not (0 <= ids.min() and ids.max() < len(self)):
            raise ValueError(f"RenumberedBPE.decode: token ids must be in 0-{len(self) - 1}, got {ids.min()}..{ids.max()}")
        return b"".join(self.token_bytes[i] for i in ids).decode("utf-8", "replace")


def read_json(path, reader):
    """The JSON object in the file at path; anything else is a ValueError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise ValueError(f"{reader}: {os.fspath(path)!r} is not UTF-8 JSON ({err})") from None
    if not isinstance(spec, dict):
        raise ValueError(f"{reader}: {os.fspath(path)!r} holds a JSON {type(spec).__name__}, expected an object")
    return spec


def read_tokenizer_json(path):
    """Our tokenizer for the tokenizer.json at path: a CharVocab, a BPETokenizer (ours,
    numbered our way), or a RenumberedBPE.  What this reader does not know, or a file
    that contradicts itself, is one ValueError naming the file."""
    spec = read_json(path, "read_tokenizer_json")
    try:
        return _tokenizer_of(spec)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as err:
        reason = f"it lacks {err}" if isinstance(err, KeyError) else str(err)
        raise ValueError(f"read_tokenizer_json: {os.fspath(path)!r} is not a tokenizer.json this reader knows: "
                         f"{reason}") from None


def _tokenizer_of(spec):
    model = spec["model"]
    if model["type"] != "BPE":
        raise ValueError(f"its model is {model['type']!r}; only BPE (byte-level, or over characters) is read")
    if spec.get("normalizer") is not None:
        raise ValueError(f"it normalizes text first ({spec['normalizer']['type']}), which this reader does not do")
    specials = {str(t["content"]): int(t["id"]) for t in spec.get("added_tokens") or []}
    if spec.get("pre_tokenizer") is None and not model["merges"]:
        if specials:
            raise ValueError("a character tokenizer (no pre-tokenizer, no merges) with added tokens")
        chars = sorted(model["vocab"], key=model["vocab"].get)
        if [model["vocab"][c] for c in chars] != list(range(len(chars))) or any(len(c) != 1 for c in chars):
            raise ValueError("a tokenizer with no merges and no pre-tokenizer must number single characters 0..n-1")
        return CharVocab(chars)
    return _byte_level_bpe(model["vocab"], model["merges"], specials, _pattern(spec["pre_tokenizer"]))


def _pattern(pre):
    """Our `re` pre-split for a byte-level pre-tokenizer: GPT-2's ByteLevel with its own
    regex, or a Split by a pattern of PATTERNS followed by ByteLevel without one."""
    steps = pre["pretokenizers"] if pre["type"] == "Sequence" else [pre]
    byte_level = steps[-1]
    if byte_level["type"] != "ByteLevel" or byte_level.get("add_prefix_space", True):
        raise ValueError("its pre-tokenizer does not end in a byte-level step without add_prefix_space")
    if len(steps) == 1 and byte_level.get("use_regex", True):
        return gpt2_pattern()
    split = steps[0]
    if (len(steps) == 2 and split["type"] == "Split" and split["behavior"] == "Isolated" and not split["invert"]
            and not byte_level.get("use_regex", True) and split["pattern"].get("Regex") in PATTERNS):
        return PATTERNS[split["pattern"]["Regex"]]()
    raise ValueError(f"its pre-tokenizer {json.dumps(pre)[:160]} is neither GPT-2's byte-level split nor ours")


def _byte_level_bpe(vocab, merges, specials, pattern):
    """Our BPETokenizer on the file's merges, renumbered to the file's ids if they differ."""
    ours = {BYTE_CHAR[b]: b for b in range(BYTES)}                     # their token string -> our id
    missing = [s for s in ours if s not in vocab]
    if missing:
        raise ValueError(f"a byte-level vocabulary must hold all 256 bytes; it lacks {missing[:5]}")
    pairs = []
    for i, merge in enumerate(merges):
        a, b = merge.split(" ") if isinstance(merge, str) else merge
        if a not in ours or b not in ours or a + b in ours or a + b not in vocab:
            raise ValueError(f"merge {i} ({a!r}, {b!r}) joins tokens not made yet, or makes one made already "
                             "or missing from the vocabulary")
        pairs.append((ours[a], ours[b]))
        ours[a + b] = BYTES + i
    inner = BPETokenizer(pairs, list(specials), pattern)
    to_theirs = [vocab[s] for s in ours] + list(specials.values())
    if to_theirs == list(range(len(to_theirs))) and len(vocab.keys() | specials.keys()) == len(to_theirs):
        return inner
    token_bytes = {i: bytes(CHAR_BYTE[c] for c in s) for s, i in vocab.items() if s not in specials} | {
        i: s.encode("utf-8") for s, i in specials.items()}
    if sorted(token_bytes) != list(range(len(token_bytes))):
        raise ValueError(f"its ids are not 0..{len(token_bytes) - 1}")
    return RenumberedBPE(inner, to_theirs, [token_bytes[i] for i in range(len(token_bytes))])
