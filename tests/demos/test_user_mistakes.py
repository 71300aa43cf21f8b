"""A user's mistake in a demo's arguments or files is one line on stderr naming the
argument and what was expected, exit status 2, and nothing written."""

import importlib
import os
import pickle

import pytest

from demos import gpt, sample, train

TINY_GPT = ["--max-iters", "2", "--eval-every", "2", "--eval-iters", "1", "--block-size", "8", "--batch-size", "2",
            "--layers", "1", "--d-model", "16", "--heads", "2", "--sample-tokens", "2"]


def refused(main, argv, capsys, starts):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(starts), err
    return err


@pytest.mark.parametrize("content, says", [(None, "no file at"), (b"", "is empty"), (b"ab\0cd" * 10, "looks binary"),
                                           (b"\xff\xfe\xfa" * 10, "is not UTF-8"), (b"tiny", "fewer than")])
def test_gpt_data_mistakes(tmp_path, capsys, content, says):
    data = tmp_path / "corpus.txt"
    if content is not None:
        data.write_bytes(content)
    out = tmp_path / "out"
    err = refused(gpt.main, TINY_GPT + ["--data", str(data), "--out", str(out)], capsys, "demos.gpt: error: --data: ")
    assert says in err and not out.exists()


@pytest.mark.parametrize("make, says", [
    (lambda folder: os.makedirs(folder), "no checkpoint file at"),
    (lambda folder: (os.makedirs(folder), open(os.path.join(folder, "checkpoint.npz"), "wb").write(b"PK\3\4junk")),
     "truncated or corrupt"),
    (lambda folder: (os.makedirs(folder), open(os.path.join(folder, "checkpoint.npz"), "wb").write(os.urandom(64))),
     "is not a checkpoint")])
def test_gpt_resume_mistakes(tmp_path, capsys, make, says):
    folder = str(tmp_path / "run")
    make(folder)
    before = sorted(os.listdir(folder))
    err = refused(gpt.main, ["--resume", folder], capsys, "demos.gpt: error: --resume: ")
    assert says in err and sorted(os.listdir(folder)) == before


@pytest.mark.parametrize("argv, blamed, says", [
    (["--checkpoint", "{tmp}/nowhere"], "--checkpoint", "no checkpoint file at"),
    (["--checkpoint", "{tmp}/random.npz"], "--checkpoint", "is not a checkpoint"),
    (["--checkpoint", "{tmp}/truncated.npz"], "--checkpoint", "truncated or corrupt"),
    (["--nanogpt", "{tmp}/nowhere.pt", "--meta", "{tmp}/nowhere.pkl"], "--meta", "No such file"),
    (["--nanogpt", "{tmp}/random.npz", "--meta", "{tmp}/random.npz"], "--meta", ""),
    (["--nanogpt", "{tmp}/random.npz", "--meta", "{tmp}/meta.pkl"], "--nanogpt", ""),
    (["--nanogpt", "{tmp}/nowhere.pt", "--meta", "{tmp}/meta.pkl"], "--nanogpt", "no file at")])
def test_sample_checkpoint_mistakes(tmp_path, capsys, argv, blamed, says):
    (tmp_path / "random.npz").write_bytes(os.urandom(64))
    (tmp_path / "truncated.npz").write_bytes(b"PK\3\4" + os.urandom(40))
    meta = {"vocab_size": 2, "itos": {0: "a", 1: "b"}, "stoi": {"a": 0, "b": 1}}
    (tmp_path / "meta.pkl").write_bytes(pickle.dumps(meta))
    err = refused(sample.main, [a.format(tmp=tmp_path) for a in argv], capsys, f"demos.sample: error: {blamed}: ")
    assert says in err


def test_sample_prompt_outside_the_vocabulary(tmp_path, capsys):
    gpt.main(TINY_GPT + ["--data", __file__, "--out", str(tmp_path)])
    capsys.readouterr()
    snowman = "\u2603"                                               # a character this file (the corpus) lacks
    err = refused(sample.main, ["--checkpoint", str(tmp_path), "--prompt", snowman], capsys,
                  "demos.sample: error: --prompt: ")
    assert "not in the vocabulary" in err


