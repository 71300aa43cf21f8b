"""The demos' flags come from the configs (every default lives once), and a resumed run
refuses a flag that contradicts it, in one line, with exit status 2, writing nothing."""

import dataclasses
import os
import runpy
import sys

import numpy as np
import pytest

from autograd import Tensor
from demos import gpt, train
from demos._flags import command_line, integer_at_least, number
from transformer.encoder_decoder import TransformerConfig
from transformer.families.decoder_only import gpt_config
from transformer.layers import FeedForward
from transformer.training.lm import LMTrainConfig
from transformer.training.seq2seq import TrainConfig, load_model

SMALL = ["--task", "copy", "--steps", "4", "--max-len", "4", "--d-model", "16", "--heads", "2", "--d-ff", "16",
         "--layers", "1", "--eval-every", "2", "--beam-examples", "2"]


def test_flags_left_out_take_the_configs_defaults():
    cfg, model_fields = train.configs(train.parse_args([]))
    assert cfg == TrainConfig(out_dir=os.path.join("runs", TrainConfig.task)) and model_fields == {}
    args = train.parse_args(["--steps", "7", "--heads", "2", "--layers", "3", "--no-norm-first"])
    cfg, model_fields = train.configs(args)
    assert cfg.max_steps == 7 and cfg.lr == TrainConfig.lr
    assert model_fields == {"num_heads": 2, "num_encoder_layers": 3, "num_decoder_layers": 3, "norm_first": False}


@pytest.mark.parametrize("module, config, field, flag", [
    (train, TrainConfig, "lr", "--lr"), (train, TransformerConfig, "d_ff", "--d-ff"),
    (gpt, LMTrainConfig, "max_iters", "--max-iters")])
def test_help_shows_each_default_from_its_config(module, config, field, flag, capsys):
    with pytest.raises(SystemExit):
        module.parse_args(["--help"])
    shown = " ".join(capsys.readouterr().out.split())
    default = {f.name: f.default for f in dataclasses.fields(config)}[field]
    assert f"{flag} " in shown and f"(default: {default})" in shown


def test_gpt_model_flags_are_gpt_configs_parameters():
    args = gpt.parse_args(["--layers", "2", "--d-model", "32", "--attention", "composed"])
    assert gpt.given(args, gpt.MODEL_FLAGS) == {"n_layer": 2, "n_embd": 32, "attention": "composed"}
    config = gpt_config(10, **gpt.given(args, gpt.MODEL_FLAGS))
    assert (config.num_layers, config.d_model, config.attention, config.num_heads) == (2, 32, "composed", 4)


@pytest.mark.parametrize("activation", ["relu", "silu", "gelu_tanh"])
def test_gpt_takes_an_activation_and_llama_refuses_one(activation, capsys):
    args = gpt.parse_args(["--activation", activation])
    assert gpt_config(10, **gpt.given(args, gpt.MODEL_FLAGS)).activation == activation
    with pytest.raises(SystemExit) as stop:
        gpt.main(["--arch", "llama", "--activation", activation])
    assert stop.value.code == 2
    assert capsys.readouterr().err.strip() == "demos.gpt: error: --activation is not a flag of --arch llama"


def test_resume_refuses_a_contradicting_flag_in_one_line(tmp_path, capsys):
    train.main(SMALL + ["--out", str(tmp_path)])
    capsys.readouterr()
    before = {name: os.path.getmtime(tmp_path / name) for name in os.listdir(tmp_path)}
    for flag, value, field in (("--d-model", "128", "d_model"), ("--lr", "0.5", "lr"), ("--layers", "2",
                                                                                         "num_encoder_layers")):
        with pytest.raises(SystemExit) as stop:
            train.main(["--resume", str(tmp_path), flag, value])
        assert stop.value.code == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1
        assert err.startswith(f"demos.train: error: {flag} {value} contradicts the resumed run's {field}")
    assert {name: os.path.getmtime(tmp_path / name) for name in os.listdir(tmp_path)} == before
    metrics = train.main(["--resume", str(tmp_path), "--steps", "6", "--d-model", "16"])   # agrees: allowed
    assert metrics["steps"] == 6


