"""Every node knows the module whose forward made it (`node.module_path`), and says so.

nn.Module.__call__ sets autograd.running_module while forward runs and restores it in a
`finally`; Function.apply keeps it on each node.  Checked on the GPT, the encoder-decoder
and small stacks: each op lands in exactly the modules that run it, nested calls give back
their caller's module, an exception or no_grad leaves nothing behind, threads do not see
each other's modules, and a graph does not keep its model alive.
"""

import gc
import threading

import numpy as np
import pytest

import nn
from autograd import AnomalyError, Tensor, detect_anomaly, manual_seed, no_grad
from autograd.engine import graph_nodes
from autograd.running_module import running_module
from nn import functional as F
from tests.transformer.helpers import tiny_transformer
from transformer import MultiHeadAttention
from transformer.families.decoder_only import DecoderOnly, gpt_config


def nodes_of(loss):
    return graph_nodes(loss._node)


def paths_of(nodes, op):
    return {node.module_path for node in nodes if node.name == op}


def paths_of_modules(model, kind):
    return {name for name, m in model.named_modules() if isinstance(m, kind)}


@pytest.mark.parametrize("seed,layers", [(0, 1), (1, 2), (2, 3)])
def test_the_gpt_nodes_name_the_attention_and_linear_layers_that_made_them(seed, layers):
    manual_seed(seed)
    model = DecoderOnly(gpt_config(11, block_size=8, n_layer=layers, n_head=2, n_embd=8, attention="composed"))
    rng = np.random.default_rng(seed)
    x, y = rng.integers(0, 11, (2, 6)), rng.integers(0, 11, (2, 6))
    nodes = nodes_of(F.cross_entropy(model(x), y))
    attention = paths_of_modules(model, MultiHeadAttention)
    assert len(attention) == layers
    assert paths_of(nodes, "Softmax") == attention                  # one softmax per block, in its attention
    assert paths_of(nodes, "LinearFn") == paths_of_modules(model, nn.Linear)
    assert paths_of(nodes, "LayerNormFn") == paths_of_modules(model, nn.LayerNorm)
    names = dict(model.named_modules())
    for node in nodes:              # the loss's own ops ran outside the model; every other op inside a module of it
        assert node.module_path is None or node.module_path in names or node.module_path == "DecoderOnly", node
    softmax = next(node for node in nodes if node.name == "Softmax")
    assert repr(softmax) == f"<Softmax node in {softmax.module_path}, output shape {softmax.out_shape}>"
    assert softmax.module_path.startswith("blocks.") and softmax.module_path.endswith("attn")


@pytest.mark.parametrize("seed", [0, 1])
def test_the_encoder_decoder_nodes_name_self_and_cross_attention(seed):
    model = tiny_transformer(seed, attention="composed", num_encoder_layers=2, num_decoder_layers=1)
    rng = np.random.default_rng(seed)
    src, tgt = rng.integers(3, 7, (2, 5)), rng.integers(3, 6, (2, 4))
    nodes = nodes_of(model(src, tgt).sum())
    attention = paths_of_modules(model, MultiHeadAttention)
    assert len(attention) == 4 and any("cross" in path for path in attention), attention
    assert paths_of(nodes, "Softmax") == attention
    assert paths_of(nodes, "LinearFn") == paths_of_modules(model, nn.Linear)
    assert nodes[-1].module_path is None                          # .sum() ran outside the model


