"""The judge's own definitions are proven, not trusted: attention's gradients (what the attention
check compares a backward with) against central differences of its forward definition."""
import math

import numpy as np
import pytest

from exercises.checks.definitions import attention_grads, attention_weights


def _numeric_grads(q, k, v, mask, scale, upstream, step=1e-6):
    """dL/dq, dL/dk, dL/dv of L = sum(upstream * softmax(masked(q k^T scale)) v), by central differences."""
    def loss(q, k, v):
        return np.sum(upstream * (attention_weights(q, k, mask, scale, -np.inf) @ v))
    grads = []
    for i, given in enumerate((q, k, v)):
        grad = np.zeros_like(given)
        for index in np.ndindex(given.shape):
            up, down = [a.copy() for a in (q, k, v)], [a.copy() for a in (q, k, v)]
            up[i][index] += step
            down[i][index] -= step
            grad[index] = (loss(*up) - loss(*down)) / (2 * step)
        grads.append(np.ravel(grad))
    return np.concatenate(grads)


@pytest.mark.parametrize("seed, lead, t_q, t_k, d_k, d_v", [(0, (2,), 3, 5, 4, 3), (1, (2, 2), 4, 3, 3, 2),
                                                            (2, (1,), 2, 4, 6, 5)])
def test_attention_gradients_match_central_differences_with_masked_keys_and_a_fully_masked_query(
        seed, lead, t_q, t_k, d_k, d_v):
    r = np.random.default_rng(seed)
    q, k = r.standard_normal(lead + (t_q, d_k)), r.standard_normal(lead + (t_k, d_k))
    v = r.standard_normal(lead + (t_k, d_v))
    mask = r.random(lead + (t_q, t_k)) < 0.6
    mask[..., 0] = True
    mask.reshape(-1, t_q, t_k)[-1, -1] = False                        # one query sees no key
    upstream, scale = r.standard_normal(lead + (t_q, d_v)), 1 / math.sqrt(d_k)
    exact = attention_grads(q, k, v, mask, scale, upstream)
    assert np.allclose(exact, _numeric_grads(q, k, v, mask, scale, upstream), atol=1e-7)
    d_q = exact[: q.size].reshape(q.shape)
    assert np.all(d_q.reshape(-1, t_q, d_k)[-1, -1] == 0)                   # the fully masked query: no gradient
    cut = attention_grads(q, k, v, mask, scale, upstream, False)            # weights made outside the graph
    assert np.all(cut[: q.size + k.size] == 0) and np.array_equal(cut[q.size + k.size:], exact[q.size + k.size:])
