"""SiLU, RMSNorm and the SwiGLU feed-forward: their definitions, gradients (float64 finite
differences, non-square shapes, random upstream gradients) and PyTorch's values."""

import numpy as np
import pytest

import nn
from autograd import Tensor, gradcheck
from nn import functional as F
from tests.helpers import leaf
from transformer.layers import SwiGLU, make_feed_forward, make_norm, swiglu_hidden_size

SHAPES = [(3, 5), (2, 3, 7), (4, 1, 6)]
TOLERANCE = {np.float32: 1e-6, np.float64: 1e-12}


def _random(shape, seed, dtype=np.float64, scale=1.0):
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("seed", range(3))
def test_silu_is_x_times_sigmoid_and_stable_at_extremes(seed):
    x = _random((4, 6), seed, scale=30.0)
    out = F.silu(Tensor(x)).data
    assert np.allclose(out, x / (1 + np.exp(-x)), rtol=1e-12, atol=1e-300)
    big = F.silu(Tensor(np.array([-1e4, -800.0, 0.0, 800.0, 1e4]))).data
    assert np.all(np.isfinite(big)) and np.array_equal(big, [-0.0, -0.0, 0.0, 800.0, 1e4])
    assert nn.SiLU()(Tensor(x)).data.tolist() == out.tolist()


