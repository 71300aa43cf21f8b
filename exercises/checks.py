"""The checks that grade each exercise, run inside the project being graded.

Each check calls the learner's code on inputs chosen to expose the usual mistakes and
compares with the definition: a gradient against finite differences or its formula, a
forward against numpy, a decoder on a model whose answers are known. On a mismatch it
says what is wrong in the learner's terms: which output or input's gradient, the worst
element, expected against got, and, when the answer matches a classic wrong one, the likely
mistake. `python -m exercises check` runs them (exercises/__main__.py), one process per
project, with the numpy kernels (AUTOGRAD_KERNELS=numpy) and Numba's JIT off.
"""

import math
import sys

import numpy as np


class Wrong(Exception):
    """The learner's answer is wrong; the message says how."""


def compare(what, got, expected, known_mistakes=(), atol=1e-6, rtol=1e-5):
    """Raise Wrong unless got equals expected; name a known mistake (value, message) it matches."""
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    for value, message in known_mistakes:
        value = np.asarray(value, dtype=float)
        if got.shape == value.shape and np.allclose(got, value, atol=atol, rtol=rtol, equal_nan=True) \
                and not np.allclose(value, expected, atol=atol, rtol=rtol):
            raise Wrong(f"{what}: {message}")
    if got.shape != expected.shape:
        raise Wrong(f"{what}: shape {got.shape}, expected {expected.shape}")
    close = np.isclose(got, expected, atol=atol, rtol=rtol, equal_nan=True)
    if not close.all():
        errors = np.where(np.isnan(got) != np.isnan(expected), np.inf, np.abs(np.nan_to_num(got - expected)))
        worst = np.unravel_index(np.argmax(errors), got.shape)
        raise Wrong(f"{what}: {int((~close).sum())} of {got.size} elements differ; the worst, at {tuple(map(int, worst))}: "
                    f"expected {expected[worst]:.6g}, got {got[worst]:.6g}")


def rng():
    return np.random.default_rng(0)


# ----- the scalar engine -----

def check_value_mul():
    from autograd.scalar import Value
    a, b = Value(2.0), Value(-3.0)
    (a * b).backward()
    compare("d(a*b)/da and d(a*b)/db for a=2, b=-3", [a.grad, b.grad], [-3.0, 2.0],
            [([2.0, -3.0], "each factor's gradient is out.grad times the OTHER factor's data")])
    x = Value(3.0)
    (x * x).backward()
    compare("d(x*x)/dx at x=3", x.grad, 6.0, [(3.0, "use += (not =): x is both factors, and both contributions count")])
    return "the product rule, and a Value used twice"


def check_topological_sort():
    from autograd.scalar import Value, topological_order
    a = Value(0.5)
    b, c = a * 2.0, a + 1.0
    d = (b * c).tanh()
    order = topological_order(d)
    if len(order) != len({id(v) for v in order}):
        raise Wrong("topological order: a Value appears more than once (a reached by two paths is listed twice; "
                    "keep a visited set)")
    position = {id(v): i for i, v in enumerate(order)}
    for v in order:
        for p in v.parents:
            if id(p) not in position:
                raise Wrong(f"topological order: {p!r}, a parent of {v!r}, is missing")
            if position[id(p)] > position[id(v)]:
                raise Wrong(f"topological order: {v!r} is listed before its parent {p!r}")
    if order[-1] is not d:
        raise Wrong("topological order: the output must come last")
    d.backward()
    h = 1e-6
    f = lambda x: math.tanh((2 * x) * (x + 1))   # noqa: E731
    compare("dd/da through the diamond a -> (2a, a+1) -> product -> tanh", a.grad, (f(0.5 + h) - f(0.5 - h)) / (2 * h))
    return "a diamond-shaped graph: order and gradient"


# ----- tensors -----

