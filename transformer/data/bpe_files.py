"""GPT-2's tokenizer files, read and written: `vocab.json` and `merges.txt`.

GPT-2 (and every byte-level BPE after it in Hugging Face's format) writes its tokens as
text, not bytes: each of the 256 byte values has a printable stand-in character
(`bytes_to_unicode`): the printable Latin-1 bytes stand for themselves ("!" is "!"), and
the rest (control bytes, the space, ...) get the characters from U+0100 on in byte order,
so the space byte 32 is "Ġ" and " the" is written "Ġthe".

- `vocab.json`: {token written in that alphabet: id}, specials ("<|endoftext|>") included.
  GPT-2 numbers its 256 byte tokens in the alphabet's order (the printable bytes first:
  "!" is id 0), then the merges in the order learned, then the specials.
- `merges.txt`: a "#version" line, then one merge a line, "a b", in the order learned.

`load_gpt2_files` makes a BPETokenizer that encodes with those files' ids (its `ids`
numbering); `save_gpt2_files` writes any BPETokenizer so (GPT-2's numbering, unless it has
its own).  A tokenizer whose two merges spell one byte string cannot be written: the files
key tokens by their text.
"""

import json

from transformer.data.bpe import BYTES, PATTERN, BPETokenizer

MERGES_HEADER = "#version: 0.2"


def bytes_to_unicode():
    """{byte value: the character GPT-2 writes it as}."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(BYTES) if b not in printable]
    return {**{b: chr(b) for b in printable}, **{b: chr(BYTES + n) for n, b in enumerate(others)}}


def gpt2_byte_order():
    """The byte values in the order of GPT-2's ids 0-255: the printable ones first."""
    return sorted(range(BYTES), key=lambda b: ord(bytes_to_unicode()[b]))


def as_text(token, alphabet=None):
    """A token's bytes written in GPT-2's alphabet."""
    alphabet = alphabet or bytes_to_unicode()
    return "".join(alphabet[b] for b in token)


def gpt2_ids(tokenizer):
    """tokenizer's own numbering if it has one, else GPT-2's: ids[our id] = the file's id."""
    if tokenizer.ids is not None:
        return tokenizer.ids.tolist()
    byte_ids = {b: i for i, b in enumerate(gpt2_byte_order())}
    return [byte_ids[b] for b in range(BYTES)] + list(range(BYTES, len(tokenizer)))


def save_gpt2_files(tokenizer, vocab_path, merges_path):
    """Write tokenizer as GPT-2's vocab.json and merges.txt."""
    alphabet, ids = bytes_to_unicode(), gpt2_ids(tokenizer)
    texts = [as_text(token, alphabet) for token in tokenizer.token_bytes] + list(tokenizer.special)
    if len(set(texts)) != len(texts):
        twice = next(text for text in texts if texts.count(text) > 1)
        raise ValueError(f"save_gpt2_files: two tokens spell {twice!r}; vocab.json keys tokens by their text")
    with open(vocab_path, "w", encoding="utf-8") as f:
        json.dump(dict(zip(texts, ids)), f, ensure_ascii=False)
    with open(merges_path, "w", encoding="utf-8") as f:
        f.write("\n".join([MERGES_HEADER] + [f"{texts[a]} {texts[b]}" for a, b in tokenizer.merges]) + "\n")


def read_merges(merges_path):
    """The merges of merges.txt, as pairs of tokens in GPT-2's alphabet."""
    with open(merges_path, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#version")]
    pairs = [line.split(" ") for line in lines]
    bad = next((line for line, pair in zip(lines, pairs) if len(pair) != 2), None)
    if bad is not None:
        raise ValueError(f"{merges_path}: a merge is two tokens separated by one space, got {bad!r}")
    return pairs


def byte_level_bpe(vocab, merges, pattern=PATTERN, where="vocab.json and merges.txt"):
    """A BPETokenizer from a byte-level vocabulary ({token in GPT-2's alphabet: id}) and its
    merges (pairs of such tokens, in the order learned), encoding to the vocabulary's ids:
    what vocab.json and merges.txt hold, and a tokenizer.json's "model".  The specials are the
    tokens of the vocabulary that are neither a byte nor a merge, in the order of their ids."""
    alphabet = bytes_to_unicode()
    ours = {alphabet[b]: b for b in range(BYTES)}                             # token text -> our id
    pairs = []
    for a, b in merges:
        if a not in ours or b not in ours:
            raise ValueError(f"{where}: merge {len(pairs)} ({a} {b}) uses a token no earlier merge made")
        pairs.append((ours[a], ours[b]))
        ours.setdefault(a + b, BYTES + len(pairs) - 1)
    specials = sorted((token for token in vocab if token not in ours), key=vocab.get)
    missing = [token for token in ours if token not in vocab]
    if missing or len(ours) != BYTES + len(pairs):
        raise ValueError(f"{where}: the vocabulary lacks the token {missing[0]!r} of the byte alphabet or the merges"
                         if missing else f"{where}: two merges spell the same token")
    texts = sorted(ours, key=ours.get) + specials                            # in our id order
    return BPETokenizer(pairs, specials, pattern, ids=[vocab[text] for text in texts])


def load_gpt2_files(vocab_path, merges_path, pattern=PATTERN):
    """A BPETokenizer from GPT-2-format files, encoding to their ids (see byte_level_bpe)."""
    with open(vocab_path, encoding="utf-8") as f:
        vocab = json.load(f)
    return byte_level_bpe(vocab, read_merges(merges_path), pattern, f"{vocab_path} and {merges_path}")
