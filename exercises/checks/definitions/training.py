"""The reference of the checks' end-to-end run: a short training of a tiny model written
out in numpy, forward, backward and Adam, to compare the project's run with."""

import numpy as np


def _forward(params, ids):
    embed, gain, shift, w1, b1, w2 = params
    x = embed[ids]                                                        # (B, T, d)
    mean, rstd = x.mean(-1, keepdims=True), 1.0 / np.sqrt(x.var(-1, keepdims=True) + 1e-5)
    xhat = (x - mean) * rstd
    h = xhat * gain + shift
    z = h @ w1.T + b1                                                     # (B, T, d)
    return xhat, rstd, h, z, z @ w2                                       # logits (B, T, V)


def _gradients(params, ids, targets):
    embed, gain, shift, w1, b1, w2 = params
    xhat, rstd, h, z, logits = _forward(params, ids)
    d, vocab = w1.shape[0], w2.shape[1]
    shifted = logits - logits.max(-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    one_hot = np.eye(vocab)[targets]
    loss = -(log_probs * one_hot).sum() / targets.size
    dlogits = (np.exp(log_probs) - one_hot) / targets.size
    dz = dlogits @ w2.T
    dh = dz @ w1
    dxhat = dh * gain
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    dembed = np.zeros_like(embed)
    np.add.at(dembed, ids.reshape(-1), dx.reshape(-1, d))
    return loss, [dembed, (dh * xhat).sum((0, 1)), dh.sum((0, 1)), dz.reshape(-1, d).T @ h.reshape(-1, d),
                  dz.sum((0, 1)), z.reshape(-1, d).T @ dlogits.reshape(-1, vocab)]


def tiny_training(embed, gain, shift, w1, b1, w2, ids, targets, steps, lr):
    """The loss before each of `steps` Adam steps (betas 0.9, 0.999, eps 1e-8) on
    cross-entropy(LayerNorm(embed[ids]) W1^T + b1) W2, targets)."""
    params = [p.astype(np.float64).copy() for p in (embed, gain, shift, w1, b1, w2)]
    m, v, losses = [np.zeros_like(p) for p in params], [np.zeros_like(p) for p in params], []
    for step in range(1, steps + 1):
        loss, grads = _gradients(params, ids, targets)
        losses.append(loss)
        for p, g, mp, vp in zip(params, grads, m, v):
            mp[:] = 0.9 * mp + 0.1 * g
            vp[:] = 0.999 * vp + 0.001 * g * g
            p -= lr * (mp / (1 - 0.9 ** step)) / (np.sqrt(vp / (1 - 0.999 ** step)) + 1e-8)
    return np.array(losses)
