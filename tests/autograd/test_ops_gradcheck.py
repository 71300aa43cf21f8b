"""Every op's gradient against central finite differences, in float64, on non-square
shapes (gradcheck also tests a random upstream gradient)."""

import numpy as np
import pytest

from autograd import cat, gradcheck, stack, where
from autograd.ops import LayerNormFn, LinearFn, RMSNormFn, RotaryEmbeddingFn, ScaledDotProductAttention
from tests.helpers import ENGINE_ROOM, ENGINE_ROOM_ABSENT, const, leaf

ATTENTION_MASK = np.random.default_rng(11).random((2, 4, 4)) < 0.6     # (B, T_q, T_k), seeded, True = may attend
ATTENTION_MASK[1, 0] = False                                             # row 0 of batch 1: no keys

ANGLES = np.random.default_rng(7).uniform(-4, 4, (5, 3))                        # (T, d/2) for d = 6
BATCH_ANGLES = np.random.default_rng(8).uniform(-4, 4, (2, 1, 5, 2))            # (B, 1, T, d/2) for d = 4

# op name -> list of (description, fn, inputs)
CASES = {
    "Add": [("broadcast (3,1)+(1,4)", lambda a, b: a + b, [leaf(3, 1), leaf(1, 4)]),
            ("(2,3,4)+(4,)", lambda a, b: a + b, [leaf(2, 3, 4), leaf(4)]),
            ("0-d + (2,3)", lambda a, b: a + b, [leaf(), leaf(2, 3)]),
            ("python scalar", lambda a: 2.5 + a, [leaf(2, 3)])],
    "Sub": [("(2,3,4)-(3,1)", lambda a, b: a - b, [leaf(2, 3, 4), leaf(3, 1)]),
            ("scalar - t", lambda a: 1.0 - a, [leaf(3, 2)])],
    "Mul": [("(3,1)*(1,4)", lambda a, b: a * b, [leaf(3, 1), leaf(1, 4)]),
            ("reused a*a", lambda a: a * a, [leaf(2, 5)])],
    "Div": [("(2,3)/(3,)", lambda a, b: a / b, [leaf(2, 3), leaf(3, low=0.5)]),
            ("scalar / t", lambda a: 2.0 / a, [leaf(4, 3, low=0.5)])],
    "Pow": [("t ** 3", lambda a: a ** 3, [leaf(2, 3)]),
            ("t ** t", lambda a, b: a ** b, [leaf(2, 3, low=0.2), leaf(3)]),
            ("2 ** t", lambda a: 2.0 ** a, [leaf(3, 2)])],
    "Neg": [("-t", lambda a: -a, [leaf(2, 3)])],
    "Exp": [("exp", lambda a: a.exp(), [leaf(2, 3)])],
    "Log": [("log", lambda a: a.log(), [leaf(3, 2, low=0.1)])],
    "Sqrt": [("sqrt", lambda a: a.sqrt(), [leaf(3, 2, low=0.1)])],
    "Tanh": [("tanh", lambda a: a.tanh(), [leaf(2, 3)])],
    "Sigmoid": [("sigmoid", lambda a: a.sigmoid(), [leaf(2, 3)])],
    "ReLUFn": [("relu", lambda a: a.relu(), [leaf(3, 4)])],
    "GELUFn": [("gelu exact (erf)", lambda a: a.gelu(), [leaf(3, 4)]),
             ("gelu tanh form", lambda a: a.gelu("tanh"), [leaf(4, 3)])],
    "SiLU": [("silu", lambda a: a.silu(), [leaf(3, 4)]),
             ("silu of large magnitudes", lambda a: (a * 20.0).silu(), [leaf(4, 3)])],
    "Sum": [("all", lambda a: a.sum(), [leaf(2, 3, 4)]),
            ("dim=1 keepdim", lambda a: a.sum(1, keepdim=True), [leaf(2, 3, 4)]),
            ("dims (0,2)", lambda a: a.sum((0, -1)), [leaf(2, 3, 4)])],
    "Mean": [("dim=-1", lambda a: a.mean(-1), [leaf(2, 3, 4)]),
             ("all keepdim", lambda a: a.mean(keepdim=True), [leaf(3, 2)])],
    "Max": [("dim=1", lambda a: a.max(1), [leaf(2, 5, 3)]),
            ("all", lambda a: a.max(), [leaf(3, 4)])],
    "Reshape": [("(2,3,4)->(4,-1)", lambda a: a.reshape(4, -1), [leaf(2, 3, 4)]),
                ("unsqueeze+squeeze", lambda a: a.unsqueeze(1).squeeze(), [leaf(2, 3)])],
    "Transpose": [("(2,3,4) 0<->2", lambda a: a.transpose(0, 2), [leaf(2, 3, 4)])],
    "Permute": [("(2,3,4)->(1,2,0)", lambda a: a.permute(1, 2, 0), [leaf(2, 3, 4)])],
    "Expand": [("(3,1)->(2,3,4)", lambda a: a.expand(2, 3, 4), [leaf(3, 1)])],
    "Index": [("slice", lambda a: a[1:, ::2], [leaf(3, 5)]),
              ("repeated indices", lambda a: a[np.array([0, 2, 0, 0])], [leaf(3, 4)]),
              ("(2, 3) ids into a (4, 2, 5) table", lambda a: a[np.array([[0, 3, -1], [1, 0, 0]])], [leaf(4, 2, 5)]),
              ("pairs of arrays", lambda a: a[np.array([0, 1, 1]), np.array([2, 2, 0])], [leaf(2, 3)]),
              ("boolean mask", lambda a: a[a.data > 0], [leaf(3, 4)])],
    "Cat": [("dim=1", lambda a, b: cat([a, b], dim=1), [leaf(2, 3), leaf(2, 1)])],
    "Stack": [("dim=-1", lambda a, b: stack([a, b], dim=-1), [leaf(2, 3), leaf(2, 3)])],
    "Split": [("sizes (2, 4, 1) of dim 1, all three outputs", lambda a: a.split([2, 4, 1], dim=1), [leaf(3, 7, 2)]),
              ("pieces of 2 of dim -1, two of three used", lambda a: a.split(2, dim=-1)[0] * a.split(2, dim=-1)[2],
               [leaf(3, 6)]),
              ("chunk(3) of dim 0, one used (the others' gradients are zeros)", lambda a: a.chunk(3)[1] * 2,
               [leaf(5, 4)])],
    "Unbind": [("dim 1, all outputs", lambda a: a.unbind(1), [leaf(2, 3, 4)]),
               ("dim -1, two of three used", lambda a: a.unbind(-1)[0] * a.unbind(-1)[2], [leaf(4, 3)])],
    "MaskedFill": [("broadcast mask", lambda a: a.masked_fill(np.array([True, False, True]), -5.0),
                    [leaf(2, 3)])],
    "Where": [("broadcast", lambda a, b: where(np.array([[True], [False]]), a, b), [leaf(2, 3), leaf(3)])],
    "MatMul": [("(3,4)@(4,2)", lambda a, b: a @ b, [leaf(3, 4), leaf(4, 2)]),
               ("batched broadcast (2,1,3,4)@(5,4,2)", lambda a, b: a @ b, [leaf(2, 1, 3, 4), leaf(5, 4, 2)]),
               ("(2,3,4)@(4,5) folds batch", lambda a, b: a @ b, [leaf(2, 3, 4), leaf(4, 5)]),
               ("vector @ matrix", lambda a, b: a @ b, [leaf(4), leaf(4, 3)]),
               ("matrix @ vector", lambda a, b: a @ b, [leaf(2, 4), leaf(4)]),
               ("vector @ vector", lambda a, b: a @ b, [leaf(4), leaf(4)]),
               ("batched @ vector", lambda a, b: a @ b, [leaf(2, 3, 4), leaf(4)]),
               ("transposed B (2,3,4)@(2,5,4)^T", lambda a, b: a @ b.transpose(-1, -2), [leaf(2, 3, 4), leaf(2, 5, 4)]),
               ("transposed A (2,4,3)^T@(2,4,5)", lambda a, b: a.transpose(-1, -2) @ b, [leaf(2, 4, 3), leaf(2, 4, 5)])],
    "Softmax": [("dim=-1", lambda a: a.softmax(-1), [leaf(3, 5)]),
                ("dim=0 of 3-d", lambda a: a.softmax(0), [leaf(3, 2, 4)])],
    "LogSoftmax": [("dim=-1", lambda a: a.log_softmax(-1), [leaf(3, 5)]),
                   ("dim=1", lambda a: a.log_softmax(1), [leaf(2, 4, 3)])],
    "LogSumExp": [("dim=-1", lambda a: a.logsumexp(-1), [leaf(3, 5)]),
                  ("dim=0 keepdim", lambda a: a.logsumexp(0, keepdim=True), [leaf(4, 3)])],
    "ScaledDotProductAttention": [
        ("batch (2,3), T_q 3, T_k 5, d 4, d_v 2", lambda q, k, v: ScaledDotProductAttention.apply(q, k, v, scale=0.5),
         [leaf(2, 3, 3, 4), leaf(2, 3, 5, 4), leaf(2, 3, 5, 2)]),
        ("causal and padding mask, one fully masked row",
         lambda q, k, v: ScaledDotProductAttention.apply(q, k, v, mask=ATTENTION_MASK, scale=0.7),
         [leaf(2, 4, 3), leaf(2, 4, 3), leaf(2, 4, 5)]),
        ("grouped-query: 6 query heads on 2 kv heads, T_q 3, T_k 4, masked",
         lambda q, k, v: ScaledDotProductAttention.apply(q, k, v, mask=ATTENTION_MASK[0, 1:], scale=0.6),
         [leaf(2, 6, 3, 4), leaf(2, 2, 4, 4), leaf(2, 2, 4, 3)]),
        ("multi-query: 3 query heads on 1 kv head, masked", lambda q, k, v: ScaledDotProductAttention.apply(
            q, k, v, mask=np.broadcast_to(ATTENTION_MASK[:, None, :, :], (2, 3, 4, 4)), scale=0.9),
         [leaf(2, 3, 4, 3), leaf(2, 1, 4, 3), leaf(2, 1, 4, 2)])],
    "LinearFn": [("(2,3,4) with bias", lambda x, w, b: LinearFn.apply(x, w, b), [leaf(2, 3, 4), leaf(5, 4), leaf(5)]),
               ("(3,4) no bias", lambda x, w: LinearFn.apply(x, w), [leaf(3, 4), leaf(2, 4)])],
    "LayerNormFn": [("over last dim", lambda x, w, b: LayerNormFn.apply(x, w, b, eps=1e-5),
                   [leaf(3, 5), leaf(5), leaf(5)]),
                  ("over last two dims", lambda x, w, b: LayerNormFn.apply(x, w, b, eps=1e-3),
                   [leaf(2, 3, 4), leaf(3, 4), leaf(3, 4)]),
                  ("no bias", lambda x, w: LayerNormFn.apply(x, w, eps=1e-5), [leaf(4, 3), leaf(3)])],
    "RotaryEmbeddingFn": [
        ("half pairs, (2, 3, 5, 6) by (5, 3) angles",
         lambda x: RotaryEmbeddingFn.apply(x, cos=np.cos(ANGLES), sin=np.sin(ANGLES), pairing="half"),
         [leaf(2, 3, 5, 6)]),
        ("interleaved pairs, (2, 3, 5, 4) by per-sequence angles",
         lambda x: RotaryEmbeddingFn.apply(x, cos=np.cos(BATCH_ANGLES), sin=np.sin(BATCH_ANGLES),
                                           pairing="interleaved"),
         [leaf(2, 3, 5, 4)])],
    "RMSNormFn": [("over last dim", lambda x, w: RMSNormFn.apply(x, w, eps=1e-6), [leaf(3, 5), leaf(5)]),
                  ("over last two dims", lambda x, w: RMSNormFn.apply(x, w, normalized_ndim=2, eps=1e-3),
                   [leaf(2, 3, 4), leaf(3, 4)]),
                  ("no weight", lambda x: RMSNormFn.apply(x, eps=1e-5), [leaf(4, 3)])],
}


