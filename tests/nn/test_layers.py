"""Layers and losses: gradients by finite differences, values by direct numpy formulas."""

import numpy as np
import pytest

import nn
from autograd import Tensor, gradcheck, manual_seed
from nn import functional as F
from tests.helpers import leaf


def check_module(module, x):
    """gradcheck of a module with respect to its input and all its parameters."""
    params = module.parameters()
    return gradcheck(lambda x, *ps: module(x), [x, *params])


def test_linear_gradcheck_and_shape():
    layer = nn.Linear(4, 3, dtype=np.float64)
    assert layer.weight.shape == (3, 4) and layer.bias.shape == (3,)
    assert check_module(layer, leaf(2, 5, 4))


def test_linear_init_bound_is_pytorchs():
    manual_seed(0)
    layer = nn.Linear(100, 50)
    assert np.abs(layer.weight.data).max() <= 0.1 and np.abs(layer.weight.data).max() > 0.09


def test_linear_wrong_input_size_is_a_clear_error():
    with pytest.raises(ValueError, match=r"Linear\(4, 3\): input's last dim is 5 .*expected 4"):
        nn.Linear(4, 3)(Tensor(np.zeros((2, 5), np.float32)))


def test_embedding_gradcheck_with_repeated_ids():
    emb = nn.Embedding(5, 3, dtype=np.float64)
    ids = np.array([[0, 2, 2], [4, 0, 2]])
    assert gradcheck(lambda w: emb(ids), [emb.weight])


@pytest.mark.parametrize("bad", [-1, 7])
def test_embedding_out_of_range_id_names_id_and_vocab(bad):
    emb = nn.Embedding(7, 3)
    with pytest.raises(IndexError, match=f"token id {bad} is out of range for a vocabulary of 7"):
        emb(np.array([0, bad]))


def test_embedding_rejects_float_ids():
    with pytest.raises(TypeError, match="integers"):
        nn.Embedding(7, 3)(np.array([0.0, 1.0]))


def test_layer_norm_matches_formula_and_gradchecks():
    ln = nn.LayerNorm(5, dtype=np.float64)
    ln.weight.data = np.random.default_rng(1).standard_normal(5)
    ln.bias.data = np.random.default_rng(2).standard_normal(5)
    x = leaf(3, 4, 5)
    mu = x.data.mean(-1, keepdims=True)
    var = x.data.var(-1, keepdims=True)   # biased
    expected = (x.data - mu) / np.sqrt(var + 1e-5) * ln.weight.data + ln.bias.data
    np.testing.assert_allclose(ln(x).data, expected, rtol=1e-12, atol=1e-12)
    assert check_module(ln, x)


def test_dropout_is_identity_in_eval_and_inverted_in_training():
    drop = nn.Dropout(0.25)
    x = Tensor(np.ones((200, 100)))
    drop.eval()
    assert drop(x) is x
    drop.train()
    y = drop(x).data
    assert set(np.unique(y)) == {0.0, 1 / 0.75}
    assert abs((y == 0).mean() - 0.25) < 0.01


def test_dropout_gradcheck_with_fixed_mask():
    x = leaf(4, 6)
    assert gradcheck(lambda x: F.dropout(x, 0.3, True, np.random.default_rng(5)), [x])


def test_activations_gradcheck():
    assert check_module(nn.Sequential(nn.GELU(), nn.ReLU()), leaf(3, 4))


def _numpy_cross_entropy(logits, target, ignore_index, eps):
    z = logits - logits.max(-1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(-1, keepdims=True))
    logp, t = logp.reshape(-1, logits.shape[-1]), target.reshape(-1)
    losses = []
    for row, cls in zip(logp, t):
        if cls == ignore_index:
            continue
        losses.append((1 - eps) * -row[cls] + eps * -row.mean())
    return np.mean(losses)


@pytest.mark.parametrize("eps", [0.0, 0.1])
@pytest.mark.parametrize("shape", [(6, 5), (2, 4, 5)])
def test_cross_entropy_matches_numpy_formula_and_gradchecks(eps, shape):
    logits = leaf(*shape)
    target = np.random.default_rng(3).integers(0, 5, size=shape[:-1])
    target.reshape(-1)[[1, 3]] = 0   # pad id
    loss = F.cross_entropy(logits, target, ignore_index=0, label_smoothing=eps)
    assert loss.item() == pytest.approx(_numpy_cross_entropy(logits.data, target, 0, eps), rel=1e-12)
    assert gradcheck(lambda z: F.cross_entropy(z, target, ignore_index=0, label_smoothing=eps), [logits])


