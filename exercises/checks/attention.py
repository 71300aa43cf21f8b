"""The checks of attention: scaled dot-product attention with masks (and the gradients its
backward gives q, k and v), splitting and merging heads, the sinusoidal table and the causal
mask, on odd sizes and several seeds."""

import math

import numpy as np

from exercises.checks.expected import expect
from exercises.checks.feedback import FRESH, Judge, Wrong, mistake, said, tolerance, with_fresh
from exercises.child_text import plain
from exercises.zygote import rebuilt

# batch dims, T_q, T_k, d_k, d_v: 3-D (B, T, d) and 4-D (B, H, T, d), one with H == T_k == d_k
ATTENTIONS = [((1,), 2, 3, 4, 3), ((2,), 3, 5, 16, 4), ((2, 3), 4, 3, 3, 2), ((1,), 4, 4, 5, 7), ((2,), 2, 3, 9, 2),
              ((2, 2), 3, 4, 6, 3)]


def _masks(lead, t_q, t_k, r):
    mask = r.random(lead + (t_q, t_k)) < 0.7
    flat = mask.reshape(-1, t_q, t_k)
    flat[..., 0] = True                                               # every query sees a key ...
    flat[0, 0, -1] = False                                            # (the first query not all of them)
    flat[-1, -1] = False                                              # ... but the last one of the last matrix
    return mask


def _attention_mistakes(q, k, mask):
    d_k = q.shape[-1]
    wrong = {("not scaled", "divide the scores by sqrt(d_k): with large d_k the softmax saturates"): (mask, 1.0, -np.inf),
             ("scaled by d_k, not sqrt(d_k)", "the scores' variance is d_k, so their scale is sqrt(d_k)"):
                 (mask, 1.0 / d_k, -np.inf),
             ("mask ignored", "masked keys get score -inf, so weight 0"): (np.ones_like(mask), 1 / math.sqrt(d_k), -np.inf),
             ("mask inverted", "True means may attend: fill where the mask is False"): (~mask, 1 / math.sqrt(d_k), -np.inf),
             ("masked with 0", "a score of 0 still gets weight: fill masked scores with -inf"):
                 (mask, 1 / math.sqrt(d_k), 0.0),
             ("masked with a finite number", "a query whose keys are all masked gets uniform weights: fill with -inf, "
              "and such a row gets zeros"): (mask, 1 / math.sqrt(d_k), -1e9)}
    return [(name, why, expect("attention_weights", q, k, *args)) for (name, why), args in wrong.items()] + \
        [("softmax over the queries", "each query's weights over the keys sum to 1: softmax over the last axis",
          expect("attention_weights_over_queries", q, k, mask, 1 / math.sqrt(d_k))),
         ("scaled after the softmax", "scale the scores q k^T / sqrt(d_k) before the softmax: scaled weights no "
          "longer sum to 1", expect("attention_weights", q, k, mask, 1.0, -np.inf) / math.sqrt(d_k)),
         ("scaled by the number of keys", "the scale is sqrt(d_k), the size of each key, not sqrt(T_k), how many "
          "keys there are", expect("attention_weights", q, k, mask, 1 / math.sqrt(k.shape[-2]), -np.inf)),
         ("scaled by the number of queries", "the scale is sqrt(d_k), the size of each key, not sqrt(T_q), how many "
          "queries there are", expect("attention_weights", q, k, mask, 1 / math.sqrt(q.shape[-2]), -np.inf)),
         ("keys transposed on fixed axes", "k.transpose(1, 2) swaps T and d only in 3-D (B, T, d); with a heads dim "
          "(B, H, T, d) it swaps H and T: transpose(-2, -1), the last two",
          expect("attention_weights_fixed_axes", q, k, mask, 1 / math.sqrt(d_k)))]


