"""BPE in the ecosystem's formats: GPT-2's vocab.json and merges.txt (equal to tiktoken on
the same ranks), streaming encode in bounded memory, the two tie-break rules, and counting
in worker processes."""

import io
import itertools
import json
import random
import re
import tracemalloc

import numpy as np
import pytest

from tests.transformer.test_bpe import TEXTS
from transformer.data import bpe_training
from transformer.data.bpe import END_OF_TEXT, PATTERN, BPETokenizer, train_reference
from transformer.data.bpe_files import bytes_to_unicode, gpt2_byte_order, load_gpt2_files, save_gpt2_files

CORPUS = "".join(TEXTS.values())
TOKENIZER = bpe_training.train(CORPUS, 256 + 1 + 150)


def random_unicode(rng, length):
    """A string mixing ASCII, Latin-1, other scripts, marks, digits of other scripts, every
    kind of space and the end-of-text token: the pieces where a pre-split could differ."""
    pools = [lambda: chr(rng.randint(32, 126)), lambda: chr(rng.randint(0, 0x2FFF)),
             lambda: rng.choice(" \n\t\u00a0\u2003\r"), lambda: chr(rng.randint(0x300, 0x36F)),
             lambda: rng.choice("١٢٣²½Ⅻ_'"), lambda: chr(rng.randint(0xE000, 0x10FFFF)),
             lambda: END_OF_TEXT if rng.random() < 0.2 else "s"]
    text = "".join(rng.choice(pools)() for _ in range(length))
    return "".join(c for c in text if not 0xD800 <= ord(c) <= 0xDFFF)


def explicit_class(character_class, alphabet):
    """The characters Python's re puts in `character_class`, as ranges \\x{..}-\\x{..}."""
    points = [ord(m.group()) for m in re.finditer(character_class, alphabet)]
    ranges, start = [], points[0]
    for point, following in zip(points, points[1:] + [None]):
        if following != point + 1:
            ranges.append(f"\\x{{{start:X}}}" + (f"-\\x{{{point:X}}}" if point != start else ""))
            start = following
    return "".join(ranges)


def tiktoken_pattern():
    """PATTERN in tiktoken's regex dialect, each class spelled out as the code points
    Python's re gives it: the two engines read \\w, \\d and \\s by other tables (Python's
    \\w holds every numeric character, e.g. "²"; Rust's only decimal digits), and the test
    is of the BPE, not of the engines' Unicode tables."""
    alphabet = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    letter, digit, word, space = (explicit_class(c, alphabet) for c in (r"[^\W\d_]", r"\d", r"\w", r"\s"))
    assert PATTERN == r"""'(?:s|t|re|ve|m|ll|d)| ?[^\W\d_]+| ?\d+| ?(?:[^\s\w]|_)+|\s+(?!\S)|\s+"""
    return (rf"""'(?:s|t|re|ve|m|ll|d)| ?[{letter}]+| ?[{digit}]+| ?(?:[^{space}{word}]|_)+|[{space}]+(?![^{space}])"""
            rf"""|[{space}]+""")


@pytest.fixture(scope="module")
def gpt2_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gpt2")
    save_gpt2_files(TOKENIZER, folder / "vocab.json", folder / "merges.txt")
    return folder / "vocab.json", folder / "merges.txt"


def test_the_byte_alphabet_is_gpt2s():
    alphabet = bytes_to_unicode()
    assert len(set(alphabet.values())) == 256 and all(c.isprintable() and not c.isspace() for c in alphabet.values())
    assert (alphabet[ord(" ")], alphabet[ord("\n")], alphabet[0], alphabet[ord("!")]) == ("Ġ", "Ċ", "Ā", "!")
    assert gpt2_byte_order()[:3] == [ord("!"), ord('"'), ord("#")] and gpt2_byte_order()[-1] == 173