def test_decode_names_the_kind_of_checkpoint_it_found(tmp_path, capsys):
    gpt.main(["--max-iters", "2", "--eval-every", "2", "--eval-iters", "1", "--block-size", "8", "--batch-size", "2",
              "--layers", "1", "--d-model", "16", "--heads", "2", "--sample-tokens", "2", "--out", str(tmp_path),
              "--data", __file__])
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        train.main(["--checkpoint", str(tmp_path), "--decode", "a b"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "holds a GPT, decoder-only (written by demos.gpt); this needs an encoder-decoder Transformer" in err
    with pytest.raises(SystemExit) as stop:
        gpt.main(["--resume", str(tmp_path), "--d-model", "32"])
    assert stop.value.code == 2
    assert "--d-model 32 contradicts the resumed run's d_model = 16" in capsys.readouterr().err


def _commands():
    """Every `python -m demos...` command: the demos and benchmarks with a command line."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for folder in ("demos", os.path.join("demos", "bench")):
        for name in sorted(os.listdir(os.path.join(root, folder))):
            path = os.path.join(root, folder, name)
            text = open(path).read() if name.endswith(".py") and not name.startswith("_") else ""
            if "argparse" in text or "command_line(" in text:
                yield folder.replace(os.sep, ".") + "." + name[:-3]


@pytest.mark.parametrize("command", list(_commands()))
def test_help_names_the_command_a_user_types(command, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [command, "--help"])
    monkeypatch.delitem(sys.modules, command, raising=False)          # run afresh, as `python -m` does
    with pytest.raises(SystemExit) as leaving:
        runpy.run_module(command, run_name="__main__")
    assert leaving.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: {command} ")


@pytest.mark.parametrize("command", list(_commands()))
def test_a_mistyped_flag_is_one_line_naming_the_command(command, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", [command, "--no-such-flag"])
    monkeypatch.delitem(sys.modules, command, raising=False)
    with pytest.raises(SystemExit) as leaving:
        runpy.run_module(command, run_name="__main__")
    err = capsys.readouterr().err
    assert leaving.value.code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"{command}: error: ") and err.endswith(f"(python -m {command} --help lists the flags)\n")
    assert "--no-such-flag" in err or "required" in err            # demos.debug first asks for its module


@pytest.mark.parametrize("flag_type, text, says", [
    (integer_at_least(1), "0", "must be an integer >= 1, got 0"),
    (integer_at_least(0), "-1", "must be an integer >= 0, got -1"),
    (integer_at_least(1), "x", "invalid integer value: 'x'"),
    (number(lambda p: 0 <= p < 1, "in [0, 1)"), "1", "must be in [0, 1), got 1.0")])
def test_a_value_out_of_range_is_refused_as_it_is_parsed(flag_type, text, says, capsys):
    parser = command_line("demos.example", "")
    parser.add_argument("--count", type=flag_type)
    with pytest.raises(SystemExit):
        parser.parse_args(["--count", text])
    assert capsys.readouterr().err.startswith(f"demos.example: error: argument --count: {says} (")
    assert parser.parse_args(["--count", "1" if text != "1" else "0.5"]).count in (1, 0.5)


@pytest.mark.parametrize("argv, says", [
    (["-b", "autograd/nothere.py:f", "demos.tour"], "-b autograd/nothere.py:f: cannot read autograd/nothere.py: "),
    (["-b", "autograd/engine.py:no_such_fn", "demos.tour"], "autograd/engine.py defines no function 'no_such_fn'"),
    (["-b", "autograd/engine.py:run_backward:zzz", "demos.tour"], "no line of run_backward in autograd/engine.py holds"),
    (["-b", "autograd/engine.py:99999", "demos.tour"], "-b autograd/engine.py:99999: cannot set that breakpoint"),
    (["demos.tour"], "-b: no breakpoint given, so nothing would stop the demo")])
def test_a_breakpoint_demos_debug_cannot_set_is_one_line_and_status_2(argv, says, capsys):
    from demos import debug
    with pytest.raises(SystemExit) as leaving:
        debug.main(argv)
    err = capsys.readouterr().err
    assert leaving.value.code == 2 and len(err.splitlines()) == 1 and err.startswith("demos.debug: error: ")
    assert says in err, err


@pytest.mark.parametrize("activation", sorted(FeedForward.ACTIVATIONS))
def test_train_takes_each_feed_forward_activation(activation, tmp_path):
    """--activation offers every FeedForward.ACTIVATIONS (one added there is a choice here),
    and the model trained has it in each feed-forward."""
    assert train.configs(train.parse_args(["--activation", activation]))[1] == {"activation": activation}
    metrics = train.main([*SMALL, "--activation", activation, "--out", str(tmp_path)])
    assert metrics["model_config"]["activation"] == activation
    built = load_model(str(tmp_path))
    layers = [m for m in built.modules() if isinstance(m, FeedForward)]
    x = Tensor(np.linspace(-3, 3, 13))
    outputs = {name: make()(x).data for name, make in FeedForward.ACTIVATIONS.items()}      # each its own curve
    assert layers and all(np.array_equal(m.activation(x).data, outputs[activation]) for m in layers)
    assert not any(np.array_equal(outputs[activation], y) for name, y in outputs.items() if name != activation)
