"""Byte-level BPE: exact round trips, the incremental trainer equal to the readable one,
the tie rule, special tokens, JSON save/load and the errors."""
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transformer.data import bpe, bpe_training
from transformer.data.bpe import END_OF_TEXT, BPETokenizer, train_reference

ENGLISH = ("Return the number of items in a container. The number is 0 when it is empty; "
           "otherwise it's the count, as in len(items) == 3.\n    Indented   lines   and\ttabs too!\n") * 8
TEXTS = {
    "english": ENGLISH,
    "unicode": "naïve café, 日本語のテキスト, emoji 🎉🎉 and Ελληνικά λέξεις; ÅÅÅ ååå " * 6,
    "repeats": "aaaaaaaaaaaaaaaaaaaaaaa aaaa aa a " * 5,             # overlapping pairs: a a a
    "digits_and_punctuation": "3.14159 + 2.71828 = 5.85987!!! ... ??? ___ 1000000 " * 5,
    "with_specials": f"first text{END_OF_TEXT}second text{END_OF_TEXT}third text" * 4,
}
TOKENIZER = bpe_training.train(ENGLISH, 256 + 1 + 60)


@pytest.mark.parametrize("name", sorted(TEXTS))
@pytest.mark.parametrize("pattern", [bpe.PATTERN, r"(?s).+"], ids=["pre-split", "whole text"])
def test_incremental_trainer_learns_the_references_merges(name, pattern):
    reference = train_reference(TEXTS[name], 256 + 1 + 80, pattern=pattern)
    fast = bpe_training.train(TEXTS[name], 256 + 1 + 80, pattern=pattern)
    assert fast.merges == reference.merges and len(fast.merges) > 10


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet="ab c\n", min_size=1, max_size=60), st.integers(257, 300))
def test_incremental_trainer_equals_the_reference_on_random_texts(text, vocab_size):
    assert bpe_training.train(text, vocab_size).merges == train_reference(text, vocab_size).merges


def test_most_frequent_pair_first_and_ties_to_the_smallest_pair():
    tokenizer = train_reference("abab ab", 256 + 1 + 1)
    assert tokenizer.merges == [(ord("a"), ord("b"))]                        # 3 times, against 'ba' twice
    tied = train_reference("cd ab", 256 + 1 + 1)                             # ' a', 'ab', 'cd': once each
    assert tied.merges == [(ord(" "), ord("a"))]
    assert bpe_training.train("cd ab", 256 + 1 + 1).merges == tied.merges


def test_training_stops_when_no_pair_is_left():
    tokenizer = bpe_training.train("ab", 1000)
    assert tokenizer.merges == [(ord("a"), ord("b"))] and len(tokenizer) == 258


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_text_round_trips_even_characters_never_seen(text):
    assert TOKENIZER.decode(TOKENIZER.encode(text)) == text


@settings(max_examples=200, deadline=None)
@given(st.binary())
def test_any_byte_string_round_trips(data):
    assert TOKENIZER.decode_bytes(TOKENIZER.encode_bytes(data)) == data


def test_encoding_uses_the_merges_and_compresses():
    ids = TOKENIZER.encode(ENGLISH)
    assert len(ids) < len(ENGLISH.encode()) / 2 and ids.dtype == np.int64
    assert TOKENIZER.encode(" the") .tolist() == [TOKENIZER.rank[pair] for pair in TOKENIZER.merges
                                                  if TOKENIZER.token_bytes[TOKENIZER.rank[pair]] == b" the"]


def test_merges_never_cross_the_pre_split():
    tokenizer = bpe_training.train("dog. dog. dog. dog.", 256 + 1 + 20)
    assert all(not (b"." in t and any(c.isalpha() for c in t.decode())) for t in tokenizer.token_bytes[256:])


def test_special_tokens_are_never_split_nor_learned_from():
    tokenizer = bpe_training.train(f"{END_OF_TEXT * 30}xy", 256 + 1 + 5)
    assert tokenizer.merges == [(ord("x"), ord("y"))]                        # nothing from '<|endoftext|>'
    eot = tokenizer.special[END_OF_TEXT]
    assert eot == len(tokenizer) - 1
    ids = tokenizer.encode(f"xy{END_OF_TEXT}xy").tolist()
    assert ids == [256, eot, 256] and tokenizer.decode(ids) == f"xy{END_OF_TEXT}xy"


def test_saved_as_json_and_loaded_back(tmp_path):
    path = tmp_path / "tokenizer.json"
    TOKENIZER.save(path)
    spec = json.loads(path.read_text())                                      # plain JSON, no pickle
    assert spec["kind"] == "byte-level BPE" and len(spec["merges"]) == len(TOKENIZER.merges)
    loaded = BPETokenizer.load(path)
    assert loaded.merges == TOKENIZER.merges and loaded.special == TOKENIZER.special
    np.testing.assert_array_equal(loaded.encode(ENGLISH), TOKENIZER.encode(ENGLISH))
    assert BPETokenizer.from_array(TOKENIZER.to_array()).merges == TOKENIZER.merges


@pytest.mark.parametrize("train", [train_reference, bpe_training.train], ids=["reference", "incremental"])
def test_training_errors(train):
    with pytest.raises(ValueError, match="non-empty str"):
        train("", 300)
    with pytest.raises(ValueError, match="vocab_size 256 is under 257"):
        train("some text", 256)


def test_use_errors(tmp_path):
    with pytest.raises(ValueError, match=r"token id 400 is outside the vocabulary \(0-316\)"):
        TOKENIZER.decode([1, 400])
    with pytest.raises(TypeError, match="expected str, got bytes"):
        TOKENIZER.encode(b"bytes")
    (tmp_path / "bad.json").write_text('{"kind": "something else"}')
    with pytest.raises(ValueError, match="not a saved byte-level BPE tokenizer"):
        BPETokenizer.load(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="uses an id not yet defined"):
        BPETokenizer([(97, 300)])
