"""Interrupt and resume (bit for bit, dropout on), the training tips behind flags, and the
bad inputs that must fail early with a clear message."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import nn
from autograd import manual_seed
from demos import train as train_cli
from nn.recipe import make_optimizer
from transformer import Transformer, TransformerConfig
from transformer.data import tasks
from transformer.attention import MultiHeadAttention
from transformer.decoding import beam_search
from transformer.families.decoder_only import DecoderOnlyConfig
from transformer.families.encoder_only import EncoderOnlyConfig
from transformer.families.vit import ViTConfig
from transformer.positional import PositionalEncoding
from transformer.training.checkpoints import run_state
from transformer.training.lm import LMTrainConfig
from transformer.training.seq2seq import TrainConfig, load_model, train

TINY = dict(d_model=16, num_heads=2, d_ff=16, num_encoder_layers=1, num_decoder_layers=1, dropout=0.1)


def _config(out, **changes):
    base = dict(task="reverse", max_len=5, batch_size=16, max_steps=12, eval_every=100, eval_size=20,
                target_accuracy=1.1, warmup=3, decay_steps=12, out_dir=str(out))
    base.update(changes)
    return TrainConfig(**base)


def test_n_steps_then_resume_equals_an_uninterrupted_run(tmp_path):
    full_model, full = train(_config(tmp_path / "full"), log=lambda s: None, **TINY)
    cut_model, cut = train(_config(tmp_path / "cut"), log=lambda s: None, should_stop=lambda step: step == 5, **TINY)
    assert cut["interrupted"] and cut["steps"] == 5
    manual_seed(999)                                   # whatever the process did since: the checkpoint decides
    resumed_model, resumed = train(_config(tmp_path / "cut"), log=lambda s: None, resume=str(tmp_path / "cut"))
    assert resumed["history"]["loss"] == full["history"]["loss"]          # every loss, bit for bit
    for (name, a), (_, b) in zip(full_model.named_parameters(), resumed_model.named_parameters()):
        np.testing.assert_array_equal(a.data, b.data, err_msg=name)


def test_ctrl_c_writes_everything_and_exits_130(tmp_path):
    script = (f"import sys; sys.argv = ['train', '--task', 'copy', '--steps', '100000', '--max-len', '4', "
              f"'--d-model', '16', '--heads', '2', '--d-ff', '16', '--layers', '1', '--eval-every', '100000', "
              f"'--out', {str(tmp_path)!r}]\nfrom demos import train\ntrain.main()")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    for line in proc.stdout:                            # wait until it is training
        if line.startswith("training a Transformer"):
            break
    import time
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    output = proc.stdout.read()
    assert proc.wait(timeout=60) == 130
    assert "Resume with:" in output and f"--resume {tmp_path}" in output
    saved = nn.load(str(tmp_path / "checkpoint.npz"))
    history = json.loads(str(saved["history"]))
    assert history["interrupted"] and len(history["step"]) >= 1
    assert (tmp_path / "loss.png").exists() and json.load(open(tmp_path / "metrics.json"))["interrupted"]


def test_periodic_checkpoints_keep_the_last_k_and_the_best(tmp_path):
    train(_config(tmp_path, max_steps=10, save_every=2, keep_last=2, eval_every=2), log=lambda s: None, **TINY)
    names = sorted(os.listdir(tmp_path))
    assert [n for n in names if n.startswith("step-")] == ["step-10.npz", "step-8.npz"]
    assert "best.npz" in names and "checkpoint.npz" in names
    averaged = nn.average_checkpoints([str(tmp_path / "step-8.npz"), str(tmp_path / "step-10.npz")])
    assert set(averaged) == set(load_model(str(tmp_path)).state_dict())


def test_noam_schedule_peaks_at_lr_after_warmup():
    manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab=5, tgt_vocab=5, **TINY))
    optimizer, schedule = make_optimizer(model.parameters(), 1e-3, 4, 100, "noam", 16)
    lrs = []
    for _ in range(12):
        lrs.append(optimizer.param_groups[0]["lr"])
        schedule.step()
    assert max(lrs) == pytest.approx(1e-3) and int(np.argmax(lrs)) == 3
    assert lrs[11] == pytest.approx(1e-3 * (4 / 12) ** 0.5)            # then 1 / sqrt(step)
    with pytest.raises(ValueError, match="schedule must be 'cosine' or 'noam'"):
        make_optimizer(model.parameters(), 1e-3, 4, 100, "step")


def test_decode_your_own_input(tmp_path, capsys):
    train(_config(tmp_path, max_steps=2), log=lambda s: None, **TINY)
    result = train_cli.main(["--checkpoint", str(tmp_path), "--decode", "a b c"])
    assert len(result["plots"]) == 3 and all(os.path.exists(p) for p in result["plots"])
    assert "greedy:" in capsys.readouterr().out
    with pytest.raises(SystemExit) as stop:
        train_cli.main(["--checkpoint", str(tmp_path), "--decode", "a z"])
    assert stop.value.code == 2 and "--decode: use the task's symbols" in capsys.readouterr().err


# ----- bad inputs: each fails before any state exists, saying what was wrong -----

@pytest.mark.parametrize("kwargs,message", [
    (dict(d_model=8, num_heads=0), "MultiHeadAttention: num_heads must be an integer >= 1, got 0"),
    (dict(d_model=8, num_heads=-2), "num_heads must be an integer >= 1, got -2"),
    (dict(d_model=0, num_heads=2), "d_model must be an integer >= 1, got 0"),
])
def test_attention_sizes(kwargs, message):
    with pytest.raises(ValueError, match=message):
        MultiHeadAttention(**kwargs)


@pytest.mark.parametrize("make,message", [
    (lambda: TransformerConfig(src_vocab=0, tgt_vocab=5), "src_vocab must be an integer >= 1, got 0"),
    (lambda: TransformerConfig(src_vocab=5, tgt_vocab=5, d_model=0), "d_model must be an integer >= 1"),
    (lambda: TransformerConfig(src_vocab=5, tgt_vocab=5, num_heads=3), "d_model=64 is not divisible by num_heads=3"),
    (lambda: TransformerConfig(src_vocab=5, tgt_vocab=5, dtype="float16"), "dtype must be one of"),
    (lambda: DecoderOnlyConfig(vocab=5, num_heads=0), "num_heads must be an integer >= 1"),
    (lambda: EncoderOnlyConfig(vocab=5, dropout=1.0), r"dropout must be in \[0, 1\)"),
    (lambda: ViTConfig(patch_size=0), "patch_size must be an integer >= 1"),
    (lambda: TrainConfig(max_steps=0), "max_steps must be an integer >= 1, got 0"),
    (lambda: TrainConfig(eval_every=0), "eval_every must be an integer >= 1, got 0"),
    (lambda: TrainConfig(batch_size=0), "batch_size must be an integer >= 1, got 0"),
    (lambda: TrainConfig(min_len=5, max_len=3), "min_len 5 is greater than max_len 3"),
    (lambda: TrainConfig(schedule="linear"), "schedule must be 'cosine' or 'noam'"),
    (lambda: LMTrainConfig(batch_size=0), "batch_size must be an integer >= 1"),
    (lambda: DecoderOnlyConfig(vocab=5, attention="flash"), r"attention must be one of \('composed', 'fused'\), got 'flash'"),
])
def test_bad_configs(make, message):
    with pytest.raises(ValueError, match=message):
        make()


@pytest.mark.parametrize("src_batch,tgt_batch", [(1, 2), (2, 1), (2, 3)])
def test_source_and_target_batches_must_match(src_batch, tgt_batch):
    manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab=6, tgt_vocab=6, **TINY))
    with pytest.raises(ValueError, match=rf"source batch \({src_batch}, 4\) and target batch \({tgt_batch}, 3\) differ"):
        model(np.ones((src_batch, 4), dtype=np.int64), np.ones((tgt_batch, 3), dtype=np.int64))


def test_beam_size_zero_and_resume_of_a_foreign_checkpoint(tmp_path):
    manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab=6, tgt_vocab=6, **TINY))
    with pytest.raises(ValueError, match="beam_size must be an integer >= 1, got 0"):
        beam_search(model, np.ones((1, 3), dtype=np.int64), 4, tasks.BOS, tasks.EOS, beam_size=0)
    nn.save({"model": model.state_dict()}, str(tmp_path / "checkpoint.npz"))
    with pytest.raises(ValueError, match="is not a training checkpoint"):
        train(_config(tmp_path), resume=str(tmp_path))
    nn.save(run_state(model), str(tmp_path / "checkpoint.npz"))      # a model alone: no run to go on with
    with pytest.raises(ValueError, match="lacks optimizer, schedule, train_config, stream_rng, dropout_rng, history"):
        train(_config(tmp_path), resume=str(tmp_path))


def test_dtype_option_makes_every_parameter_and_buffer_that_dtype():
    manual_seed(0)
    model = Transformer(TransformerConfig(src_vocab=6, tgt_vocab=6, dtype="float64", **TINY))
    assert {p.dtype for p in model.parameters()} == {np.dtype(np.float64)}
    x = model(np.ones((2, 4), dtype=np.int64), np.ones((2, 3), dtype=np.int64))
    assert x.dtype == np.float64
    table = PositionalEncoding(8, 16)                # built in float64, cast to the input's dtype
    from transformer.positional import sinusoidal_table
    np.testing.assert_array_equal(table.table, sinusoidal_table(16, 8))
