"""Attention: values against a direct numpy formula, gradients, masks, errors."""

import numpy as np
import pytest

from autograd import Tensor, gradcheck, manual_seed
from transformer import MultiHeadAttention, causal_mask, combine_masks, padding_mask, scaled_dot_product_attention
from tests.helpers import leaf
from tests.transformer.helpers import to_float64


def numpy_attention(q, k, v, mask=None):
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    scores = scores - scores.max(-1, keepdims=True)
    w = np.exp(scores)
    return w / w.sum(-1, keepdims=True) @ v


def test_scaled_dot_product_attention_matches_formula():
    q, k, v = leaf(2, 3, 5, 4), leaf(2, 3, 6, 4), leaf(2, 3, 6, 7)
    mask = np.random.default_rng(0).random((2, 1, 5, 6)) > 0.3
    mask[..., 0] = True
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    np.testing.assert_allclose(out.data, numpy_attention(q.data, k.data, v.data, mask), rtol=1e-10)
    np.testing.assert_allclose(weights.data.sum(-1), 1.0)
    assert (weights.data[~np.broadcast_to(mask, weights.shape)] == 0).all()


def test_scaled_dot_product_attention_gradcheck_with_mask():
    mask = causal_mask(4)
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0],
                     [leaf(2, 4, 3), leaf(2, 4, 3), leaf(2, 4, 5)])


def test_fully_masked_query_row_gives_zero_weights_and_gradients():
    q, k, v = leaf(1, 3, 4), leaf(1, 5, 4), leaf(1, 5, 2)
    mask = np.ones((1, 3, 5), bool)
    mask[0, 1] = False                       # query 1 may attend to nothing
    out, weights = scaled_dot_product_attention(q, k, v, mask)
    assert not np.isnan(out.data).any()
    np.testing.assert_array_equal(weights.data[0, 1], 0)
    np.testing.assert_array_equal(out.data[0, 1], 0)
    out.sum().backward()
    assert np.isfinite(q.grad).all() and np.isfinite(k.grad).all()
    np.testing.assert_array_equal(q.grad[0, 1], 0)
    assert gradcheck(lambda q, k, v: scaled_dot_product_attention(q, k, v, mask)[0], [q, k, v])


def test_multi_head_attention_gradcheck_with_padding_mask():
    manual_seed(1)
    mha = to_float64(MultiHeadAttention(d_model=6, num_heads=2))
    x, memory = leaf(2, 3, 6), leaf(2, 4, 6)
    mask = padding_mask(np.array([[5, 6, 0, 0], [5, 6, 7, 8]]), pad_id=0)
    assert gradcheck(lambda x, m, *params: mha(x, m, m, mask), [x, memory, *mha.parameters()])
    assert mha.attn_weights.shape == (2, 2, 3, 4)
    np.testing.assert_array_equal(mha.attn_weights[0, :, :, 2:], 0)   # padded keys get no weight


def test_multi_head_attention_equals_heads_computed_one_by_one():
    manual_seed(2)
    mha = to_float64(MultiHeadAttention(d_model=8, num_heads=2))
    x = leaf(1, 5, 8)
    out = mha(x, x, x).data
    heads = []
    for h in range(2):
        cols = slice(4 * h, 4 * h + 4)
        q = x.data @ mha.q_proj.weight.data[cols].T + mha.q_proj.bias.data[cols]
        k = x.data @ mha.k_proj.weight.data[cols].T + mha.k_proj.bias.data[cols]
        v = x.data @ mha.v_proj.weight.data[cols].T + mha.v_proj.bias.data[cols]
        heads.append(numpy_attention(q, k, v))
    expected = np.concatenate(heads, -1) @ mha.out_proj.weight.data.T + mha.out_proj.bias.data
    np.testing.assert_allclose(out, expected, rtol=1e-10)


def test_masks():
    np.testing.assert_array_equal(causal_mask(3), [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
    pad = padding_mask(np.array([[4, 5, 0]]), 0)
    assert pad.shape == (1, 1, 1, 3)
    both = combine_masks(causal_mask(3), pad)
    assert both.shape == (1, 1, 3, 3)
    np.testing.assert_array_equal(both[0, 0], [[1, 0, 0], [1, 1, 0], [1, 1, 0]])
    assert combine_masks(None, None) is None


def test_attention_errors():
    with pytest.raises(ValueError, match="d_model=10 is not divisible by num_heads=4"):
        MultiHeadAttention(10, 4)
    q = Tensor(np.zeros((1, 2, 3, 4)))
    with pytest.raises(TypeError, match="must be boolean"):
        scaled_dot_product_attention(q, q, q, np.ones((3, 3)))
    with pytest.raises(ValueError, match=r"mask of shape \(2, 2\) does not broadcast .*\(1, 2, 3, 3\)"):
        scaled_dot_product_attention(q, q, q, np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="each needs last dim 8"):
        MultiHeadAttention(8, 2)(Tensor(np.zeros((1, 2, 6), np.float32)), q, q)


def test_nanogpts_attention_written_with_split_equals_multi_head_attention():
    """nanoGPT's CausalSelfAttention as written there (one c_attn product, then
    .split(n_embd, dim=2)) on this engine: the same output and gradients as our
    MultiHeadAttention holding the same weights (its q/k/v weights stacked are c_attn's)."""
    from autograd import cat
    from nn import functional as F
    manual_seed(0)
    batch, length, n_embd, n_head = 2, 5, 12, 3
    mha = to_float64(MultiHeadAttention(n_embd, n_head, bias=True))
    x = leaf(batch, length, n_embd)
    mask = np.asarray(causal_mask(length))

    def nanogpt(x):
        c_attn_w = cat([mha.q_proj.weight, mha.k_proj.weight, mha.v_proj.weight])    # (3 n_embd, n_embd)
        c_attn_b = cat([mha.q_proj.bias, mha.k_proj.bias, mha.v_proj.bias])
        q, k, v = F.linear(x, c_attn_w, c_attn_b).split(n_embd, dim=2)
        k = k.view(batch, length, n_head, n_embd // n_head).transpose(1, 2)         # (B, nh, T, hs)
        q = q.view(batch, length, n_head, n_embd // n_head).transpose(1, 2)
        v = v.view(batch, length, n_head, n_embd // n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / np.sqrt(k.shape[-1]))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(batch, length, n_embd)
        return mha.out_proj(y)

    ours, theirs = mha(x, x, x, mask), nanogpt(x)
    np.testing.assert_allclose(theirs.data, ours.data, rtol=1e-12, atol=1e-12)
    upstream = np.random.default_rng(1).standard_normal(ours.shape)
    grads = []
    for out in (ours, theirs):
        x.grad = None
        mha.zero_grad()
        out.backward(upstream)
        grads.append([x.grad.copy()] + [p.grad.copy() for p in mha.parameters()])
    for a, b in zip(*grads):
        np.testing.assert_allclose(b, a, rtol=1e-10, atol=1e-12)
    assert gradcheck(nanogpt, [leaf(batch, length, n_embd)])