def check_unbroadcast():
    from autograd.engine import unbroadcast
    g = rng().standard_normal((2, 3, 4))
    cases = [((3, 4), g.sum(axis=0)), ((3, 1), g.sum(axis=(0, 2))[:, None]), ((1, 1, 4), g.sum(axis=(0, 1))[None, None]),
             ((4,), g.sum(axis=(0, 1))), ((), g.sum()), ((2, 3, 4), g)]
    for shape, expected in cases:
        got = unbroadcast(g, shape)
        compare(f"unbroadcast of a (2, 3, 4) gradient to {shape}", got, expected,
                [(expected.reshape(-1), "keep the stretched dims of size 1 (sum with keepdims=True)")]
                if expected.ndim and 1 in shape else ())
    return "six shapes a (2, 3, 4) gradient can reduce to"


def check_matmul_backward():
    from autograd import GradcheckError, Tensor, gradcheck
    r = rng()
    for a_shape, b_shape in (((3, 4), (4, 5)), ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4, 5)),
                             ((3, 4), (4,))):
        a = Tensor(r.standard_normal(a_shape), requires_grad=True)
        b = Tensor(r.standard_normal(b_shape), requires_grad=True)
        try:
            gradcheck(lambda a, b: a @ b, [a, b])        # finite differences, random upstream gradients
        except GradcheckError as err:
            raise Wrong(f"{a_shape} @ {b_shape}: {err}") from None
        except ValueError as err:
            raise Wrong(f"{a_shape} @ {b_shape}: {err}; dL/dA has A's shape: grad (M, N) @ B^T (N, K), "
                        "and dL/dB = A^T (K, M) @ grad (M, N)") from None
    return "matrices, batches, broadcast batches and vectors, against finite differences"


def check_matmul_loops():
    from autograd.kernels import loops
    r = rng()
    for a_shape, b_shape in (((3, 5), (5, 2)), ((2, 3, 4), (2, 4, 7)), ((1, 1), (1, 1)), ((2, 0, 3), (2, 3, 4))):
        a, b = r.standard_normal(a_shape), r.standard_normal(b_shape)
        got = loops.matmul(a, b)
        compare(f"loops.matmul {a_shape} @ {b_shape}", got, a @ b,
                [(np.broadcast_to(a[..., :, -1:] * b[..., -1:, :], got.shape),
                  "c[t, i, j] keeps only the last product: add each a*b term (+=)")] if a.size and b.size else ())
    return "odd sizes, a batch, 1 x 1 and an empty dim, against numpy"


# ----- kernels: softmax, log-softmax, layer norm, Adam -----

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


# ----- layers -----

def check_linear():
    from autograd import Tensor
    from nn import functional as F
    r = rng()
    x, w, b = r.standard_normal((2, 3, 4)), r.standard_normal((5, 4)), r.standard_normal(5)
    try:
        got = F.linear(Tensor(x), Tensor(w), Tensor(b)).data
        no_bias = F.linear(Tensor(x), Tensor(w)).data
    except ValueError as err:
        raise Wrong(f"linear of x (2, 3, 4) with W (5, 4): {err}; W is (out, in), so y = x W^T") from None
    compare("linear: x (2, 3, 4), W (5, 4), b (5,)", got, x @ w.T + b)
    compare("linear without a bias", no_bias, x @ w.T)
    return "a batch of sequences, with and without a bias"


def check_embedding():
    from autograd import Tensor
    from nn import functional as F
    weight = Tensor(rng().standard_normal((7, 3)), requires_grad=True)
    ids = np.array([[1, 4, 1], [6, 0, 2]])
    out = F.embedding(ids, weight)
    compare("embedding of ids (2, 3) in a (7, 3) table", out.data, weight.data[ids])
    out.sum().backward()
    counts = np.bincount(ids.reshape(-1), minlength=7)[:, None] * np.ones(3)
    compare("the table's gradient (a repeated id accumulates)", weight.grad, counts)
    return "a (2, 3) batch of ids with a repeat, and its gradient"


# ----- attention -----

def _attention(q, k, v, mask):
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    return _stable_softmax(np.where(mask, scores, -np.inf))


