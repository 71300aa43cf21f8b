"""The numpy definitions the checks compare with, and what each classic wrong answer gives.

Teacher-only: a student copy does not hold this file (it would give the solutions away);
it holds their results, recorded (exercises/checks/expected.py). Every function takes and
returns plain arrays (the checks call them through `expect(name, *arrays)`).
"""

import numpy as np


def _row_max(x):
    m = np.max(x, axis=-1, keepdims=True)
    return np.where(np.isfinite(m), m, 0.0)


def _normalise(e):
    s = e.sum(axis=-1, keepdims=True)
    return np.divide(e, s, out=np.zeros_like(e), where=s != 0)


# ----- softmax and log-softmax, right and wrong -----

def _poisoned(x):
    """Rows holding a NaN or a +inf: their softmax and log-softmax are NaN throughout."""
    return np.isnan(x).any(axis=-1, keepdims=True) | np.isposinf(x).any(axis=-1, keepdims=True)


def softmax(x):
    return np.where(_poisoned(x), np.nan, _normalise(np.exp(x - _row_max(x))))


def softmax_nan_hidden(x):
    """Softmax with a row holding NaN or +inf given zeros instead of NaN (a guard on sum > 0)."""
    return np.where(_poisoned(x), 0.0, softmax(x))


def softmax_global_max_guarded(x):
    """One max for the whole array, with the division guarded: an underflowed row gives zeros."""
    return _normalise(np.exp(x - np.max(x)))


def softmax_whole_sum(x, shifted):
    """exp(x) (shifted: by the array's max) over its sum over the whole array, not each row's."""
    e = np.exp(x - np.max(x)) if shifted else np.exp(x)
    return e / e.sum()


def softmax_no_keepdims(x):
    """Each row divided by the row sums laid along it (sum without keepdims; square inputs only)."""
    e = np.exp(x - _row_max(x))
    return e / e.sum(axis=-1)


def softmax_unshifted(x):
    e = np.exp(x)
    return e / e.sum(axis=-1, keepdims=True)