def test_a_traceback_on_request(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("DEMOS_TRACEBACK", "1")
    with pytest.raises(SystemExit) as stop:
        gpt.main(TINY_GPT + ["--data", str(tmp_path / "nowhere.txt"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.startswith("demos.gpt: error: --data: read_text: no file at")
    assert "Traceback (most recent call last)" in err and "FileNotFoundError" in err


@pytest.mark.parametrize("main, argv, says", [
    (train.main, ["--steps", "0"], "--steps must be an integer >= 1, got 0"),
    (train.main, ["--lr", "-1"], "--lr must be > 0, got -1.0"),
    (train.main, ["--schedule", "noam", "--warmup", "0"], "--warmup must be >= 1 with the noam schedule, got 0"),
    (train.main, ["--label-smoothing", "1"], "--label-smoothing must be in [0, 1), got 1.0"),
    (train.main, ["--target", "0"], "--target must be > 0, got 0.0"),
    (train.main, ["--dropout", "2"], "--dropout must be in [0, 1), got 2.0"),
    (train.main, ["--d-model", "30", "--heads", "4"], "--d-model 30 is not divisible by --heads 4"),
    (train.main, ["--positional", "rope", "--score", "dot"], "--score dot needs positions added to the embeddings"),
    (gpt.main, ["--max-iters", "0"], "--max-iters must be an integer >= 1, got 0"),
    (gpt.main, ["--min-lr", "0.1"], "--min-lr must be in [0, lr = 0.001], got 0.1"),
    (gpt.main, ["--beta2", "1"], "--beta2 must be in [0, 1), got 1.0"),
    (gpt.main, ["--grad-clip", "0"], "--grad-clip must be > 0, got 0.0"),
    (gpt.main, ["--d-model", "30", "--heads", "4"], "--d-model 30 is not divisible by --heads 4"),
    (gpt.main, ["--layers", "0"], "--layers must be an integer >= 1, got 0")])
def test_a_flag_out_of_range_is_named_as_typed(tmp_path, capsys, main, argv, says):
    out = tmp_path / "out"
    prog = "demos.train" if main is train.main else "demos.gpt"
    err = refused(main, argv + ["--out", str(out)], capsys, f"{prog}: error: {says}")
    assert not out.exists()


@pytest.mark.parametrize("command, argv, says", [
    ("train", ["--out", "{file}"], "--out: {file} is a file; expected a folder"),
    ("gpt", ["--out", "{file}"], "--out: {file} is a file; expected a folder"),
    ("gpt", ["--data", "{tmp}", "--out", "{tmp}/out"], "--data: read_text: '{tmp}' is a folder; expected a text file"),
    ("bpe", ["--save", "{tmp}"], "--save: {tmp} is a folder; expected the path of the JSON file"),
    ("scan", ["--positional", "banana"], "argument --positional: invalid choice: 'banana'"),
    ("debug", ["demos.nosuchdemo"], "module: no module 'demos.nosuchdemo' to run")])
def test_a_path_or_name_that_cannot_be_used_is_refused_before_anything_runs(tmp_path, capsys, command, argv, says):
    file = tmp_path / "notes.txt"
    file.write_text("a file, not a folder")
    before = sorted(os.listdir(tmp_path))
    fill = {"file": str(file), "tmp": str(tmp_path)}
    main = importlib.import_module(f"demos.{command}").main
    refused(main, [a.format(**fill) for a in argv], capsys, f"demos.{command}: error: {says.format(**fill)}")
    assert sorted(os.listdir(tmp_path)) == before


def test_a_decode_input_outside_the_vocabulary_is_one_line(tmp_path, capsys):
    train.main(["--steps", "1", "--eval-every", "1", "--beam-examples", "1", "--out", str(tmp_path)])
    capsys.readouterr()
    err = refused(train.main, ["--checkpoint", str(tmp_path), "--decode", "a b z q"], capsys,
                  "demos.train: error: --decode: ")
    assert "use the task's symbols a b c d e f g h i j" in err


def test_resuming_to_a_step_already_passed_is_refused(tmp_path, capsys):
    train.main(["--steps", "2", "--eval-every", "2", "--beam-examples", "1", "--out", str(tmp_path / "t")])
    gpt.main(TINY_GPT + ["--data", __file__, "--out", str(tmp_path / "g")])
    capsys.readouterr()
    before = {name: os.path.getmtime(tmp_path / "t" / name) for name in os.listdir(tmp_path / "t")}
    refused(train.main, ["--resume", str(tmp_path / "t"), "--steps", "2"], capsys,
            "demos.train: error: --steps 2: the resumed run has trained 2 already")
    refused(gpt.main, ["--resume", str(tmp_path / "g"), "--max-iters", "1"], capsys,
            "demos.gpt: error: --max-iters 1: the resumed run has trained 2 already")
    assert before == {name: os.path.getmtime(tmp_path / "t" / name) for name in os.listdir(tmp_path / "t")}