def check_attention():
    from autograd import Tensor
    from transformer.attention import scaled_dot_product_attention
    r = rng()
    q, k, v = r.standard_normal((2, 3, 16)), r.standard_normal((2, 5, 16)), r.standard_normal((2, 5, 4))
    mask = np.ones((2, 3, 5), dtype=bool)
    mask[:, :, 3:] = False
    mask[1, 2] = False                                                   # a query that may see nothing
    out, weights = scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), mask)
    expected = _attention(q, k, v, mask)
    unscaled = _stable_softmax(np.where(mask, q @ np.swapaxes(k, -1, -2), -np.inf))
    compare("attention weights (2 batches, 3 queries, 5 keys, d_k 16)", weights.data, expected,
            [(unscaled, "the scores are not divided by sqrt(d_k): with d_k = 16 they are 4x too large"),
             (_stable_softmax(q @ np.swapaxes(k, -1, -2) / 4.0), "the mask is ignored: masked keys must get "
                                                                    "score -inf, weight 0")])
    compare("attention output", out.data, expected @ v)
    return "weights and output, with a padding mask and a fully masked query"


def check_heads():
    from autograd import Tensor
    from transformer.attention import MultiHeadAttention
    attention = MultiHeadAttention(8, 2)
    x = rng().standard_normal((3, 4, 8))
    split = attention._split_heads(Tensor(x))
    compare("_split_heads of (B=3, T=4, d_model=8) into 2 heads", split.data,
            x.reshape(3, 4, 2, 4).transpose(0, 2, 1, 3),
            [(x.reshape(3, 2, 4, 4), "reshape to (B, T, H, d_head) first, then swap T and H: each head takes "
                                     "its slice of every token's vector")])
    heads = rng().standard_normal((3, 2, 4, 4))                         # (B, H, T, d_head)
    compare("_merge_heads of (B=3, H=2, T=4, d_head=4)", attention._merge_heads(Tensor(heads)).data,
            heads.transpose(0, 2, 1, 3).reshape(3, 4, 8),
            [(heads.reshape(3, 4, 8), "heads merged in the wrong order: transpose (B, H, T, d) to (B, T, H, d) "
                                      "before the reshape, so each token gets its heads side by side")])
    return "split and merge, shapes and order"