def softmax_mean_shift(x):
    e = np.exp(x - x.mean(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_global_max(x):
    e = np.exp(x - np.max(x))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_masked_nan(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_columns(x):
    e = np.exp(x - np.max(x, axis=0, keepdims=True))
    return e / e.sum(axis=0, keepdims=True)


def log_softmax(x):
    shifted = x - _row_max(x)
    s = np.exp(shifted).sum(axis=-1, keepdims=True)
    out = np.where(s == 0, 0.0, shifted - np.log(np.where(s == 0, 1.0, s)))
    return np.where(_poisoned(x), np.nan, out)


def log_softmax_masked_minus_inf(x):
    """Log-softmax with a fully masked row given -inf instead of 0."""
    return np.where(np.isneginf(x).all(axis=-1, keepdims=True), -np.inf, log_softmax(x))


def log_softmax_added(x):
    """(x - max) + log sum exp(x - max): the log-sum-exp added, not subtracted."""
    shifted = x - _row_max(x)
    return np.where(np.isneginf(x).all(axis=-1, keepdims=True), 0.0,
                    shifted + np.log(np.exp(shifted).sum(axis=-1, keepdims=True)))


def log_softmax_global_max(x, spelling):
    """One max for the whole array; a row whose sum underflows to 0 then gets log 0 ("plain"),
    log 1 ("log_one") or zeros, taken for a masked row ("zeroed")."""
    shifted = x - np.max(x)
    s = np.exp(shifted).sum(axis=-1, keepdims=True)
    with np.errstate(divide="ignore"):
        out = shifted - np.log(s if spelling == "plain" else np.where(s == 0, 1.0, s))
    masked = (s == 0) if spelling == "zeroed" else np.isneginf(x).all(axis=-1, keepdims=True)
    return np.where(masked, 0.0, out)


def log_softmax_whole_sum(x):
    """Log-softmax with one log-sum-exp over the whole array instead of one per row."""
    shifted = x - _row_max(x)
    return np.where(np.isneginf(x).all(axis=-1, keepdims=True), 0.0, shifted - np.log(np.exp(shifted).sum()))


def log_of_softmax(x):
    return np.log(softmax(x))


def log_softmax_unshifted(x):
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def log_softmax_max_dropped(x):
    return x - np.log(np.exp(x - _row_max(x)).sum(axis=-1, keepdims=True))


def log_softmax_masked_nan(x):
    m = np.max(x, axis=-1, keepdims=True)
    return (x - m) - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def softmax_backward(y, dy):
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))


def softmax_backward_no_subtraction(y, dy):
    return y * dy


def softmax_backward_unweighted_sum(y, dy):
    return y * (dy - dy.sum(axis=-1, keepdims=True))


def softmax_backward_no_leading_y(y, dy):
    return dy - (dy * y).sum(axis=-1, keepdims=True)


def softmax_backward_diagonal(y, dy):
    return y * (1 - y) * dy


def softmax_backward_first_axis(y, dy):
    """Softmax's backward with sum_j dy_j y_j taken over axis 0."""
    return y * (dy - (dy * y).sum(axis=0, keepdims=True))


def softmax_backward_whole_sum(y, dy):
    """Softmax's backward with sum_j dy_j y_j taken over the whole array."""
    return y * (dy - (dy * y).sum())


def softmax_backward_mean(y, dy):
    """Softmax's backward with the mean of dy y over the row instead of its sum."""
    return y * (dy - (dy * y).mean(axis=-1, keepdims=True))


def softmax_backward_no_keepdims(y, dy):
    """Softmax's backward with the row sums laid along each row (no keepdims; square only)."""
    return y * (dy - (dy * y).sum(axis=-1))


# ----- LayerNorm's backward -----

def layer_norm_dx(grad, xhat, rstd, weight):
    gw = grad * weight
    return rstd * (gw - gw.mean(axis=1, keepdims=True) - xhat * (gw * xhat).mean(axis=1, keepdims=True))


def layer_norm_dx_no_means(grad, xhat, rstd, weight):
    return rstd * grad * weight


def layer_norm_dx_no_xhat_term(grad, xhat, rstd, weight):
    gw = grad * weight
    return rstd * (gw - gw.mean(axis=1, keepdims=True))


def layer_norm_dx_no_weight(grad, xhat, rstd, weight):
    return layer_norm_dx(grad, xhat, rstd, np.ones_like(weight))


def rms_norm_parts(x, eps):
    rstd = 1 / np.sqrt((x * x).mean(axis=1, keepdims=True) + eps)
    return x * rstd, rstd


def rms_norm_dx(x, weight, grad, eps):
    xhat, rstd = rms_norm_parts(x, eps)
    gw = grad * weight
    return rstd * (gw - xhat * (gw * xhat).mean(axis=1, keepdims=True))


def rms_norm_dx_with_mean(x, weight, grad, eps):
    return layer_norm_dx(grad, *rms_norm_parts(x, eps), weight)


def rms_norm_dx_summed(x, weight, grad, eps):
    """RMSNorm's dx with the row's sum of dL/dxhat * xhat where the formula has its mean."""
    xhat, rstd = rms_norm_parts(x, eps)
    gw = grad * weight
    return rstd * (gw - xhat * (gw * xhat).sum(axis=1, keepdims=True))


def rms_norm_dx_over_rows(x, weight, grad, eps):
    """RMSNorm's dx with the row's sum of dL/dxhat * xhat divided by the number of rows N, not its width D."""
    xhat, rstd = rms_norm_parts(x, eps)
    gw = grad * weight
    return rstd * (gw - xhat * (gw * xhat).sum(axis=1, keepdims=True) / x.shape[0])


def rms_norm_dx_no_rstd(x, weight, grad, eps):
    return rms_norm_dx(x, weight, grad, eps) / rms_norm_parts(x, eps)[1]


def layer_norm_dweight(grad, xhat):
    return (grad * xhat).sum(axis=0)


def layer_norm_dbias(grad):
    return grad.sum(axis=0)


def layer_norm_dx_no_rstd(grad, xhat, rstd, weight):
    """LayerNorm's dx without the rstd factor."""
    return layer_norm_dx(grad, xhat, np.ones_like(rstd), weight)


def layer_norm_dx_sums(grad, xhat, rstd, weight):
    """LayerNorm's dx with sums over the row where the formula has means."""
    gw = grad * weight
    return rstd * (gw - gw.sum(axis=1, keepdims=True) - xhat * (gw * xhat).sum(axis=1, keepdims=True))


def layer_norm_dx_plus_xhat_term(grad, xhat, rstd, weight):
    """LayerNorm's dx with the xhat term added instead of subtracted."""
    gw = grad * weight
    return rstd * (gw - gw.mean(axis=1, keepdims=True) + xhat * (gw * xhat).mean(axis=1, keepdims=True))


def layer_norm_dx_column_means(grad, xhat, rstd, weight):
    """LayerNorm's dx with its means taken over axis 0 (the rows) instead of 1."""
    gw = grad * weight
    return rstd * (gw - gw.mean(axis=0, keepdims=True) - xhat * (gw * xhat).mean(axis=0, keepdims=True))


def layer_norm_dweight_times_weight(grad, xhat, weight):
    """dweight as the sum of g w xhat: the weight multiplied in once more."""
    return (grad * weight * xhat).sum(axis=0)


def layer_norm_dweight_mean(grad, xhat):
    """dweight averaged over the rows instead of summed."""
    return (grad * xhat).mean(axis=0)


def layer_norm_dbias_mean(grad):
    """dbias averaged over the rows instead of summed."""
    return grad.mean(axis=0)


# ----- Adam -----

def _adam_moments(m, v, g, beta1, beta2, variant):
    """m and v after one step with gradient g, as the variant updates them."""
    if variant == "betas_swapped":
        beta1, beta2 = beta2, beta1
    decay1, decay2 = (1.0, 1.0) if variant == "no_decay" else (beta1, beta2)
    square = np.abs(g) if variant == "v_of_g" else g if variant == "v_of_signed_g" else g * g
    return decay1 * m + (1 - beta1) * g, decay2 * v + (1 - beta2) * square


def _adam_move(m, v, step, lr, beta1, beta2, eps, variant):
    """lr m_hat / (sqrt(v_hat) + eps), the step p takes, as the variant computes it."""
    t = step + 1 if variant == "step_from_zero" else step
    m_hat, v_hat = m / (1 - beta1 ** t), v / (1 - beta2 ** t)
    if variant == "no_correction":
        m_hat, v_hat = m, v
    if variant == "m_hat_only":
        v_hat = v
    if variant == "sqrt_then_correct":
        return lr * m_hat / (np.sqrt(v) / (1 - beta2 ** t) + eps)
    with np.errstate(invalid="ignore"):
        return lr * m_hat / (np.sqrt(v_hat + eps) if variant == "eps_inside" else np.sqrt(v_hat) + eps)


def adam(p, grads, lr, beta1, beta2, eps, variant):
    """(parameters, m, v) after one Adam step per gradient in grads (variant: "right" or a mistake)."""
    p, m, v = p.copy(), np.zeros_like(p), np.zeros_like(p)
    p0 = p.copy()
    for step, g in enumerate(grads, 1):
        if variant == "not_in_place":                     # the caller's m and v stay 0; p moves
            m, v = np.zeros_like(p), np.zeros_like(p)
        if variant == "old_moments":                      # p moves with the moments of the step before
            p = p - np.nan_to_num(_adam_move(m, v, step, lr, beta1, beta2, eps, variant))
        m, v = _adam_moments(m, v, g, beta1, beta2, variant)
        if variant != "old_moments":
            p = p - _adam_move(m, v, step, lr, beta1, beta2, eps, variant)
    if variant == "not_in_place":
        m, v = np.zeros_like(p), np.zeros_like(p)
    return np.stack([p0 if variant == "p_not_in_place" else p, m, v])