def test_gpt2_files_are_gpt2s_layout_and_load_back_to_the_same_tokenizer(gpt2_files):
    vocab_path, merges_path = gpt2_files
    vocab = json.loads(vocab_path.read_text(encoding="utf-8"))
    lines = merges_path.read_text(encoding="utf-8").splitlines()
    assert vocab["!"] == 0 and vocab["Ġ"] == 220 and vocab[END_OF_TEXT] == len(TOKENIZER) - 1   # GPT-2's numbering
    assert lines[0] == "#version: 0.2" and len(lines) == 1 + len(TOKENIZER.merges)
    first = TOKENIZER.merges[0]
    alphabet = bytes_to_unicode()
    assert lines[1] == f"{alphabet[first[0]]} {alphabet[first[1]]}" and vocab["".join(lines[1].split())] == 256
    loaded = load_gpt2_files(vocab_path, merges_path)
    assert loaded.merges == TOKENIZER.merges and len(loaded) == len(TOKENIZER)
    for text in TEXTS.values():
        ids = loaded.encode(text)
        assert loaded.decode(ids) == text
        our_ids = TOKENIZER.encode(text)
        np.testing.assert_array_equal(ids, loaded.ids[our_ids])             # the same tokens, GPT-2's ids
    assert BPETokenizer.from_array(loaded.to_array()).encode(CORPUS).tolist() == loaded.encode(CORPUS).tolist()
    again = vocab_path.parent / "again"
    again.mkdir()
    save_gpt2_files(loaded, again / "vocab.json", again / "merges.txt")       # keeps its own ids
    assert json.loads((again / "vocab.json").read_text(encoding="utf-8")) == vocab


def test_files_with_another_numbering_encode_to_their_ids(tmp_path):
    alphabet = sorted(bytes_to_unicode().values(), reverse=True)
    vocab = {"ĠĠ": 0, "<|pad|>": 1, END_OF_TEXT: 2, "ĠĠĠĠ": 3, **{t: 4 + i for i, t in enumerate(alphabet)}}
    (tmp_path / "merges.txt").write_text("#version: 0.2\nĠ Ġ\nĠĠ ĠĠ\n", encoding="utf-8")
    (tmp_path / "vocab.json").write_text(json.dumps({**vocab, "ĠĠĠĠ": 300}), encoding="utf-8")
    with pytest.raises(ValueError, match="must number the 260 tokens 0..259, each once; got 260 ids from 0 to 300"):
        load_gpt2_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    (tmp_path / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    tokenizer = load_gpt2_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    assert list(tokenizer.special) == ["<|pad|>", END_OF_TEXT]                   # in the order of their ids
    expected = [3, vocab["Ġ"], vocab["a"], 1]                 # 4 spaces (two merges), then the one before a
    assert tokenizer.encode("     a<|pad|>").tolist() == expected
    assert tokenizer.encode("  ").tolist() == [0]
    assert tokenizer.decode(expected + [2]) == "     a<|pad|>" + END_OF_TEXT
    with pytest.raises(ValueError, match="token id 260 is outside"):
        tokenizer.decode([260])
    (tmp_path / "merges.txt").write_text("#version: 0.2\nĠĠ ĠĠ\n", encoding="utf-8")
    with pytest.raises(ValueError, match="uses a token no earlier merge made"):
        load_gpt2_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    (tmp_path / "merges.txt").write_text("#version: 0.2\nĠ Ġ Ġ\n", encoding="utf-8")
    with pytest.raises(ValueError, match="two tokens separated by one space"):
        load_gpt2_files(tmp_path / "vocab.json", tmp_path / "merges.txt")


def test_a_tokenizer_whose_merges_spell_one_string_twice_cannot_be_written(tmp_path):
    twice = BPETokenizer([(97, 98), (98, 99), (256, 99), (97, 257)])         # ab, bc, (ab)c, a(bc): "abc" twice
    with pytest.raises(ValueError, match="two tokens spell 'abc'"):
        save_gpt2_files(twice, tmp_path / "v.json", tmp_path / "m.txt")
    vocab = {**{c: i for i, c in enumerate(sorted(bytes_to_unicode().values()))}, "ab": 256, "bc": 257, "abc": 258}
    (tmp_path / "v.json").write_text(json.dumps(vocab), encoding="utf-8")
    (tmp_path / "m.txt").write_text("a b\nb c\nab c\na bc\n", encoding="utf-8")
    with pytest.raises(ValueError, match="two merges spell the same token"):
        load_gpt2_files(tmp_path / "v.json", tmp_path / "m.txt")


def test_encoding_from_gpt2_files_equals_tiktokens_on_the_same_ranks(gpt2_files):
    tiktoken = pytest.importorskip("tiktoken")
    loaded = load_gpt2_files(*gpt2_files)
    ranks = {bytes(token): int(loaded.ids[i]) for i, token in enumerate(loaded.token_bytes)}
    specials = {token: int(loaded.ids[i]) for token, i in loaded.special.items()}
    encoding = tiktoken.Encoding("trained-here", pat_str=tiktoken_pattern(), mergeable_ranks=ranks,
                                 special_tokens=specials)
    rng = random.Random(0)
    texts = [random_unicode(rng, rng.randint(0, 30)) for _ in range(10_000)] + list(TEXTS.values()) + [CORPUS]
    for text in texts:
        assert loaded.encode(text).tolist() == encoding.encode(text, allowed_special="all"), repr(text)


# ----- streaming -----

@pytest.mark.parametrize("seed", range(4))
def test_encode_iterable_gives_encodes_ids_however_the_text_is_cut(seed):
    rng = random.Random(seed)
    for _ in range(300):
        text = random_unicode(rng, rng.randint(0, 60))
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 12))))
        pieces = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
        assert list(TOKENIZER.encode_iterable(pieces)) == TOKENIZER.encode(text).tolist(), repr(pieces)
    assert list(TOKENIZER.encode_iterable(io.StringIO(CORPUS))) == TOKENIZER.encode(CORPUS).tolist()
    assert list(TOKENIZER.encode_iterable([])) == []