def check_sinusoidal():
    from transformer.positional import sinusoidal_table
    for max_len, d in ((6, 8), (5, 7)):
        pos = np.arange(max_len)[:, None]
        angle = pos / 10000 ** (np.arange(0, d, 2) / d)
        expected, swapped = np.zeros((max_len, d)), np.zeros((max_len, d))
        expected[:, 0::2], expected[:, 1::2] = np.sin(angle), np.cos(angle[:, : d // 2])
        swapped[:, 0::2], swapped[:, 1::2] = np.cos(angle), np.sin(angle[:, : d // 2])
        compare(f"sinusoidal_table({max_len}, {d})", sinusoidal_table(max_len, d), expected,
                [(swapped, "sin and cos are swapped: even dims take sin, odd dims cos")])
    return "an even and an odd width"


def check_causal_mask():
    from transformer.masks import causal_mask
    for n in (1, 4):
        mask = np.asarray(causal_mask(n))
        expected = np.tril(np.ones((n, n), dtype=bool))
        compare(f"causal_mask({n})", mask, expected,
                [(np.tril(np.ones((n, n)), -1), "off by one: a query may see itself (the diagonal is allowed)"),
                 (np.tril(np.ones((n, n)), 1), "off by one: query t sees key t + 1, one token of the future")])
        if mask.dtype != bool:
            raise Wrong(f"causal_mask({n}): dtype {mask.dtype}, expected bool (True = may attend)")
    return "lengths 1 and 4"


# ----- decoding -----

BOS, EOS, PAD = 0, 1, 2


class MarkovModel:
    """A stand-in encoder-decoder whose next-token log-probabilities depend on the last
    token only (table[last, next]), so every decoder's right answer is known."""

    def __init__(self, table):
        self.log_probs = np.log(np.asarray(table, dtype=float) + 1e-12)

    def make_src_mask(self, src):
        return None

    def encode(self, src, mask):
        from autograd import Tensor
        return Tensor(np.zeros((len(src), 1, 1)))

    def new_cache(self):
        return {}

    def decode(self, ys, memory, src_mask, cache=None):
        from autograd import Tensor
        return Tensor(self.log_probs[np.asarray(ys)])                   # (B, T, V)


def check_greedy_decode():
    from transformer.decoding import greedy_decode
    # tokens: 0 BOS, 1 EOS, 2 PAD, 3 a, 4 b.  From BOS: a; a -> b; b -> EOS.
    table = [[0, .1, 0, .6, .3], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0, .1, 0, .2, .7], [0, .8, 0, .1, .1]]
    for use_cache in (True, False):
        got = greedy_decode(MarkovModel(table), np.zeros((2, 3), dtype=np.int64), 6, BOS, EOS, PAD, use_cache=use_cache)
        compare(f"greedy_decode (use_cache={use_cache}) where BOS -> a -> b -> EOS is most likely", got,
                np.array([[3, 4, 1], [3, 4, 1]]),
                [(np.array([[3, 4, 1, 3, 4, 1], [3, 4, 1, 3, 4, 1]])[:, :got.shape[1]] if got.ndim == 2 else got[:0],
                  "decoding goes on after EOS: stop when every row has produced EOS")])
    return "with and without the cache"


def check_beam_search():
    from transformer.decoding import beam_search
    # From BOS: EOS (0.4) or a (0.6); a -> b (0.7); b -> EOS (0.88).  "EOS" has log-prob -0.92,
    # "a b EOS" -1.00 but -0.84 after the length penalty ((5 + 3) / 6) ** 0.6.
    table = [[0, .4, 0, .6, 0], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0, .1, 0, .2, .7], [0, .88, 0, .06, .06]]
    got = beam_search(MarkovModel(table), np.zeros((1, 3), dtype=np.int64), 6, BOS, EOS, beam_size=3)
    if got == [[1]]:
        raise Wrong("beam_search returned 'EOS' over 'a b EOS': without length normalisation (divide a finished "
                    "hypothesis's log-probability by length_penalty(its length)) short outputs always win")
    compare("beam_search (beam 3) on a model where 'a b EOS' wins after the length penalty", got[0], [3, 4, 1])
    greedy_table = [[0, .1, 0, .5, .4], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0, .9, 0, .05, .05], [0, .9, 0, .05, .05]]
    got = beam_search(MarkovModel(greedy_table), np.zeros((2, 3), dtype=np.int64), 5, BOS, EOS, beam_size=1)
    compare("beam_search with beam 1 (greedy) on two rows", np.array(got), [[3, 1], [3, 1]])
    return "the length penalty deciding, and beam 1"


def check_kv_cache():
    from autograd import manual_seed, no_grad
    from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig
    prompt = np.array([[1, 5, 2, 7]])
    results = {}
    for positional in ("none", "rope"):
        manual_seed(0)
        model = DecoderOnly(DecoderOnlyConfig(vocab=9, d_model=16, num_heads=2, d_ff=32, num_layers=2, max_len=16,
                                              positional=positional, pad_id=None)).eval()
        with no_grad():
            cached = model.generate(prompt, 6, use_cache=True, return_logits=True)[1]
            full = model.generate(prompt, 6, use_cache=False, return_logits=True)[1]
        results[positional] = (np.asarray(cached), np.asarray(full))
    none_ok = np.allclose(*results["none"], atol=1e-4)
    rope_ok = np.allclose(*results["rope"], atol=1e-4)
    if none_ok and not rope_ok:
        raise Wrong("the cached keys and values are right, but the position offset is lost: the new queries sit "
                    "at positions past.. (past = how many positions the cache holds), and RoPE needs that offset")
    compare("logits of 6 generated tokens, with the cache against without (no positions)", *results["none"], atol=1e-4)
    compare("the same with RoPE positions", *results["rope"], atol=1e-4)
    return "cached decoding equal to uncached, without positions and with RoPE"


def check(name):
    """Run one exercise's check: (passed, message)."""
    try:
        what = globals()[f"check_{name}"]()
    except Wrong as err:
        return False, f"exercise {name}: not yet: {err}"
    except NotImplementedError as err:
        return False, f"exercise {name}: NotImplementedError: {err}"
    except Exception as err:                             # noqa: BLE001  the learner's code may raise anything
        return False, f"exercise {name}: raised {type(err).__name__}: {err}"
    return True, f"exercise {name}: passed ({what})"


def main(names):
    results = [check(name) for name in names]
    for _, message in results:
        print(message)
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
