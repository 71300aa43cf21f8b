"""Optimizers against hand-computed updates; schedules against their formulas."""

import math

import numpy as np
import pytest

import nn
from nn.optim import SGD, Adam, AdamW, clip_grad_norm_
from nn.schedule import LambdaLR, NoamLR, WarmupCosineLR

GRADS = [np.array([0.5, -1.0]), np.array([0.2, 0.4]), np.array([-0.3, 0.1])]


def run_three_steps(optimizer_cls, **hyper):
    p = nn.Parameter(np.array([1.0, 2.0]))
    opt = optimizer_cls([p], **hyper)
    history = []
    for g in GRADS:
        p.grad = g.copy()
        opt.step()
        history.append(p.data.copy())
    return history


def test_sgd_momentum_weight_decay_by_hand():
    lr, mom, wd = 0.1, 0.9, 0.01
    p, buf, expected = np.array([1.0, 2.0]), None, []
    for g in GRADS:
        d = g + wd * p
        buf = d if buf is None else mom * buf + d
        p = p - lr * buf
        expected.append(p)
    np.testing.assert_allclose(run_three_steps(SGD, lr=lr, momentum=mom, weight_decay=wd), expected, rtol=1e-14)


def test_adam_by_hand():
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8
    p, m, v, expected = np.array([1.0, 2.0]), 0.0, 0.0, []
    for t, g in enumerate(GRADS, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        expected.append(p)
    np.testing.assert_allclose(run_three_steps(Adam, lr=lr), expected, rtol=1e-14)


def test_adamw_decouples_weight_decay():
    lr, wd, b1, b2, eps = 0.01, 0.1, 0.9, 0.999, 1e-8
    p, m, v, expected = np.array([1.0, 2.0]), 0.0, 0.0, []
    for t, g in enumerate(GRADS, start=1):
        p = p * (1 - lr * wd)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
        expected.append(p)
    np.testing.assert_allclose(run_three_steps(AdamW, lr=lr, weight_decay=wd), expected, rtol=1e-14)


@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: Adam(ps, lr=0.1),
                                  lambda ps: AdamW(ps, lr=0.1, weight_decay=0.0)])
def test_optimizers_converge_on_a_quadratic(make):
    target = np.array([3.0, -1.0, 0.5])
    p = nn.Parameter(np.zeros(3))
    opt = make([p])
    for _ in range(300):
        opt.zero_grad()
        loss = ((p - target) ** 2).sum()
        loss.backward()
        opt.step()
    np.testing.assert_allclose(p.data, target, atol=1e-2)


def test_step_builds_no_graph_and_keeps_dtype():
    p = nn.Parameter(np.ones(3, np.float32))
    p.grad = np.ones(3, np.float32)
    Adam([p]).step()
    assert p.grad_fn is None and p.data.dtype == np.float32


def test_bad_gradient_shape_leaves_every_parameter_unchanged():
    a, b = nn.Parameter(np.ones(2)), nn.Parameter(np.ones(3))
    a.grad, b.grad = np.ones(2), np.ones(4)
    opt = SGD([a, b], lr=0.1)
    with pytest.raises(ValueError, match=r"shape \(4,\) does not match .* \(3,\); nothing was updated"):
        opt.step()
    np.testing.assert_array_equal(a.data, np.ones(2))


def test_clip_grad_norm_returns_total_norm_and_scales():
    a, b = nn.Parameter(np.zeros(2)), nn.Parameter(np.zeros(1))
    a.grad, b.grad = np.array([3.0, 0.0]), np.array([4.0])
    assert clip_grad_norm_([a, b], 1.0) == pytest.approx(5.0)
    assert np.sqrt((a.grad ** 2).sum() + (b.grad ** 2).sum()) == pytest.approx(1.0, rel=1e-5)
    assert clip_grad_norm_([a, b], 10.0) == pytest.approx(1.0, rel=1e-5)


def test_clip_grad_norm_scales_in_place_and_takes_a_generator():
    a, b = nn.Parameter(np.zeros(2, np.float32)), nn.Parameter(np.zeros(1, np.float32))
    a.grad, b.grad = np.array([3.0, 0.0], np.float32), np.array([4.0], np.float32)
    grad_of_a = a.grad
    assert clip_grad_norm_((p for p in (a, b)), 0.5) == pytest.approx(5.0)
    assert a.grad is grad_of_a and a.grad.dtype == np.float32         # scaled where it is, as in PyTorch
    np.testing.assert_allclose(np.concatenate([a.grad, b.grad]), [0.3, 0.0, 0.4], rtol=1e-5)


def test_noam_schedule_formula():
    p = nn.Parameter(np.zeros(1))
    opt = Adam([p], lr=2.0)
    sched = NoamLR(opt, d_model=64, warmup=10)
    lrs = []
    for _ in range(30):
        lrs.append(opt.param_groups[0]["lr"])
        sched.step()
    for k, lr in enumerate(lrs):
        s = k + 1
        assert lr == pytest.approx(2.0 * 64 ** -0.5 * min(s ** -0.5, s * 10 ** -1.5))
    assert np.argmax(lrs) == 9   # peak at the end of warm-up


def test_warmup_cosine_and_lambda():
    p = nn.Parameter(np.zeros(1))
    opt = SGD([p], lr=1.0)
    sched = WarmupCosineLR(opt, warmup=4, total=14, min_factor=0.1)
    lrs = []
    for _ in range(16):
        lrs.append(sched.get_last_lr()[0])
        sched.step()
    assert lrs[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert lrs[9] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lrs[14] == pytest.approx(0.1) and lrs[15] == pytest.approx(0.1)
    opt2 = SGD([p], lr=0.5)
    LambdaLR(opt2, lambda k: 0.5 ** k).step()
    assert opt2.param_groups[0]["lr"] == pytest.approx(0.25)
