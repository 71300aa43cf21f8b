"""RoPE as both families write it: half pairs (GPT-NeoX, Hugging Face) and interleaved pairs
(RoFormer, Meta's Llama), any base, explicit positions; against PyTorch references written
here, one permutation apart, and the same with and without the key/value cache."""

import numpy as np
import pytest

from autograd import Tensor, gradcheck, manual_seed
from autograd.kernels.reference import rotate_pairs
from tests.helpers import leaf
from tests.transformer.helpers import to_float64
from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig
from transformer.relative_position import ROPE_PAIRINGS, RotaryScore, rope_frequencies, rotary_embedding

TOLERANCE = {np.float32: 1e-6, np.float64: 1e-12}


def interleaved_to_half(d):
    """The permutation of the head dims that takes interleaved pairs (2i, 2i+1) to half
    pairs (i, i + d/2): the even dims first, then the odd ones."""
    return np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])


def _random(shape, seed, dtype=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("base", [10000.0, 500000.0, 7.0])
def test_the_pairings_are_one_permutation_of_the_head_dims_apart(seed, base):
    d = 8
    x, positions = _random((2, 3, 5, d), seed), np.random.default_rng(seed).integers(0, 50, 5)
    perm = interleaved_to_half(d)
    interleaved = rotary_embedding(Tensor(x), positions, base, "interleaved").data
    half = rotary_embedding(Tensor(x[..., perm]), positions, base, "half").data
    np.testing.assert_allclose(interleaved[..., perm], half, rtol=0, atol=1e-13)
    q, k = _random((1, 2, 4, d), seed + 10), _random((1, 2, 6, d), seed + 20)
    scores = RotaryScore(d, base, "interleaved")(Tensor(q), Tensor(k), q_offset=2).data
    half_scores = RotaryScore(d, base, "half")(Tensor(q[..., perm]), Tensor(k[..., perm]), q_offset=2).data
    np.testing.assert_allclose(half_scores, scores, rtol=0, atol=1e-12)
    assert not np.allclose(RotaryScore(d, base, "half")(Tensor(q), Tensor(k), q_offset=2).data, scores)


@pytest.mark.parametrize("pairing", ROPE_PAIRINGS)
def test_each_pair_turns_by_position_times_its_frequency(pairing):
    d, base, position = 6, 100.0, 3
    x = _random((1, d), 0)
    out = rotary_embedding(Tensor(x), np.array([position]), base, pairing).data[0]
    for i in range(d // 2):
        a, b = (i, i + d // 2) if pairing == "half" else (2 * i, 2 * i + 1)
        angle = position * base ** (-2 * i / d)
        cos, sin = np.cos(angle), np.sin(angle)
        expected = [x[0, a] * cos - x[0, b] * sin, x[0, a] * sin + x[0, b] * cos]
        np.testing.assert_allclose(out[[a, b]], expected, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("pairing", ROPE_PAIRINGS)
def test_positions_per_sequence_rotate_each_sequence_by_its_own(pairing):
    x = _random((3, 2, 4, 8), 1)                                          # (B, H, T, d)
    positions = np.array([[0, 1, 2, 3], [5, 6, 7, 8], [2, 2, 9, 0]])       # (B, T)
    out = rotary_embedding(Tensor(x), positions, pairing=pairing).data
    for b in range(3):
        np.testing.assert_array_equal(out[b], rotary_embedding(Tensor(x[b]), positions[b], pairing=pairing).data)
    flat = rotary_embedding(Tensor(x[:, 0]), positions, pairing=pairing).data   # (B, T, d) takes (B, T) too
    np.testing.assert_array_equal(flat, out[:, 0])
    assert gradcheck(lambda x: rotary_embedding(x, positions[:2, :3], 50.0, pairing), [leaf(2, 3, 3, 6)])


def test_bad_rope_arguments_are_named():
    with pytest.raises(ValueError, match="even last dim"):
        rotary_embedding(Tensor(np.ones((2, 5))), np.arange(2))
    with pytest.raises(ValueError, match="pairing in"):
        rotary_embedding(Tensor(np.ones((2, 4))), np.arange(2), pairing="neox")
    with pytest.raises(ValueError, match=r"positions of shape \(3,\)"):
        rotary_embedding(Tensor(np.ones((2, 4))), np.arange(3))
    with pytest.raises(ValueError, match=r"positions of shape \(3, 2\)"):
        rotary_embedding(Tensor(np.ones((2, 2, 4))), np.zeros((3, 2), int))
    with pytest.raises(ValueError, match="pairing must be one of"):
        RotaryScore(4, pairing="meta")
    with pytest.raises(ValueError, match="base must be > 1"):
        RotaryScore(4, base=0.5)
    with pytest.raises(ValueError, match="rope_pairing must be one of"):
        DecoderOnlyConfig(vocab=5, rope_pairing="neox")


@pytest.mark.parametrize("pairing", ROPE_PAIRINGS)
@pytest.mark.parametrize("base", [10000.0, 30.0])
def test_cached_decoding_equals_uncached_for_both_pairings(pairing, base):
    manual_seed(0)
    model = to_float64(DecoderOnly(DecoderOnlyConfig(vocab=9, d_model=8, num_heads=2, d_ff=16, max_len=12,
                                                     positional="rope", rope_pairing=pairing, rope_base=base))).eval()
    assert model.blocks.layers[0].self_attn.score.pairing == pairing
    prompt = np.array([[1, 4, 5], [1, 6, 3]])
    cached, cached_logits = model.generate(prompt, 14, use_cache=True, return_logits=True)   # outgrows max_len
    plain, plain_logits = model.generate(prompt, 14, use_cache=False, return_logits=True)
    np.testing.assert_array_equal(cached, plain)
    np.testing.assert_allclose(cached_logits, plain_logits, atol=1e-10)


# ----- PyTorch references: each family's own code, written here -----

def torch_rope_half(torch, x, positions, base):
    """Hugging Face's Llama (and GPT-NeoX): rotate_half on cos/sin repeated over both halves."""
    d = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.as_tensor(positions, dtype=torch.float64)[..., None] * inv_freq
    emb = torch.cat([angles, angles], dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    rotate_half = torch.cat([-x[..., d // 2:], x[..., :d // 2]], dim=-1)
    return x * cos + rotate_half * sin


def torch_rope_interleaved(torch, x, positions, base):
    """Meta's Llama: consecutive pairs as complex numbers, multiplied by e^(i angle)."""
    d = x.shape[-1]
    freqs = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    angles = torch.as_tensor(positions, dtype=torch.float64)[..., None] * freqs
    freqs_cis = torch.polar(torch.ones_like(angles), angles)
    complex_dtype = torch.complex64 if x.dtype == torch.float32 else torch.complex128
    x_complex = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2).contiguous())
    return torch.view_as_real(x_complex * freqs_cis.to(complex_dtype)).flatten(-2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pairing", ROPE_PAIRINGS)
@pytest.mark.parametrize("base", [10000.0, 500000.0])
def test_rope_equals_the_pytorch_reference_of_each_family(dtype, pairing, base):
    torch = pytest.importorskip("torch")
    reference = {"half": torch_rope_half, "interleaved": torch_rope_interleaved}[pairing]
    x, upstream = _random((2, 3, 7, 10), 3, dtype), _random((2, 3, 7, 10), 4, dtype)
    positions = np.arange(7) + 5
    ours = Tensor(x, requires_grad=True)
    out = rotary_embedding(ours, positions, base, pairing)
    out.backward(upstream)
    theirs = torch.tensor(x, requires_grad=True)
    expected = reference(torch, theirs, positions, base)
    expected.backward(torch.tensor(upstream))
    tolerance = TOLERANCE[dtype]
    assert out.dtype == dtype and ours.grad.dtype == dtype
    np.testing.assert_allclose(out.data, expected.detach().numpy(), rtol=tolerance, atol=tolerance)
    np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("scaling", [None, {"rope_type": "linear", "factor": 4.0},
                                     {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 16}])
def test_the_cached_angle_tables_give_the_bits_of_the_angles_computed_afresh(dtype, scaling):
    d, base, rng = 12, 500.0, np.random.default_rng(3)
    for positions in (np.arange(5), np.arange(70, 75), rng.integers(0, 300, (2, 5)), np.array([0, 0, 1, 2, 3])):
        x = _random((2, 3, 5, d), int(positions.sum()), dtype)
        angles = positions[..., None] * rope_frequencies(d, base, scaling)                  # (..., T, d/2)
        if positions.ndim == 2:
            angles = angles[:, None]
        cos, sin = np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)
        expected = rotate_pairs(x, cos, sin, "half")
        np.testing.assert_array_equal(rotary_embedding(Tensor(x), positions, base, "half", scaling).data, expected)


@pytest.mark.parametrize("positions", [np.array([0, -1]), np.array([0.0, 1.0])])
def test_positions_that_are_not_integers_from_zero_are_refused(positions):
    with pytest.raises(ValueError, match="positions must be integers >= 0"):
        rotary_embedding(Tensor(np.ones((2, 4))), positions)