class Doubler(nn.Module):
    """Its own op (x * 2) between two calls of one child: the context comes back to it."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Linear(3, 3, dtype=np.float64)

    def forward(self, x):
        return self.inner(self.inner(x) * 2.0)


class Fails(nn.Module):
    def forward(self, x):
        raise RuntimeError("broken layer")


class Catches(nn.Module):
    """Calls a child that raises, catches, and goes on with an op of its own."""

    def __init__(self):
        super().__init__()
        self.child = Fails()

    def forward(self, x):
        try:
            self.child(x)
        except RuntimeError:
            pass
        return x.exp()


def leaf(*shape, seed=0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape), requires_grad=True)


def test_a_small_stack_a_module_used_twice_and_nested_calls():
    manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 3, dtype=np.float64), nn.ReLU(), Doubler())
    out = model(leaf(2, 3))
    linear_second = out._node
    mul = linear_second.inputs[0]._node
    linear_first = mul.inputs[0]._node
    assert linear_second.module_path == linear_first.module_path == "2.inner"   # the same module, called twice
    assert mul.module_path == "2"                                                # the parent's own op, between them
    relu = linear_first.inputs[0]._node
    assert relu.module_path == "1" and relu.inputs[0]._node.module_path == "0"
    assert running_module.get() is None


def test_a_module_called_on_its_own_is_named_by_its_class_and_ops_outside_by_nothing():
    manual_seed(1)
    layer, x = nn.Linear(3, 2, dtype=np.float64), leaf(4, 3)
    y = layer(x)
    assert y.grad_fn.module_path == "Linear" and repr(y.grad_fn) == "<LinearFn node in Linear, output shape (4, 2)>"
    z = y * 3.0
    assert z.grad_fn.module_path is None and repr(z.grad_fn) == "<Mul node, output shape (4, 2)>"
    doubler = Doubler()
    assert doubler(x).grad_fn.inputs[0].grad_fn.module_path == "Doubler"     # the root's own op: its class name


def test_an_exception_inside_forward_restores_the_callers_module():
    x = leaf(2, 3)
    with pytest.raises(RuntimeError, match="broken layer"):
        Fails()(x)
    assert running_module.get() is None and (x + 1.0).grad_fn.module_path is None
    model = nn.Sequential(Catches())
    assert model(x).grad_fn.module_path == "0"                   # back in the catching parent, not its child


def test_no_grad_records_nothing_and_leaves_nothing_behind_but_anomaly_mode_still_names_the_module():
    manual_seed(2)
    model = nn.Sequential(nn.Linear(3, 3, dtype=np.float64), nn.Linear(3, 3, dtype=np.float64))
    with no_grad():
        out = model(leaf(2, 3))
    assert out.grad_fn is None and running_module.get() is None
    model[1].weight.data[0, 0] = np.nan
    with no_grad(), detect_anomaly(), pytest.raises(AnomalyError, match="forward pass of LinearFn in 1 produced NaN"):
        model(leaf(2, 3))
    assert running_module.get() is None


def test_the_engines_errors_and_a_forward_error_name_the_module():
    manual_seed(3)
    model = nn.Sequential(nn.Linear(3, 2, dtype=np.float64))
    out = model(leaf(2, 3))
    out.backward(np.ones((2, 2)))
    with pytest.raises(RuntimeError, match=r"the LinearFn node in 0 \(output shape \(2, 2\)\) already freed"):
        out.backward(np.ones((2, 2)))

    class BadMatMul(nn.Module):
        def forward(self, x):
            return x @ Tensor(np.ones((5, 2)))
    with pytest.raises(ValueError) as info:
        nn.Sequential(nn.Linear(3, 3, dtype=np.float64), BadMatMul())(leaf(2, 3))
    assert "in MatMul.forward in 1, input shapes: (2, 3), (5, 2)" in info.value.__notes__


def test_each_thread_sees_only_its_own_module():
    """A module's forward running in one thread does not name the nodes another thread makes."""
    inside, release, seen = threading.Event(), threading.Event(), {}

    class Waits(nn.Module):
        def forward(self, x):
            inside.set()
            release.wait(10)
            return x.exp()

    waits = Waits()
    worker = threading.Thread(target=lambda: seen.setdefault("worker", waits(leaf(2)).grad_fn.module_path))
    worker.start()
    assert inside.wait(10)
    seen["main"] = (leaf(2) * 2.0).grad_fn.module_path      # made while the worker is inside Waits.forward
    release.set()
    worker.join(10)
    assert seen == {"main": None, "worker": "Waits"}


def test_a_graph_does_not_keep_its_model_alive():
    manual_seed(4)
    model = nn.Sequential(nn.Linear(3, 2, dtype=np.float64))
    out = model(leaf(2, 3))
    assert out.grad_fn.module_path == "0"
    del model
    gc.collect()
    assert out.grad_fn.module_path is None and repr(out.grad_fn) == "<LinearFn node, output shape (2, 2)>"