def test_cross_entropy_reductions_and_nll():
    logits = leaf(4, 3)
    target = np.array([0, 2, 1, 2])
    per_item = F.cross_entropy(logits, target, reduction="none")
    assert per_item.shape == (4,)
    assert F.cross_entropy(logits, target, reduction="sum").item() == pytest.approx(per_item.data.sum())
    nll = F.nll_loss(logits.log_softmax(-1), target)
    assert nll.item() == pytest.approx(per_item.data.mean())
    assert gradcheck(lambda z: F.nll_loss(z, target, reduction="sum"), [logits])


def test_cross_entropy_is_stable_for_huge_logits():
    logits = Tensor(np.array([[1e4, -1e4, 0.0]]), requires_grad=True)
    loss = F.cross_entropy(logits, np.array([1]))
    loss.backward()
    assert loss.item() == pytest.approx(2e4) and np.isfinite(logits.grad).all()


def test_cross_entropy_bad_targets():
    logits = leaf(3, 4)
    with pytest.raises(IndexError, match="target 4 is out of range for 4 classes"):
        F.cross_entropy(logits, np.array([0, 4, 1]))
    with pytest.raises(ValueError, match=r"need targets of shape \(3,\), got \(2,\)"):
        F.cross_entropy(logits, np.array([0, 1]))
    with pytest.raises(TypeError, match="integer class ids"):
        F.cross_entropy(logits, np.array([0.0, 1.0, 2.0]))


def test_mse_loss_value_and_gradcheck():
    a, b = leaf(3, 2), leaf(3, 2)
    assert F.mse_loss(a, b).item() == pytest.approx(np.mean((a.data - b.data) ** 2))
    assert gradcheck(lambda a, b: F.mse_loss(a, b), [a, b])


def test_module_registration_names_and_repr():
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(2, 3), nn.Linear(3, 2)])
            self.norm = nn.LayerNorm(2)

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return self.norm(x)

    block = Block()
    names = [n for n, _ in block.named_parameters()]
    assert names == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                     "norm.weight", "norm.bias"]
    assert len(list(block.children())) == 2 and len(list(block.modules())) == 5
    block.eval()
    assert not any(m.training for m in block.modules())
    assert "(0): Linear(in_features=2, out_features=3, bias=True)" in repr(block)


def test_tied_parameters_are_listed_once():
    a, b = nn.Linear(3, 3), nn.Linear(3, 3)
    b.weight = a.weight
    model = nn.Sequential(a, b)
    assert len(model.parameters()) == 3
    assert set(model.state_dict()) == {"0.weight", "0.bias", "1.weight", "1.bias"}


def test_assigning_before_super_init_is_a_clear_error():
    class Broken(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(np.zeros(2))

    with pytest.raises(AttributeError, match=r"call super\(\)\.__init__\(\) before"):
        Broken()


def test_a_module_knows_its_dotted_name_inside_the_model():
    from tests.transformer.helpers import tiny_transformer
    model = tiny_transformer()
    assert model.decoder.layers[0].cross_attn.path == "decoder.layers.0.cross_attn"
    assert model.encoder.layers[0].feed_forward.linear1.path == "encoder.layers.0.feed_forward.linear1"
    assert model.path == ""
    assert dict(model.named_modules())[model.decoder.layers[0].self_attn.path] is model.decoder.layers[0].self_attn


def test_a_float_input_of_another_dtype_than_the_weights_is_refused():
    layer = nn.Linear(3, 2)                                          # float32 weights
    with pytest.raises(TypeError, match=r"the input is float64 and the weights float32; .* Cast the input"):
        layer(Tensor(np.ones((4, 3))))
    assert layer(Tensor(np.ones((4, 3), np.float32))).dtype == np.float32
    assert layer.to("float64")(Tensor(np.ones((4, 3)))).dtype == np.float64