def check_attention(task):
    judge = Judge()
    for seed, (lead, t_q, t_k, d_k, d_v) in with_fresh(ATTENTIONS, again=1):
        r = np.random.default_rng(seed)
        q, k, v = r.standard_normal(lead + (t_q, d_k)) * 2, r.standard_normal(lead + (t_k, d_k)) * 2, \
            r.standard_normal(lead + (t_k, d_v))
        mask = _masks(lead, t_q, t_k, r)
        upstream = r.standard_normal(lead + (t_q, d_v))
        found = task.call("attention", q, k, v, mask, upstream)
        out, weights = found["out"], found["weights"]
        case = f"q {q.shape}, k {k.shape}, v {v.shape}, a padding mask, the last query fully masked"
        expected = expect("attention_weights", q, k, mask, 1 / math.sqrt(d_k), -np.inf)
        judge.compare("attention weights: softmax over the keys of q k^T / sqrt(d_k), masked keys -inf", case,
                      weights, expected, _attention_mistakes(q, k, mask))
        judge.compare("attention output: weights @ v", case, out, expected @ v)
        _judge_gradients(judge, found, q, k, v, mask, upstream, case + ", random upstream gradient")
    return "six sizes (d_k 3 to 16, d_v != d_k, with and without a heads dim), padding masks, a fully masked query, " \
        "and the gradients of q, k and v for a random upstream gradient"


CUT_OFF = ("no gradient to the queries and keys (weights computed outside the graph, e.g. from .data)",
           "the weights must come from Tensor ops on the scores (masked_fill, softmax): weights made from "
           "scores.data or scores.detach() are a constant to backward, so only v gets a gradient")


def _judge_gradients(judge, found, q, k, v, mask, upstream, case):
    """dL/dq, dL/dk, dL/dv after the probe's backward from the output with the judge's upstream
    gradient, against the definition's; each the child sent as None (no gradient arrived) read
    as zeros, what no gradient means, so that only the arrays compared decide."""
    if found["backward_raised"]:
        raise rebuilt(found["backward_raised"], 0)
    joined, scale = [], 1 / math.sqrt(q.shape[-1])
    for name, given in zip("qkv", (q, k, v)):
        grad = np.zeros_like(given) if found["grads"][name] is None else found["grads"][name]
        if np.shape(grad) != given.shape:
            raise Wrong(f"attention's gradients, {case}: dL/d{name} has shape {said(np.shape(grad))}, "
                        f"{name} {given.shape}")
        joined.append(np.ravel(grad))
    judge.compare("attention's gradients [dL/dq, dL/dk, dL/dv]: dV = W^T dO, dS = W * (dW - sum(dW * W)) with "
                  "dW = dO V^T, dQ = dS K / sqrt(d_k), dK = dS^T Q / sqrt(d_k)", case, np.concatenate(joined),
                  expect("attention_grads", q, k, v, mask, scale, upstream),
                  [(*CUT_OFF, expect("attention_grads", q, k, v, mask, scale, upstream, False))])