@pytest.mark.parametrize("op,description,fn,inputs",
                         [(op, d, f, x) for op, cases in CASES.items() for d, f, x in cases],
                         ids=lambda v: v if isinstance(v, str) else "")
def test_gradcheck(op, description, fn, inputs):
    assert gradcheck(fn, inputs)


def test_softmax_with_masked_entries_gradchecks():
    mask = np.array([[True, False, True, True], [False, False, False, False], [True, True, True, False]])
    minus_inf = np.where(mask, 0.0, -np.inf)                       # -inf logits where the mask forbids
    assert gradcheck(lambda a: (a + minus_inf).softmax(-1), [leaf(3, 4)])


def test_gradcheck_detects_a_wrong_gradient():
    from autograd import Function, GradcheckError

    class WrongSquare(Function):
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a

        def backward(ctx, grad):
            (a,) = ctx.saved_tensors
            return grad * a   # should be 2a

    with pytest.raises(GradcheckError, match=r"input 0 .* analytic .* numeric"):
        gradcheck(lambda a: WrongSquare.apply(a), [leaf(2, 3)])


def test_gradcheck_detects_a_wrong_gradient_of_one_output_of_several():
    from autograd import Function, GradcheckError

    class SquareAndCube(Function):              # two outputs; the cube's gradient is wrong
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * a, a * a * a

        def backward(ctx, grad_square, grad_cube):
            (a,) = ctx.saved_tensors
            return grad_square * 2 * a + grad_cube * 2 * a * a   # should be 3 a^2

    with pytest.raises(GradcheckError, match=r"input 0 .* output element (6|7|8|9|10|11)"):
        gradcheck(lambda a: SquareAndCube.apply(a), [leaf(2, 3)])


