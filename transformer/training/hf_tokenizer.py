"""Our tokenizers as Hugging Face's tokenizer.json, and tokenizer.json read back without the
`tokenizers` library.

A tokenizer.json names a model (here "BPE"), the pre-tokenizer that cuts text into chunks
before the merges (our pre-split), the added (special) tokens and a decoder.  Two kinds are
written and read:

- **byte-level BPE** (transformer/data/bpe.py): Hugging Face writes each byte as a printable
  character (GPT-2's `bytes_to_unicode`: a space is "Ġ"), a token as the string of its bytes'
  characters, and a merge as the pair of strings.  Our ids stay: bytes 0-255, merge i is
  256 + i, the specials last.  A tokenizer.json numbered otherwise (GPT-2's own, or one
  trained by `tokenizers`) reads as a BPETokenizer with its `ids` (bpe_files.byte_level_bpe,
  which reads GPT-2's vocab.json and merges.txt the same way).
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

from transformer.data.bpe import PATTERN, BPETokenizer
from transformer.data.bpe_files import as_text, byte_level_bpe, bytes_to_unicode
from transformer.data.text import CharVocab


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


def numbering(tokenizer):
    """ids[our id] = the id a BPETokenizer encodes that token to (ours, unless it has its own)."""
    return np.arange(len(tokenizer)) if tokenizer.ids is None else tokenizer.ids


def special_ids(tokenizer):
    """{special token: the id the tokenizer encodes it to}; a CharVocab has none."""
    if isinstance(tokenizer, CharVocab):
        return {}
    ids = numbering(tokenizer)
    return {token: int(ids[i]) for token, i in tokenizer.special.items()}


def to_tokenizer_json(tokenizer):
    """tokenizer.json's object for a CharVocab or a BPETokenizer (in its own numbering, if it
    has one); ValueError for what it cannot hold (two ids for the same bytes, a pre-split
    with no Oniguruma form)."""
    if isinstance(tokenizer, CharVocab):
        return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
                "pre_tokenizer": None, "post_processor": None, "decoder": {"type": "Fuse"},
                "model": _bpe_model({c: i for i, c in enumerate(tokenizer.chars)}, [])}
    onig = next((theirs for theirs, ours in PATTERNS.items() if ours() == tokenizer.pattern), None)
    if onig is None:
        raise ValueError("tokenizer.json: this BPE tokenizer's pre-split pattern is neither bpe.PATTERN nor GPT-2's, "
                         "the ones known in the Oniguruma dialect tokenizers needs")
    alphabet, ids, specials = bytes_to_unicode(), numbering(tokenizer), special_ids(tokenizer)
    vocab = {}
    for i, token in enumerate(tokenizer.token_bytes):
        text = as_text(token, alphabet)
        if text in vocab:
            raise ValueError(f"tokenizer.json: tokens {vocab[text]} and {ids[i]} are the same bytes {token!r}; "
                             "a tokenizer.json holds one id per string")
        vocab[text] = int(ids[i])
    merges = [[as_text(tokenizer.token_bytes[a], alphabet), as_text(tokenizer.token_bytes[b], alphabet)]
              for a, b in tokenizer.merges]
    split = {"type": "Split", "pattern": {"Regex": onig}, "behavior": "Isolated", "invert": False}
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    if vocab.keys() & specials.keys():
        raise ValueError(f"tokenizer.json: special tokens {sorted(vocab.keys() & specials.keys())} are also "
                         "ordinary tokens' strings")
    vocab |= specials                     # tokenizers numbers an added token absent from the vocabulary anew
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": _added(specials),
            "normalizer": None, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [split, byte_level]},
            "post_processor": None, "decoder": byte_level, "model": _bpe_model(vocab, merges)}


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
    """Our tokenizer for the tokenizer.json at path: a CharVocab, or a BPETokenizer (with
    the file's `ids` when it numbers its tokens otherwise than we do).  What this reader does not know, or a file
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
    return _byte_level_bpe(model, specials, _pattern(spec["pre_tokenizer"]))


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


def _byte_level_bpe(model, specials, pattern):
    """bpe_files.byte_level_bpe on the file's vocabulary (its added tokens included) and
    merges ("a b" or ["a", "b"]), numbered as the file numbers it (our own numbering: no ids)."""
    vocab = model["vocab"]
    clash = next((token for token, i in specials.items() if vocab.get(token, i) != i), None)
    if clash is not None:
        raise ValueError(f"the added token {clash!r} has id {specials[clash]} but {vocab[clash]} in the vocabulary")
    merges = [merge.split(" ") if isinstance(merge, str) else merge for merge in model["merges"]]
    tokenizer = byte_level_bpe(vocab | specials, merges, pattern, "its model")
    if list(tokenizer.special) != sorted(specials, key=specials.get):
        raise ValueError(f"the tokens of its vocabulary that are neither bytes nor merges, "
                         f"{list(tokenizer.special)[:5]}, are not its added tokens, {list(specials)[:5]}")
    if np.array_equal(tokenizer.ids, np.arange(len(tokenizer))):
        return BPETokenizer(tokenizer.merges, list(tokenizer.special), pattern)
    return tokenizer
