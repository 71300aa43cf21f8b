"""demos.bpe shows what BPE learned; demos.gpt --tokenizer bpe trains on BPE tokens, saves
the tokenizer in its checkpoint, reports bits per byte, resumes, and demos.sample uses it."""
import json
import math

import pytest

from demos import bpe, gpt, sample
from tests.demos.test_user_mistakes import TINY_GPT, refused
from transformer.data.bpe import BPETokenizer


def test_bpe_demo_prints_merges_longest_tokens_compression_and_a_split(tmp_path, capsys):
    saved = tmp_path / "tok.json"
    tokenizer = bpe.main(["--data", __file__, "--vocab-size", "300", "--save", str(saved), "--sentence", "the tokenizer"])
    out = capsys.readouterr().out
    assert f"{len(tokenizer.merges)} merges learned" in out and len(tokenizer.merges) == 300 - 257
    assert "the first merges" in out and "the longest tokens: " in out and "bytes a token" in out
    assert "'the tokenizer' is" in out
    assert BPETokenizer.load(saved).merges == tokenizer.merges


@pytest.mark.parametrize("argv, says", [(["--vocab-size", "100"], "--vocab-size: BPE training: vocab_size 100 is under"),
                                        (["--data", "/nowhere.txt"], "--data: read_text: no file at")])
def test_bpe_demo_mistakes(capsys, argv, says):
    err = refused(bpe.main, argv, capsys, "demos.bpe: error: ")
    assert says in err


def test_gpt_on_bpe_tokens_reports_bits_per_byte_resumes_and_samples(tmp_path, capsys):
    argv = TINY_GPT + ["--data", __file__, "--tokenizer", "bpe", "--vocab-size", "300"]
    metrics = gpt.main(argv + ["--out", str(tmp_path)])
    assert metrics["tokenizer"] == "bpe" and metrics["vocab"] == 300
    per_byte = metrics["val_loss"] / math.log(2) / metrics["bytes_per_token"]["val"]
    assert metrics["val_bits_per_byte"] == pytest.approx(per_byte) and metrics["bytes_per_token"]["val"] > 1.3
    assert json.load(open(tmp_path / "metrics.json"))["val_bits_per_byte"] == pytest.approx(per_byte)
    capsys.readouterr()
    err = refused(gpt.main, ["--resume", str(tmp_path), "--tokenizer", "char"], capsys, "demos.gpt: error: ")
    assert "contradict the resumed run's bpe vocabulary of 300" in err
    resumed = gpt.main(["--resume", str(tmp_path), "--max-iters", "3"])
    assert resumed["iterations"] == 3 and resumed["tokenizer"] == "bpe"
    text = sample.main(["--checkpoint", str(tmp_path), "--prompt", "\u2603 any text at all", "--tokens", "5"])
    assert text.startswith("\u2603 any text at all")                # BPE spells any prompt


def test_char_gpt_refuses_a_vocab_size(tmp_path, capsys):
    err = refused(gpt.main, TINY_GPT + ["--data", __file__, "--vocab-size", "300", "--out", str(tmp_path / "o")],
                  capsys, "demos.gpt: error: --vocab-size is for --tokenizer bpe")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("data, vocab_size", [(__file__, 300), (bpe.__file__, 280)])
def test_bpe_demo_reference_trainer_learns_the_same_merges(data, vocab_size, capsys):
    """--trainer reference (the readable train_reference) prints and learns what the fast one does."""
    fast = bpe.main(["--data", data, "--vocab-size", str(vocab_size)])
    fast_out = capsys.readouterr().out
    reference = bpe.main(["--data", data, "--vocab-size", str(vocab_size), "--trainer", "reference"])
    reference_out = capsys.readouterr().out
    assert "by the reference trainer" in reference_out and "by the fast trainer" in fast_out
    assert reference.merges == fast.merges and len(fast.merges) == vocab_size - 257
    assert fast_out.split("\n", 1)[1] == reference_out.split("\n", 1)[1]      # all but the timed first line