def test_gradcheck_requires_float64():
    from autograd import Tensor
    with pytest.raises(TypeError, match="float64"):
        gradcheck(lambda a: a * 2, [Tensor(np.ones((2, 2), np.float32), requires_grad=True)])


def test_gradcheck_passes_constants_through():
    assert gradcheck(lambda a, c: a * c, [leaf(2, 3), const(2, 3)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_gradient_of_a_transposed_operand_has_the_direct_products_bits(dtype):
    """MatMul.backward computes the gradient of a transposed operand (attention's k^T) as
    the transpose of a row-major product (ops/matmul.py): it must keep the very sums of
    the direct product, so that no trained model's bits change."""
    from autograd import Tensor, kernels
    rng = np.random.default_rng(0)
    q = Tensor(rng.standard_normal((3, 11, 4, 16)).astype(dtype).transpose(0, 2, 1, 3), requires_grad=True)
    k = Tensor(rng.standard_normal((3, 11, 4, 16)).astype(dtype).transpose(0, 2, 1, 3), requires_grad=True)
    upstream = rng.standard_normal((3, 4, 11, 11)).astype(dtype)
    k_t = k.transpose(-1, -2)
    k_t.retain_grad()
    (q @ k_t).backward(upstream)
    direct = kernels.matmul(np.swapaxes(q.data, -1, -2), upstream)          # q^T @ dS, (3, 4, 16, 11)
    np.testing.assert_array_equal(k_t.grad, direct)
    np.testing.assert_array_equal(k.grad, np.swapaxes(direct, -1, -2))


@pytest.mark.skipif(not ENGINE_ROOM, reason=ENGINE_ROOM_ABSENT + "; laying a gradient out like its operand is its")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_gradients_of_head_split_operands_keep_their_layout_and_bits(dtype):
    """Attention's q and v are heads of a (B, T, H, d) array seen as (B, H, T, d);
    MatMul.backward writes their gradients in that same layout (so that the head split's
    Transpose and Reshape hand back a contiguous (B, T, d_model) without a copy), with the
    bits of the plain product."""
    from autograd import Tensor, kernels
    rng = np.random.default_rng(0)
    heads = lambda: rng.standard_normal((2, 9, 3, 8)).astype(dtype).transpose(0, 2, 1, 3)   # noqa: E731
    q, k, v = (Tensor(heads(), requires_grad=True) for _ in range(3))
    weights = Tensor(rng.standard_normal((2, 3, 9, 9)).astype(dtype), requires_grad=True)
    scores = q @ k.transpose(-1, -2)
    d_scores = rng.standard_normal(scores.shape).astype(dtype)
    grad_q, grad_k_t = scores.grad_fn.backward(d_scores)
    assert grad_q.strides == q.data.strides and np.swapaxes(grad_k_t, -1, -2).strides == k.data.strides
    np.testing.assert_array_equal(grad_q, kernels.matmul(d_scores, np.ascontiguousarray(k.data)))
    np.testing.assert_array_equal(grad_k_t, np.swapaxes(kernels.matmul(np.swapaxes(d_scores, -1, -2), q.data), -1, -2))
    out = weights @ v
    d_out = rng.standard_normal(out.shape).astype(dtype)
    grad_w, grad_v = out.grad_fn.backward(d_out)
    assert grad_v.strides == v.data.strides
    np.testing.assert_array_equal(grad_v, kernels.matmul(np.swapaxes(weights.data, -1, -2), d_out))
    np.testing.assert_array_equal(grad_w, kernels.matmul(d_out, np.swapaxes(v.data, -1, -2)))
