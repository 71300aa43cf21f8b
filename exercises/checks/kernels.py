"""The checks of kernels."""

import math

import numpy as np

from exercises.checks.feedback import Wrong, compare, rng


def _stable_softmax(x):
    m = np.max(x, axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0
    e = np.exp(x - m)
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s != 0)


def check_softmax():
    from autograd.kernels import reference
    x = rng().standard_normal((3, 5)) * 3
    with np.errstate(all="ignore"):
        compare("softmax of (3, 5) logits", reference.softmax(x), _stable_softmax(x))
        large = x + 1000.0
        compare("softmax of logits near 1000", reference.softmax(large), _stable_softmax(large),
                [(np.exp(large) / np.exp(large).sum(-1, keepdims=True),
                  "exp overflows: subtract each row's max before exp")])
        masked = np.full((2, 4), -np.inf)
        masked[0, :2] = [0.0, 1.0]
        compare("softmax of a row of -inf (every key masked) and a partly masked row", reference.softmax(masked),
                _stable_softmax(masked), [(np.where(np.isinf(masked[:, :1]), np.nan, _stable_softmax(masked)),
                                           "a fully masked row must give zeros: shift it by 0, not by its max -inf")])
    return "ordinary, large and masked logits"


def check_softmax_backward():
    from autograd.kernels import reference
    r = rng()
    y = _stable_softmax(r.standard_normal((4, 6)))
    dy = r.standard_normal((4, 6))
    compare("softmax_backward: dx", reference.softmax_backward(y, dy),
            y * (dy - (dy * y).sum(-1, keepdims=True)),
            [(y * dy, "the subtraction is missing: dx_i = y_i (dy_i - sum_j dy_j y_j), every output depends on "
                      "every input")])
    return "a (4, 6) batch of rows, random upstream gradient"


def check_log_softmax():
    from autograd.kernels import reference
    x = rng().standard_normal((3, 7)) * 4
    with np.errstate(all="ignore"):
        for shift, what in ((0.0, "ordinary logits"), (800.0, "logits near 800")):
            xs = x + shift
            m = xs.max(-1, keepdims=True)
            expected = xs - m - np.log(np.exp(xs - m).sum(-1, keepdims=True))
            compare(f"log_softmax of {what}", reference.log_softmax(xs), expected,
                    [(xs - np.log(np.exp(xs).sum(-1, keepdims=True)),
                      "without the max shift exp overflows (cross-entropy becomes inf or NaN): use "
                      "(x - max) - log sum exp(x - max)")])
        masked = np.full((1, 3), -np.inf)
        compare("log_softmax of a fully masked row", reference.log_softmax(masked), np.zeros((1, 3)))
    return "ordinary and large logits, a fully masked row"


def check_layer_norm_backward():
    from autograd.kernels import reference
    r = rng()
    x, w, b, g = r.standard_normal((3, 5)), r.standard_normal(5), r.standard_normal(5), r.standard_normal((3, 5))
    _, xhat, rstd = reference.layer_norm(x, w, b, 1e-5)
    dx, dw, db = reference.layer_norm_backward(g, xhat, rstd, w)
    h, numeric = 1e-6, np.zeros_like(x)
    for i in np.ndindex(x.shape):
        plus, minus = x.copy(), x.copy()
        plus[i] += h
        minus[i] -= h
        numeric[i] = ((reference.layer_norm(plus, w, b, 1e-5)[0] - reference.layer_norm(minus, w, b, 1e-5)[0]) * g).sum() / (2 * h)
    compare("LayerNorm's dx against finite differences", dx, numeric,
            [(rstd * g * w, "the mean terms are missing: x enters every output of its row through the mean and "
                            "the variance: dx = rstd (g w - mean(g w) - xhat mean(g w xhat))")], atol=1e-5)
    compare("LayerNorm's dweight", dw, (g * xhat).sum(0))
    compare("LayerNorm's dbias", db, g.sum(0))
    return "dx against finite differences, dweight, dbias"


def check_adam_step():
    from autograd.kernels import reference
    r = rng()
    p, m, v = r.standard_normal(6), np.zeros(6), np.zeros(6)
    expected_p, em, ev = p.copy(), np.zeros(6), np.zeros(6)
    unbiased_p = p.copy()
    lr, b1, b2, eps = 0.1, 0.9, 0.999, 1e-8
    for step in (1, 2, 3):
        g = r.standard_normal(6)
        reference.adam_step(p, g, m, v, lr, b1, b2, eps, 0.0, True, step)
        em, ev = b1 * em + (1 - b1) * g, b2 * ev + (1 - b2) * g * g
        expected_before = expected_p.copy()
        expected_p = expected_p - lr * (em / (1 - b1 ** step)) / (np.sqrt(ev / (1 - b2 ** step)) + eps)
        unbiased_p = expected_before - lr * em / (np.sqrt(ev) + eps)
        compare(f"the parameters after step {step}", p, expected_p,
                [(unbiased_p, "the bias correction is missing: m and v start at 0, so divide them by "
                              "1 - beta1^t and 1 - beta2^t")])
        compare(f"the first moment m after step {step}", m, em)
        compare(f"the second moment v after step {step}", v, ev)
    return "three steps: parameters and both moments"