def check_heads(task):
    judge = Judge()
    for seed, (batch, length, d_model, heads) in with_fresh(((1, 2, 6, 3), (3, 5, 8, 2), (2, 4, 6, 6), (2, 3, 12, 3))):
        r = np.random.default_rng(seed)
        x = r.standard_normal((batch, length, d_model))
        case = f"(B={batch}, T={length}, d_model={d_model}), {heads} heads"
        judge.compare("_split_heads: (B, T, d_model) -> (B, H, T, d_head), head h taking its slice of every token",
                      case, task.call("heads", x, d_model, heads, "split"), expect("split_heads", x, heads),
                      [("reshaped straight to (B, H, T, d_head)", "reshape to (B, T, H, d_head) first, then swap T "
                        "and H", expect("split_heads_wrong", x, heads, "straight")),
                       ("T and H not swapped", "after the reshape to (B, T, H, d_head), transpose(1, 2)",
                        expect("split_heads_wrong", x, heads, "no_swap")),
                       ("heads strided, not contiguous", "head h takes the contiguous slice h*d_head:(h+1)*d_head of "
                        "each token: reshape to (B, T, H, d_head), H before d_head",
                        expect("split_heads_wrong", x, heads, "strided"))])
        y = r.standard_normal((batch, heads, length, d_model // heads))
        judge.compare("_merge_heads: (B, H, T, d_head) -> (B, T, d_model), each token's heads side by side", case,
                      task.call("heads", y, d_model, heads, "merge"), expect("merge_heads", y),
                      [("merged without swapping H and T back", "transpose (B, H, T, d) to (B, T, H, d) before the reshape",
                        expect("merge_heads_unswapped", y))])
    return "four sizes, one of them T == H, split and merge"


SINUSOIDAL = {"swapped": ("sin and cos swapped", "even dims take sin, odd dims cos"),
              "i_not_2i": ("exponent i/d, not 2i/d", "dims 2i and 2i+1 share the frequency 1 / 10000^(2i/d)"),
              "multiplied": ("multiplied by 10000^(2i/d)", "the angle is pos / 10000^(2i/d): frequencies fall with i"),
              "halves": ("sines then cosines in halves", "sin and cos interleave: even dims sin, odd dims cos"),
              "integer_division": ("integer division in the exponent", "2i // d is 0 for every 2i < d: the exponent "
                                   "is the true division 2i / d"),
              "doubled": ("exponent 2 * 2i / d", "np.arange(0, d_model, 2) already counts 2i: the exponent is "
                          "that over d_model, not doubled again"),
              "from_one": ("positions counted from 1", "the first position is 0: PE[0] = (0, 1, 0, 1, ...)")}
ODD_WIDTH = mistake("assumes an even d_model", "with an odd d_model there is one more sin dim than cos dims: the cos "
                    "dims take the first d_model // 2 angles")


NOT_FLOAT64 = mistake("table not float64", "the table is a float64 constant, cast to each model's dtype where it is "
                     "added: a float32 table puts float32 rounding (about 5e-7) into float64 models")


def check_sinusoidal(task):
    judge = Judge()
    fresh = [tuple(int(n) for n in np.random.default_rng(seed).integers((2, 2), (60, 30))) for seed in FRESH]
    for max_len, d in ((1, 2), (4, 4), (6, 8), (5, 7), (40, 16), (3, 1), *fresh):
        what, case = "sinusoidal_table: PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(...)", \
            f"max_len {max_len}, d_model {d}"
        try:
            table = task.call("sinusoidal", max_len, d)
        except ValueError as err:
            raise Wrong(f"{what}, {case}: " + (ODD_WIDTH if d % 2 else f"raised ValueError: {err}")) from None
        judge.compare(what, case, table,
                      expect("sinusoidal", max_len, d, "right"),
                      [(*SINUSOIDAL[v], expect("sinusoidal", max_len, d, v)) for v in SINUSOIDAL],
                      **tolerance(np.float64(0)))      # a float64 table, to float64's precision
        if np.asarray(table).dtype != np.float64:
            raise Wrong(f"{what}, {case}: {NOT_FLOAT64}")
    return "six sizes, even and odd widths, up to 40 positions"


def check_causal_mask(task):
    judge = Judge()
    for n in (3, 5, 2, 1, *(int(np.random.default_rng(seed).integers(6, 40)) for seed in FRESH)):
        found = task.call("causal_mask", n)
        if plain(found["type"]) != "ndarray":
            why = f"it returns a {found['type']}: return a numpy array, which the model negates (~mask) and broadcasts"
            raise Wrong(f"causal_mask, length {n}: {mistake('not an array', why)}")
        mask = found["mask"]
        judge.compare("causal_mask: query t may see keys 0..t (True = may attend)", f"length {n}", mask,
                      expect("causal_mask", n, 0),
                      [("diagonal excluded", "a query may see itself: keep the diagonal", expect("causal_mask", n, -1)),
                       ("one token of the future", "query t sees key t + 1: the triangle is one too wide",
                        expect("causal_mask", n, 1)),
                       ("True means masked", "here True means may attend: the lower triangle is True",
                        expect("upper_mask", n)),
                       ("upper triangle", "the upper triangle (key >= query) lets each query see its later keys, "
                        "the future: query t may see keys 0..t only", expect("upper_mask", n, 0))])
        if mask.dtype != bool:
            why = f"dtype {mask.dtype}: masks are boolean, True = may attend"
            raise Wrong(f"causal_mask: a boolean mask, length {n}: {mistake('not boolean', why)}")
    return "lengths 3, 5, 2 and 1"
