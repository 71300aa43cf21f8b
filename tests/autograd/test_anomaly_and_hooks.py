"""Anomaly detection (where a NaN or inf first appears) and gradient / forward hooks."""

import numpy as np
import pytest

import nn
from autograd import AnomalyError, Tensor, detect_anomaly, manual_seed
from nn import functional as F


def _model():
    manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4, dtype=np.float64), nn.ReLU(), nn.Linear(4, 2, dtype=np.float64))


@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")   # the NaN/inf made on purpose
def test_log_of_zero_deep_in_a_model_names_the_op_and_the_user_line():
    model = _model()
    x = Tensor(np.ones((5, 3)))
    with detect_anomaly():
        h = model(x)
        with pytest.raises(AnomalyError) as info:
            (h * 0).log().sum()                                  # log(0) = -inf: the culprit line
    message = str(info.value)
    assert "forward pass of Log produced infinity" in message
    assert "(5, 2) -> output (5, 2)" in message
    assert "test_anomaly_and_hooks.py" in message and "(h * 0).log().sum()" in message
    assert info.value.node.name == "Log"


def test_a_line_with_no_source_to_quote_is_named_without_a_dangling_colon():
    """Code from stdin or `python -c` has no source line to quote: the message names the place
    and ends there, not with 'in <module>: '."""
    import subprocess
    import sys
    script = ("import numpy as np\nfrom autograd import Tensor, detect_anomaly\nx = Tensor(np.zeros(3))\n"
              "with detect_anomaly():\n    x.log().sum()\n")
    result = subprocess.run([sys.executable, "-W", "ignore", "-"], input=script, capture_output=True, text=True,
                            timeout=120)
    last = result.stderr.strip().splitlines()[-1]
    assert "forward pass of Log produced infinity" in last and "created at <stdin>, line 5, in <module>" in last
    assert not last.rstrip().endswith(":"), last


@pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt:RuntimeWarning")   # the NaN made on purpose
@pytest.mark.filterwarnings("ignore:divide by zero encountered in divide:RuntimeWarning")   # its gradient, inf
def test_sqrt_of_negative_is_caught_in_forward_and_nan_gradient_in_backward():
    x = Tensor(np.array([[-1.0, 4.0]]), requires_grad=True)
    with detect_anomaly():
        with pytest.raises(AnomalyError, match="forward pass of Sqrt produced NaN"):
            x.sqrt()
    # 0 * inf in backward: sqrt(0) is fine forward, its gradient 1 / (2 sqrt(0)) is infinite
    z = Tensor(np.zeros((2, 3)), requires_grad=True)
    with detect_anomaly():
        y = z.sqrt().sum()
        with pytest.raises(AnomalyError, match=r"backward pass of Sqrt .* returned infinity .*shape \(2, 3\)"):
            y.backward()


class ShiftedRoot(nn.Module):
    """A layer with a bug: sqrt of its input minus 10, negative for ordinary inputs."""

    def forward(self, x):
        return (x - 10.0).sqrt()


@pytest.mark.filterwarnings("ignore:invalid value encountered in sqrt:RuntimeWarning")   # the NaN made on purpose
def test_sqrt_of_negative_deep_in_a_model_names_the_layer_line():
    manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4, dtype=np.float64), ShiftedRoot(), nn.Linear(4, 2, dtype=np.float64))
    with detect_anomaly():
        with pytest.raises(AnomalyError) as info:
            F.mse_loss(model(Tensor(np.ones((2, 3)))), Tensor(np.zeros((2, 2))))
    assert "forward pass of Sqrt in 1 produced NaN" in str(info.value)      # the module: model's '1'
    assert "in forward: return (x - 10.0).sqrt()" in str(info.value)


@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")   # the NaN/inf made on purpose
def test_anomaly_mode_is_off_outside_the_block_and_allows_masks():
    x = Tensor(np.zeros(3))
    assert np.isinf(x.log().data).all()                            # no error without the mode
    with detect_anomaly():
        scores = Tensor(np.ones((2, 2))).masked_fill(np.eye(2, dtype=bool), -np.inf)   # -inf by design
        np.testing.assert_allclose(scores.softmax(-1).data, [[0, 1], [1, 0]])


def test_nan_in_a_parameter_is_reported_at_the_first_op_that_uses_it():
    model = _model()
    model[0].weight.data[1, 2] = np.nan
    with detect_anomaly():
        with pytest.raises(AnomalyError, match=r"forward pass of LinearFn in 0 produced NaN .* inputs \[1\] already held"):
            model(Tensor(np.ones((2, 3))))


def test_tensor_hook_sees_and_replaces_gradients():
    x = Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    y = x * 2
    seen = []
    handle = y.register_hook(lambda g: seen.append(g.copy()))
    y.register_hook(lambda g: g * 10)                               # replaces dL/dy
    (y * y).sum().backward()
    np.testing.assert_allclose(seen[0], 2 * y.data)
    np.testing.assert_allclose(x.grad, 2 * (10 * 2 * y.data))
    handle.remove()
    x.grad = None
    leaf_seen = []
    x.register_hook(lambda g: leaf_seen.append(g) or g + 1)         # on a leaf, before accumulation
    (x * 3).sum().backward()
    np.testing.assert_allclose(x.grad, [4.0, 4.0, 4.0])
    assert len(seen) == 1 and len(leaf_seen) == 1
    with pytest.raises(ValueError, match=r"hook returned shape \(2,\), expected \(3,\)"):
        z = Tensor(np.ones(3), requires_grad=True)
        z.register_hook(lambda g: np.ones(2))
        (z * 1).sum().backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        Tensor(np.ones(3)).register_hook(print)


def test_forward_hook_sees_inputs_and_output_and_can_be_removed():
    model = _model()
    calls = []
    handle = model[1].register_forward_hook(lambda m, inputs, out: calls.append((m, inputs[0].shape, out.shape)))
    model(Tensor(np.ones((5, 3))))
    assert calls == [(model[1], (5, 4), (5, 4))]
    handle.remove()
    model(Tensor(np.ones((5, 3))))
    assert len(calls) == 1
    model[2].register_forward_hook(lambda m, inputs, out: out * 0)    # replaces the output
    assert not model(Tensor(np.ones((1, 3)))).data.any()
    loss = F.mse_loss(model(Tensor(np.ones((1, 3)))), Tensor(np.ones((1, 2))))
    assert loss.item() == 1.0