@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm_is_its_formula(shape):
    x, w = _random(shape, 1), _random(shape[-1:], 2)
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * w
    assert np.allclose(F.rms_norm(Tensor(x), shape[-1], Tensor(w), 1e-5).data, expected, rtol=1e-13, atol=1e-13)
    default_eps = x / np.sqrt((x * x).mean(-1, keepdims=True) + np.finfo(np.float64).eps)
    assert np.allclose(F.rms_norm(Tensor(x), shape[-1]).data, default_eps, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm_layer_gradchecks_over_one_and_two_dims(shape):
    layer = nn.RMSNorm(shape[-1], eps=1e-4, dtype=np.float64)
    layer.weight.data = _random(shape[-1:], 3)
    assert gradcheck(lambda x, w: F.rms_norm(x, shape[-1], w, 1e-4), [leaf(*shape), layer.weight])
    two = nn.RMSNorm(shape[-2:], elementwise_affine=False)
    assert two.weight is None and not two.parameters()
    assert gradcheck(lambda x: two(x), [leaf(*shape)])


def test_rms_norm_errors_name_the_shapes():
    with pytest.raises(ValueError, match=r"normalized_shape \(4,\) is not the last dims of input \(2, 3\)"):
        F.rms_norm(Tensor(np.ones((2, 3))), 4)
    with pytest.raises(ValueError, match=r"weight shape \(2,\) != normalized_shape \(3,\)"):
        F.rms_norm(Tensor(np.ones((2, 3))), 3, Tensor(np.ones(2)))
    with pytest.raises(ValueError, match="not the last dims"):
        F.rms_norm(Tensor(np.ones(3)), (1, 3))


def test_rms_norm_of_a_zero_vector_is_zero_not_nan():
    out = nn.RMSNorm(4)(Tensor(np.zeros((2, 4), np.float32)))
    assert np.array_equal(out.data, np.zeros((2, 4)))


def test_swiglu_hidden_size_is_eight_thirds_rounded_up_to_64():
    assert [swiglu_hidden_size(d) for d in (24, 64, 128, 4096)] == [64, 192, 384, 10944]
    assert swiglu_hidden_size(4096, multiple_of=256) == 11008          # Llama 7B's
    assert SwiGLU(128).w1.out_features == 384 and SwiGLU(128, d_ff=100).w2.in_features == 100


@pytest.mark.parametrize("seed", range(3))
def test_swiglu_is_w2_of_silu_w1_times_w3_and_gradchecks(seed):
    ff = SwiGLU(6, d_ff=10).to("float64")
    assert all(layer.bias is None for layer in (ff.w1, ff.w2, ff.w3))
    x = _random((2, 3, 6), seed)
    a, b = x @ ff.w1.weight.data.T, x @ ff.w3.weight.data.T
    expected = (a / (1 + np.exp(-a)) * b) @ ff.w2.weight.data.T
    assert np.allclose(ff(Tensor(x)).data, expected, rtol=1e-12, atol=1e-12)
    assert gradcheck(ff, [leaf(2, 3, 6, seed=seed)])
    assert gradcheck(lambda x, *weights: ff(x), [leaf(3, 6, seed=seed), *ff.parameters()])


def test_feed_forward_and_norm_choices_are_checked():
    assert isinstance(make_feed_forward("swiglu", 8, None, 0.0, "relu", False), SwiGLU)
    assert isinstance(make_norm("rms_norm", 8), nn.RMSNorm)
    with pytest.raises(ValueError, match="feed_forward must be one of"):
        make_feed_forward("geglu", 8, 16, 0.0, "relu", False)
    with pytest.raises(ValueError, match="norm must be one of"):
        make_norm("batch_norm", 8)


# ----- PyTorch's definitions, where it is installed -----

def _ours_and_torch(ours, theirs, arrays, dtype, seed):
    """(our output, our grads, torch's output, torch's grads) of the same function under the
    same random upstream gradient."""
    torch = pytest.importorskip("torch")
    mine = [Tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    out = ours(*mine)
    upstream = _random(out.shape, seed + 100, dtype)
    out.backward(upstream)
    tensors = [torch.tensor(a.astype(dtype), requires_grad=True) for a in arrays]
    expected = theirs(*tensors)
    expected.backward(torch.tensor(upstream))
    return out.data, [t.grad for t in mine], expected.detach().numpy(), [t.grad.numpy() for t in tensors]


def _assert_close(ours, theirs, dtype):
    tolerance = TOLERANCE[dtype]
    assert ours.dtype == theirs.dtype
    np.testing.assert_allclose(ours, theirs, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(3))
def test_silu_equals_pytorchs(dtype, seed):
    torch = pytest.importorskip("torch")
    x = _random((3, 7), seed, scale=4.0)
    out, grads, expected, expected_grads = _ours_and_torch(F.silu, torch.nn.functional.silu, [x], dtype, seed)
    _assert_close(out, expected, dtype)
    _assert_close(grads[0], expected_grads[0], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,normalized", [((3, 5), (5,)), ((2, 3, 4), (3, 4)), ((4, 1, 6), (6,))])
@pytest.mark.parametrize("eps", [None, 1e-5])
def test_rms_norm_equals_pytorchs(dtype, shape, normalized, eps):
    torch = pytest.importorskip("torch")
    x, w = _random(shape, 4), _random(normalized, 5)
    out, grads, expected, expected_grads = _ours_and_torch(
        lambda x, w: F.rms_norm(x, normalized, w, eps),
        lambda x, w: torch.nn.functional.rms_norm(x, normalized, w, eps),
        [x, w], dtype, 7)
    _assert_close(out, expected, dtype)
    for ours, theirs in zip(grads, expected_grads):
        _assert_close(ours, theirs, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_swiglu_equals_pytorchs(dtype):
    torch = pytest.importorskip("torch")
    ff = SwiGLU(8, d_ff=12).to(np.dtype(dtype).name)
    x = _random((2, 5, 8), 9, dtype)
    upstream = _random((2, 5, 8), 10, dtype)
    out = ff(Tensor(x))
    out.backward(upstream)
    weights = [torch.tensor(layer.weight.data, requires_grad=True) for layer in (ff.w1, ff.w2, ff.w3)]
    linear, silu = torch.nn.functional.linear, torch.nn.functional.silu
    expected = linear(silu(linear(torch.tensor(x), weights[0])) * linear(torch.tensor(x), weights[2]), weights[1])
    expected.backward(torch.tensor(upstream))
    _assert_close(out.data, expected.detach().numpy(), dtype)
    for layer, weight in zip((ff.w1, ff.w2, ff.w3), weights):
        _assert_close(layer.weight.grad, weight.grad.numpy(), dtype)
