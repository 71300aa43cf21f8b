"""Score functions, the GRU and the RNN encoder-decoders of the pre-Transformer lectures."""

import numpy as np
import pytest

from autograd import Tensor, gradcheck, manual_seed
from autograd.kernels import reference
from nn import functional as F
from tests.helpers import leaf
from tests.transformer.helpers import to_float64
from transformer import MultiHeadAttention, scaled_dot_product_attention
from transformer.families.rnn import GRU, GRUCell, RNNConfig, RNNEncoderDecoder
from transformer.scores import (AdditiveScore, BilinearScore, CosineScore, DotProductScore, ScaledDotProductScore,
                                make_score)
from transformer.training.seq2seq import TrainConfig, train


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _unit(x, eps=1e-8):
    return x / np.sqrt((x * x).sum(-1, keepdims=True) + eps)


def score_cases():
    manual_seed(0)
    additive = to_float64(AdditiveScore(4, 3, hidden=5))
    bilinear = to_float64(BilinearScore(4, 3))
    q, k = np.random.default_rng(1).standard_normal((2, 3, 4)), np.random.default_rng(2).standard_normal((2, 5, 4))
    k3 = k[..., :3]
    return [
        ("dot", DotProductScore(), q, k, lambda: q @ k.transpose(0, 2, 1)),
        ("scaled_dot", ScaledDotProductScore(), q, k, lambda: q @ k.transpose(0, 2, 1) / 2.0),
        ("cosine", CosineScore(scale=3.0), q, k,
         lambda: 3.0 * _unit(q) @ _unit(k).transpose(0, 2, 1)),
        ("additive", additive, q, k3, lambda: np.tanh(
            (q @ additive.query_proj.weight.data.T)[:, :, None, :]
            + (k3 @ additive.key_proj.weight.data.T + additive.key_proj.bias.data)[:, None, :, :]) @ additive.v.weight.data[0]),
        ("bilinear", bilinear, q, k3, lambda: np.einsum("bjd,de,bie->bij", k3, bilinear.weight.weight.data, q)),
    ]


@pytest.mark.parametrize("name,score,q,k,formula", score_cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_score_matches_formula_and_gradchecks(name, score, q, k, formula):
    out = score(Tensor(q), Tensor(k))
    assert out.shape == (2, 3, 5)
    np.testing.assert_allclose(out.data, formula(), rtol=1e-10, atol=1e-12)
    params = score.parameters()
    assert gradcheck(lambda q, k, *p: score(q, k), [Tensor(q, requires_grad=True), Tensor(k, requires_grad=True), *params])


def test_scores_plug_into_attention_and_multi_head_attention():
    manual_seed(3)
    q, k, v = leaf(2, 3, 4), leaf(2, 5, 4), leaf(2, 5, 6)
    out, w = scaled_dot_product_attention(q, k, v, score=DotProductScore())
    np.testing.assert_allclose(w.data, reference.softmax(q.data @ k.data.transpose(0, 2, 1)), rtol=1e-10)
    mha = to_float64(MultiHeadAttention(8, 2, score=make_score("additive", 4, 4, hidden=3)))
    x = leaf(2, 3, 8)
    assert gradcheck(lambda x, *p: mha(x, x, x), [x, *mha.parameters()])
    with pytest.raises(ValueError, match="unknown score function 'gaussian'"):
        make_score("gaussian", 4, 4)
    with pytest.raises(ValueError, match="one size, got 4 and 3"):
        make_score("dot", 4, 3)


def test_gru_cell_follows_pytorch_equations_and_gradchecks():
    manual_seed(4)
    cell = to_float64(GRUCell(3, 2))
    x, h = leaf(4, 3), leaf(4, 2)
    Wi, bi = cell.input_proj.weight.data, cell.input_proj.bias.data
    Wh, bh = cell.hidden_proj.weight.data, cell.hidden_proj.bias.data
    gi, gh = x.data @ Wi.T + bi, h.data @ Wh.T + bh
    r = _sigmoid(gi[:, :2] + gh[:, :2])
    z = _sigmoid(gi[:, 2:4] + gh[:, 2:4])
    n = np.tanh(gi[:, 4:] + r * gh[:, 4:])
    np.testing.assert_allclose(cell(x, h).data, (1 - z) * n + z * h.data, rtol=1e-12)
    assert gradcheck(lambda x, h, *p: cell(x, h), [x, h, *cell.parameters()])


def test_unrolled_gru_equals_manual_steps_and_holds_state_over_padding():
    manual_seed(5)
    gru = to_float64(GRU(3, 4))
    x = leaf(2, 5, 3)
    valid = np.array([[True] * 5, [True, True, True, False, False]])
    outputs, last = gru(x, valid=valid)
    h = np.zeros((2, 4))
    for t in range(5):
        step = gru.cell(Tensor(x.data[:, t]), Tensor(h)).data
        h = np.where(valid[:, t:t + 1], step, h)
        np.testing.assert_allclose(outputs.data[:, t], h, rtol=1e-12)
    np.testing.assert_allclose(last.data, h, rtol=1e-12)
    np.testing.assert_allclose(last.data[1], outputs.data[1, 2], rtol=1e-12)   # state after the last real token
    assert gradcheck(lambda x, *p: gru(x, valid=valid)[0], [x, *gru.parameters()])


@pytest.mark.parametrize("attention", [None, "bilinear"])
def test_rnn_encoder_decoder_gradcheck(attention):
    manual_seed(6)
    model = to_float64(RNNEncoderDecoder(RNNConfig(src_vocab=6, tgt_vocab=6, embed_dim=3, hidden_size=4,
                                                   attention=attention)))
    src, tgt_in, tgt_out = np.array([[3, 4, 0], [5, 3, 4]]), np.array([[1, 4, 3], [1, 4, 0]]), np.array([[4, 3, 2], [4, 2, 0]])
    assert gradcheck(lambda *p: F.cross_entropy(model(src, tgt_in), tgt_out, ignore_index=0), model.parameters())
    if attention:
        assert model.attn_weights.shape == (2, 3, 3)
        np.testing.assert_array_equal(model.attn_weights[0, :, 2], 0)       # padding gets no attention


@pytest.mark.parametrize("attention", [None, "additive"])
def test_short_rnn_training_halves_the_loss(tmp_path, attention):
    manual_seed(0)
    model = RNNEncoderDecoder(RNNConfig(src_vocab=9, tgt_vocab=9, embed_dim=16, hidden_size=32, attention=attention))
    cfg = TrainConfig(task="reverse", num_symbols=6, max_len=4, batch_size=32, max_steps=120, eval_every=120,
                      eval_size=20, warmup=20, decay_steps=120, lr=1e-2, seed=0, out_dir=str(tmp_path))
    _, metrics = train(cfg, model=model, log=lambda line: None)
    losses = metrics["history"]["loss"]
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