def test_encode_iterable_refuses_what_it_could_cut_wrong():
    with pytest.raises(ValueError, match="pre-split PATTERN and special tokens without whitespace"):
        list(BPETokenizer([], pattern=r"(?s).+").encode_iterable(["a b"]))
    with pytest.raises(ValueError, match="without whitespace"):
        list(BPETokenizer([], special_tokens=("<end of text>",)).encode_iterable(["a b"]))


def test_encode_iterable_streams_a_20_mb_file_in_bounded_memory(tmp_path):
    """A 20 MB file of long words (a tokenizer trained on them makes each a token or two, so
    that the test's time goes to reading and cutting, not to yielding millions of ids)."""
    rng = np.random.default_rng(0)
    words = ["".join(rng.choice(list("abcdefghijklmnopqrstuvwxyzé"), rng.integers(60, 120))) for _ in range(12)]
    words += ["\n", "\n\n", "  ", END_OF_TEXT, "it's", "42"]
    tokenizer = bpe_training.train(" ".join(words[:12]) * 2, 256 + 1 + 1200)
    path = tmp_path / "big.txt"
    with open(path, "w", encoding="utf-8") as f:
        while f.tell() < 20_000_000:
            f.write(" ".join(rng.choice(words, 10_000)))
    expected = tokenizer.encode(path.read_text(encoding="utf-8"))
    tracemalloc.start()
    try:
        with open(path, encoding="utf-8") as f:
            baseline = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            stream, done, equal = tokenizer.encode_iterable(f), 0, True
            while block := list(itertools.islice(stream, 1 << 12)):          # compared a block at a time
                equal = equal and block == expected[done:done + len(block)].tolist()
                done += len(block)
            peak = tracemalloc.get_traced_memory()[1] - baseline
    finally:
        tracemalloc.stop()
    assert equal and done == len(expected)
    assert peak < 4_000_000, f"streaming held {peak / 1e6:.1f} MB above the tokenizer's own"


# ----- training: the tie-break rules and worker processes -----

@pytest.mark.parametrize("tie_break", ["ids", "bytes"])
@pytest.mark.parametrize("name", sorted(TEXTS))
def test_both_trainers_learn_the_same_merges_under_each_tie_break(name, tie_break):
    fast = bpe_training.train(TEXTS[name], 256 + 1 + 80, tie_break=tie_break)
    assert fast.merges == train_reference(TEXTS[name], 256 + 1 + 80, tie_break=tie_break).merges


def test_the_tie_breaks_pick_the_smallest_ids_or_the_greatest_bytes():
    text = "ab\nzy\nab\nzy"                            # (a, b) and (z, y) occur twice each, nothing else does
    assert bpe_training.train(text, 256 + 1 + 1, tie_break="ids").merges == [(97, 98)]
    assert bpe_training.train(text, 256 + 1 + 1, tie_break="bytes").merges == [(122, 121)]
    # among merged tokens, bytes compares their byte strings, not their ids
    text = "ab ab ab ab zz zz zz xab xab zzq zzq"
    by_bytes = bpe_training.train(text, 256 + 1 + 4, tie_break="bytes").merges
    assert by_bytes == train_reference(text, 256 + 1 + 4, tie_break="bytes").merges
    with pytest.raises(ValueError, match="tie_break must be one of"):
        bpe_training.train(text, 300, tie_break="random")


@pytest.mark.parametrize("workers", [2, 3])
def test_counting_in_worker_processes_learns_the_same_merges(workers):
    text = CORPUS * 3
    assert bpe_training.train(text, 256 + 1 + 120, workers=workers).merges == \
        bpe_training.train(text, 256 + 1 + 120).merges
    assert bpe_training.parallel_chunk_counts(text, PATTERN, (END_OF_TEXT,), workers) == \
        bpe_training.chunk_counts(text, PATTERN, (END_OF_TEXT,))
    with pytest.raises(ValueError, match="workers > 1"):
        bpe_training.train(text, 300, pattern=r"\S+", workers=workers)
