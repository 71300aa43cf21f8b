"""Character-level text data: vocabulary, split, batches, the default corpus and bad files."""

import ast
import textwrap

import numpy as np
import pytest

from transformer.data.text import CharVocab, TextDataset, _definitions, read_text, stdlib_docstrings


def test_vocab_round_trips_and_names_unknown_characters():
    vocab = CharVocab.from_text("hello, wörld")
    assert vocab.chars == sorted(set("hello, wörld")) and len(vocab) == 10
    assert vocab.decode(vocab.encode("world")) == "world"
    assert CharVocab.from_array(vocab.to_array()).chars == vocab.chars
    with pytest.raises(ValueError, match=r"not in the vocabulary: \['x', 'z'\]"):
        vocab.encode("zex")


def test_split_is_contiguous_90_10_and_batches_are_shifted_blocks():
    text = "".join(chr(ord("a") + i % 26) for i in range(1000))
    data = TextDataset(text, block_size=16)
    train, val = data.splits["train"], data.splits["val"]
    assert len(train) == 900 and len(val) == 100
    assert data.vocab.decode(train) + data.vocab.decode(val) == text
    x, y = data.batch("val", 5, np.random.default_rng(0))
    assert x.shape == y.shape == (5, 16) and x.dtype == np.int64
    np.testing.assert_array_equal(x[:, 1:], y[:, :-1])                       # targets = inputs shifted by one
    for row in x:                                                            # each block is a run of val
        start = int(np.flatnonzero((val[:-16] == row[0]) & (val[1:-15] == row[1]))[0])
        np.testing.assert_array_equal(val[start:start + 16], row)
    again = data.batch("val", 5, np.random.default_rng(0))[0]
    np.testing.assert_array_equal(x, again)                                  # seeded


def test_too_short_text_is_a_clear_error():
    with pytest.raises(ValueError, match=r"the val split has 3 tokens, fewer than block_size \+ 1 = 9"):
        TextDataset("abcdefghijklmnopqrstuvwxyz", block_size=8)
    with pytest.raises(ValueError, match="block_size must be >= 1"):
        TextDataset("abc" * 100, block_size=0)


def test_read_text_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no file at"):
        read_text(str(tmp_path / "missing.txt"))
    (tmp_path / "empty.txt").write_bytes(b"")
    with pytest.raises(ValueError, match="is empty"):
        read_text(str(tmp_path / "empty.txt"))
    (tmp_path / "binary.bin").write_bytes(bytes(range(256)))
    with pytest.raises(ValueError, match="looks binary"):
        read_text(str(tmp_path / "binary.bin"))
    (tmp_path / "latin1.txt").write_bytes("café".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8 text"):
        read_text(str(tmp_path / "latin1.txt"))
    (tmp_path / "ok.txt").write_text("Grüße\n", encoding="utf-8")
    assert read_text(str(tmp_path / "ok.txt")) == "Grüße\n"


def test_default_corpus_is_english_docstrings_in_a_fixed_order():
    text = stdlib_docstrings(limit=30_000)
    assert len(text) == 30_000 and text == stdlib_docstrings(limit=30_000)
    words = text.split()
    assert sum(w.lower() in ("the", "a", "of", "to", "is") for w in words) > 0.05 * len(words)


def test_definitions_are_ast_walks_definitions_in_its_order():
    """The corpus reader skips expressions; it must still find every definition, nested in
    classes, functions, if/try/with/match blocks, in ast.walk's breadth-first order."""
    source = textwrap.dedent('''
        """module"""
        import os
        def outer():
            """outer"""
            def inner():
                """inner"""
            f = lambda: 1
        if os.name:
            class A:
                """A"""
                async def method(self):
                    """method"""
        try:
            def in_try():
                """in try"""
        except ValueError:
            def in_handler():
                """in handler"""
        match os.sep:
            case "/":
                def in_case():
                    """in case"""
        class B:
            """B"""
            x = [y for y in range(3)]
    ''')
    tree = ast.parse(source)
    expected = [node for node in ast.walk(tree)
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
    found = list(_definitions(tree))
    assert found == expected
    assert [ast.get_docstring(node) for node in found] == [
        "module", "outer", "B", "inner", "A", "in try", "method", "in handler", "in case"]
