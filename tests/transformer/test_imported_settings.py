"""The settings an imported model brings (norm_eps, rope_scaling, qkv_bias) as config fields of
our own model: gradients checked, RoPE's scaled frequencies against their definition
element by element, every bad value refused by name."""
import math

import numpy as np
import pytest

from autograd import gradcheck, manual_seed
from nn import functional as F
from tests.transformer.helpers import to_float64
from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig, llama_config
from transformer.relative_position import rope_frequencies

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}
SETTINGS = [{"qkv_bias": True, "norm_eps": 1e-6}, {"rope_scaling": LLAMA3, "num_kv_heads": 1},
            {"rope_scaling": {"rope_type": "linear", "factor": 3.0}, "norm_eps": 0.3, "tie_weights": True}]


def tiny(seed, layers=2, **settings):
    manual_seed(seed)
    config = llama_config(11, block_size=8, n_layer=layers, n_head=2, n_embd=8, d_ff=12)
    return DecoderOnly(DecoderOnlyConfig(**{**config.__dict__, **settings}))


@pytest.mark.parametrize("seed, settings", list(enumerate(SETTINGS)), ids=str)
def test_gradcheck_with_the_imported_settings(seed, settings):
    model = to_float64(tiny(seed, layers=1, **settings))
    rng = np.random.default_rng(seed)
    for p in model.parameters():                       # gains away from 1, biases away from 0: a generic point
        if p.ndim == 1:
            p.data = 0.5 + rng.standard_normal(p.shape)
    x, y = rng.integers(0, 11, (2, 5)), rng.integers(0, 11, (2, 5))
    assert gradcheck(lambda *p: F.cross_entropy(model(x), y), model.parameters())


def test_qkv_bias_puts_biases_on_q_k_v_only_and_norm_eps_reaches_every_norm():
    model = tiny(0, qkv_bias=True, norm_eps=1e-6)
    biased = sorted(name.split(".", 3)[3] for name, _ in model.named_parameters() if name.endswith("bias"))
    assert biased == sorted(f"self_attn.{x}_proj.bias" for x in "qkv" for _ in range(2))
    norms = [m for name, m in model.named_modules() if name.endswith("norm")]
    assert len(norms) == 5 and all(norm.eps == 1e-6 for norm in norms)


def llama3_by_definition(frequency, factor, low, high, original):
    """One frequency as Meta's Llama 3.1 reference code scales it."""
    wavelength = 2 * math.pi / frequency
    if wavelength < original / high:
        return frequency
    if wavelength > original / low:
        return frequency / factor
    smooth = (original / wavelength - low) / (high - low)
    return (1 - smooth) * frequency / factor + smooth * frequency


@pytest.mark.parametrize("d, base, original", [(8, 10000.0, 16), (64, 500000.0, 8192), (32, 500.0, 40), (128, 1e6, 64)])
def test_rope_frequencies_scaled_as_defined(d, base, original):
    plain = [base ** (-2 * i / d) for i in range(d // 2)]
    np.testing.assert_allclose(rope_frequencies(d, base), plain, rtol=1e-12)
    np.testing.assert_allclose(rope_frequencies(d, base, {"rope_type": "linear", "factor": 2.5}),
                               np.array(plain) / 2.5, rtol=1e-12)
    scaling = {**LLAMA3, "original_max_position_embeddings": original, "factor": 32.0}
    expected = [llama3_by_definition(f, 32.0, 1.0, 4.0, original) for f in plain]
    np.testing.assert_allclose(rope_frequencies(d, base, scaling), expected, rtol=1e-12)
    assert len({a == b for a, b in zip(expected, plain)}) == 2 or d == 8      # some pairs scaled, some kept


@pytest.mark.parametrize("settings, says", [
    ({"norm_eps": 0}, "norm_eps must be a number in (0, 1), got 0"),
    ({"norm_eps": "1e-6"}, "norm_eps must be a number in (0, 1), got '1e-6'"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "rope_type one of ['linear', 'llama3']"),
    ({"rope_scaling": {"rope_type": "linear"}}, "of type 'linear' takes exactly factor"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0}}, "takes exactly factor"),
    ({"rope_scaling": {"rope_type": "linear", "factor": True}}, "takes exactly factor"),
    ({"rope_scaling": {**LLAMA3, "high_freq_factor": 1.0}}, "high_freq_factor must exceed low_freq_factor"),
    ({"rope_scaling": {"rope_type": "linear", "factor": 2.0}, "positional": "learned"},
     "rope_scaling scales rotary positions, but positional is 'learned'")])
def test_a_bad_setting_is_refused_by_name(settings, says):
    with pytest.raises(ValueError) as err:
        tiny(0, **settings)
    assert str(err.value).startswith("DecoderOnlyConfig: ") and says in str(err.value), err.value
