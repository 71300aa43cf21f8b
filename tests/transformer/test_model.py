"""The encoder-decoder: gradients, causality, padding, positional encodings, checkpoints."""

import numpy as np
import pytest

import nn
from autograd import Tensor, gradcheck, manual_seed
from nn import functional as F
from tests.helpers import leaf
from tests.transformer.helpers import tiny_transformer, to_float64
from transformer import (DecoderLayer, LearnedPositionalEncoding, PositionalEncoding, Transformer, TransformerConfig,
                         TransformerLayer, binary_table, causal_mask, sinusoidal_table)
from transformer.training.checkpoints import run_state
from transformer.training.loop import new_history
from transformer.training.seq2seq import TrainConfig, load_model


@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_layer_gradcheck(norm_first):
    manual_seed(0)
    layer = to_float64(TransformerLayer(d_model=6, num_heads=2, d_ff=10, norm_first=norm_first))
    mask = np.array([True, True, True, False])[None, None, None, :]
    assert gradcheck(lambda x, *p: layer(x, mask), [leaf(2, 4, 6), *layer.parameters()])


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_gradcheck(norm_first):
    manual_seed(1)
    layer = to_float64(DecoderLayer(d_model=6, num_heads=3, d_ff=8, norm_first=norm_first, activation="gelu"))
    assert gradcheck(lambda x, m, *p: layer(x, m, causal_mask(3)), [leaf(2, 3, 6), leaf(2, 5, 6), *layer.parameters()])


@pytest.mark.parametrize("overrides", [{}, {"norm_first": True, "tie_weights": True, "positional": "learned"}])
def test_whole_model_gradcheck(overrides):
    model = tiny_transformer(**overrides)
    src = np.array([[3, 4, 5, 0], [6, 3, 4, 4]])
    tgt_in = np.array([[1, 3, 4], [1, 5, 0]])
    tgt_out = np.array([[3, 4, 2], [5, 2, 0]])
    assert gradcheck(lambda *p: F.cross_entropy(model(src, tgt_in), tgt_out, ignore_index=0),
                     model.parameters(), atol=1e-5, rtol=1e-3)


def test_decoder_is_causal():
    model = tiny_transformer(seed=3)
    src = np.array([[3, 4, 5, 6]])
    tgt = np.array([[1, 3, 4, 5, 3]])
    base = model(src, tgt).data
    for t in range(tgt.shape[1] - 1):
        changed = tgt.copy()
        changed[0, t + 1:] = np.array([4, 3, 5, 4])[: tgt.shape[1] - t - 1]
        out = model(src, changed).data
        np.testing.assert_allclose(out[0, : t + 1], base[0, : t + 1], rtol=1e-12, atol=1e-12)
        assert not np.allclose(out[0, t + 1:], base[0, t + 1:])


def test_padded_source_positions_do_not_matter():
    model = tiny_transformer(seed=4)
    tgt = np.array([[1, 3, 4], [1, 5, 4]])
    src = np.array([[3, 4, 0, 0], [5, 6, 3, 0]])
    base = model(src, tgt).data
    src_changed = src.copy()
    src_changed[0, 2:] = [5, 6]   # would be real tokens, but padding_mask is built from `src`
    out = model(src_changed, tgt, src_mask=model.make_src_mask(src)).data
    np.testing.assert_allclose(out, base, rtol=1e-12, atol=1e-12)
    longer = np.concatenate([src, np.zeros((2, 3), np.int64)], axis=1)   # more padding: same outputs
    np.testing.assert_allclose(model(longer, tgt).data, base, rtol=1e-10, atol=1e-12)


def test_sinusoidal_table_matches_the_formula():
    table = sinusoidal_table(50, 6)
    for pos in (0, 1, 17, 49):
        for i in range(3):
            angle = pos / 10000 ** (2 * i / 6)
            assert table[pos, 2 * i] == pytest.approx(np.sin(angle), abs=1e-12)
            assert table[pos, 2 * i + 1] == pytest.approx(np.cos(angle), abs=1e-12)
    assert sinusoidal_table(4, 5).shape == (4, 5)
    np.testing.assert_array_equal(binary_table(4, 3), [[-1, -1, -1], [1, -1, -1], [-1, 1, -1], [1, 1, -1]])


def test_positional_encoding_adds_table_and_refuses_long_sequences():
    pe = PositionalEncoding(4, max_len=5)
    x = Tensor(np.zeros((2, 3, 4), np.float32))
    np.testing.assert_allclose(pe(x).data[1], sinusoidal_table(3, 4), rtol=1e-6)
    with pytest.raises(ValueError, match="sequence length 6 exceeds the table's max_len 5"):
        pe(Tensor(np.zeros((1, 6, 4), np.float32)))
    learned = to_float64(LearnedPositionalEncoding(4, max_len=5))
    assert gradcheck(lambda x, w: learned(x), [leaf(2, 3, 4), learned.weight])
    with pytest.raises(ValueError, match="max_len 5"):
        learned(Tensor(np.zeros((1, 7, 4))))


def test_tied_weights_share_one_parameter():
    model = Transformer(TransformerConfig(src_vocab=9, tgt_vocab=9, tie_weights=True))
    assert model.out_proj.weight is model.tgt_embed.weight
    names = [n for n, _ in model.named_parameters()]
    assert "out_proj.weight" not in names and "tgt_embed.weight" in names


def test_model_rejects_bad_tokens():
    model = tiny_transformer()
    with pytest.raises(IndexError, match="token id 9 is out of range for a vocabulary of 7"):
        model(np.array([[3, 9]]), np.array([[1, 3]]))
    with pytest.raises(ValueError, match="integer array"):
        model(np.array([[3.0, 4.0]]), np.array([[1, 3]]))


def test_checkpoint_round_trip(tmp_path):
    model = tiny_transformer(seed=5)
    nn.save(run_state(model, TrainConfig(), new_history()), tmp_path / "checkpoint.npz")
    loaded = load_model(tmp_path / "checkpoint.npz")
    src, tgt = np.array([[3, 4, 5]]), np.array([[1, 3]])
    np.testing.assert_allclose(to_float64(loaded)(src, tgt).data, model(src, tgt).data, rtol=1e-12)
    other = Transformer(TransformerConfig(src_vocab=7, tgt_vocab=6, d_model=16, num_heads=2))
    with pytest.raises(KeyError, match="shape mismatches"):
        other.load_state_dict(model.state_dict())
