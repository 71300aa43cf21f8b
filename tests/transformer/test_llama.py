"""The Llama-style GPT: llama_config's block (RMSNorm, SwiGLU, RoPE, no biases, tied or untied
output), its gradients, its checkpoints and sampling, and demos.gpt --arch."""

import json
import math

import numpy as np
import pytest

import nn
from autograd import gradcheck, manual_seed
from nn import functional as F
from tests.transformer.helpers import to_float64
from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig, gpt_config, llama_config
from transformer.layers import SwiGLU
from transformer.positional import NoPositionalEncoding
from transformer.relative_position import RotaryScore
from transformer.training.checkpoints import model_from, run_state


def tiny_llama(seed=0, tie_weights=False, pairing="half", layers=2):
    manual_seed(seed)
    return DecoderOnly(llama_config(11, block_size=8, n_layer=layers, n_head=2, n_embd=8, tie_weights=tie_weights,
                                    rope_pairing=pairing, d_ff=12, attention="composed"))


@pytest.mark.parametrize("tie_weights", [False, True])
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_llama_gradcheck(tie_weights, pairing):
    model = to_float64(tiny_llama(1, tie_weights, pairing))
    for p in model.parameters():           # norm gains away from 1: a generic point
        if p.ndim == 1:
            p.data = 1 + 0.3 * np.random.default_rng(2).standard_normal(p.shape)
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 11, (2, 5)), rng.integers(0, 11, (2, 5))
    assert gradcheck(lambda *p: F.cross_entropy(model(x), y), model.parameters())


def test_llama_configuration_is_llamas_block():
    model = tiny_llama(layers=3)
    names = [name for name, _ in model.named_parameters()]
    assert not any(name.endswith("bias") for name in names)                      # no biases anywhere
    layer = model.blocks.layers[0]
    assert isinstance(layer.sublayer1.norm, nn.RMSNorm) and isinstance(model.blocks.norm, nn.RMSNorm)
    assert isinstance(layer.feed_forward, SwiGLU) and layer.feed_forward.w1.weight.shape == (12, 8)
    assert isinstance(model.positional, NoPositionalEncoding)                    # positions are in attention
    assert isinstance(layer.self_attn.score, RotaryScore) and layer.self_attn.score.base == 10000.0
    assert model.out_proj.weight is not model.embed.weight and model.out_proj.bias is None
    tied = tiny_llama(tie_weights=True)
    assert tied.out_proj.weight is tied.embed.weight
    assert llama_config(50).d_ff == 384 and llama_config(50, n_embd=64).d_ff == 192     # the 8/3 rule, to 64
    # GPT-2's init; SwiGLU's w2 writes into the residual stream, so it is scaled like the MLP's second Linear
    manual_seed(0)
    big = DecoderOnly(llama_config(50, n_layer=3, n_embd=128))
    assert abs(float(big.blocks.layers[2].feed_forward.w2.weight.data.std()) - 0.02 / math.sqrt(6)) < 0.0005
    assert abs(float(big.blocks.layers[2].feed_forward.w1.weight.data.std()) - 0.02) < 0.001


def test_gpt2_and_llama_differ_only_in_the_three_changes_and_the_biases():
    gpt, llama = gpt_config(11, 8, 2, 2, 8), llama_config(11, 8, 2, 2, 8, tie_weights=True)
    differ = {k for k, v in vars(gpt).items() if vars(llama)[k] != v}
    assert differ == {"norm", "feed_forward", "activation", "positional", "d_ff"}   # bias=False: both's default
    with pytest.raises(ValueError, match="norm must be one of"):
        DecoderOnlyConfig(vocab=5, norm="batch_norm")
    with pytest.raises(ValueError, match="feed_forward must be one of"):
        DecoderOnlyConfig(vocab=5, feed_forward="geglu")
    with pytest.raises(ValueError, match="gated by SiLU, so activation must be 'silu', got 'gelu'"):
        DecoderOnlyConfig(vocab=5, feed_forward="swiglu", activation="gelu")


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_a_llama_checkpoint_rebuilds_the_same_model_and_generates_alike_with_the_cache(tmp_path, pairing):
    model = to_float64(tiny_llama(3, pairing=pairing)).eval()
    nn.save(run_state(model), str(tmp_path / "m.npz"))
    loaded = model_from(nn.load(str(tmp_path / "m.npz"))).eval()
    assert loaded.config == model.config and json.loads(json.dumps(vars(model.config))) == vars(loaded.config)
    prompt = np.array([[1, 4, 5], [2, 6, 3]])
    cached, cached_logits = model.generate(prompt, 10, use_cache=True, return_logits=True)   # outgrows max_len 8
    plain, plain_logits = model.generate(prompt, 10, use_cache=False, return_logits=True)
    np.testing.assert_array_equal(cached, plain)
    np.testing.assert_allclose(cached_logits, plain_logits, atol=1e-10)
    np.testing.assert_array_equal(loaded.to("float64").generate(prompt, 10), cached)


def test_demos_gpt_arch_llama_trains_resumes_and_samples(tmp_path, capsys):
    from demos import gpt, sample
    small = ["--max-iters", "4", "--eval-every", "2", "--eval-iters", "1", "--block-size", "8", "--batch-size", "2",
             "--layers", "1", "--d-model", "16", "--heads", "2", "--sample-tokens", "3", "--data", __file__]
    metrics = gpt.main(small + ["--arch", "llama", "--rope-pairing", "interleaved", "--out", str(tmp_path)])
    assert metrics["arch"] == "llama" and metrics["model_config"]["rope_pairing"] == "interleaved"
    assert metrics["model_config"]["norm"] == "rms_norm" and not metrics["model_config"]["tie_weights"]
    resumed = gpt.main(["--resume", str(tmp_path), "--max-iters", "6"])
    assert resumed["arch"] == "llama" and resumed["iterations"] == 6
    text = sample.main(["--checkpoint", str(tmp_path), "--prompt", "def ", "--tokens", "5", "--top-k", "1"])
    assert text.startswith("def ") and len(text) == 9
    capsys.readouterr()
    for argv, message in ((["--resume", str(tmp_path), "--arch", "gpt2"], "--arch gpt2 contradicts the resumed run's "
                                                                          "--arch llama"),
                          (small + ["--arch", "llama", "--bias"], "--bias is not a flag of --arch llama"),
                          (small + ["--rope-base", "500"], "--rope-base is not a flag of --arch gpt2"),
                          (small + ["--arch", "llama", "--rope-base", "1"], "--rope-base must be a number > 1")):
        with pytest.raises(SystemExit) as stop:
            gpt.main(argv + ["--out", str(tmp_path / "other")])
        assert stop.value.code == 2 and message in capsys.readouterr().err
