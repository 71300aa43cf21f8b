"""The checks of the layers: Linear's forward and Embedding's lookup, on batches of
sequences, odd sizes, with and without a bias, and the gradients that flow through them."""

import numpy as np

from exercises.checks.end_to_end import judge_training
from exercises.checks.expected import expect
from exercises.checks.feedback import Judge, Wrong, mistake, require_dtype, tolerance, with_fresh
from exercises.zygote import rebuilt

LINEARS = [((3, 3), 3), ((1, 3), 3), ((2, 4), 4), ((2, 3, 4), 5), ((5, 2), 3), ((3, 1, 2, 6), 7)]


BIAS_TRUTH = mistake("`if bias:` on an array", "an array of several numbers is neither true nor false: test "
                     "`if bias is not None:`")
NONE_BIAS = mistake("a missing bias added", "F.linear(x, W) passes bias=None: add the bias only if bias is not None")


def check_linear(task):
    judge = Judge()
    for seed, (x_shape, out) in with_fresh(LINEARS, again=3):
        r = np.random.default_rng(seed)
        x, w, b = r.standard_normal(x_shape), r.standard_normal((out, x_shape[-1])), r.standard_normal(out)
        case = f"x {x_shape}, W {w.shape}, b ({out},)"
        try:
            got = task.call("linear", x, w, b, None)["out"]
        except ValueError as err:
            raise Wrong(f"linear: y = x W^T + b, {case}: " + (BIAS_TRUTH if "truth value of an array" in str(err)
                                                              else f"raised ValueError: {err}")) from None
        try:
            no_bias = task.call("linear", x, w, None, None)["out"]
        except TypeError as err:
            if "NoneType" not in str(err):
                raise
            raise Wrong(f"linear without a bias: y = x W^T, {case}: {NONE_BIAS}") from None
        rows = int(np.prod(x_shape[:-1]))
        judge.compare("linear: y = x W^T + b", case, got, expect("linear", x, w, b),
                      [("W not transposed", "W is (out, in): y = x W^T", expect("linear", x, w.T, b)),
                       ("bias left out", "add the bias b to every row", expect("linear", x, w, np.zeros(out))),
                       ("bias subtracted", "y = x W^T + b: add the bias", expect("linear", x, w, -b))]
                      + ([("bias added along the wrong axis", "b has one value per output feature: add it to each "
                           "row (N, out) + (out,)", expect("linear_bias_on_rows", x, w, b))] if rows == out else []),
                      **tolerance(x))
        judge.compare("linear without a bias: y = x W^T", case, no_bias, expect("linear", x, w, np.zeros(out)),
                      **tolerance(x))
    judge_linear_gradients(judge, task)
    judge_float32(task)
    judge_training(judge, task)
    return "six shapes (batches of sequences, 1 x 1 to 4-D), with and without a bias, float32, its gradients, and a " \
        "seeded training run"


def judge_linear_gradients(judge, task):
    """dL/dx, dL/dW, dL/db through F.linear, for a random upstream gradient."""
    r = np.random.default_rng(9)
    x, w, b = r.standard_normal((2, 3, 4)), r.standard_normal((5, 4)), r.standard_normal(5)
    upstream = r.standard_normal((2, 3, 5))
    grads = task.call("linear", x, w, b, upstream)["grads"]
    case = "x (2, 3, 4), W (5, 4), b (5,), random upstream gradient"
    if any(g is None for g in grads):
        raise Wrong(f"linear's gradients, {case}: a gradient did not reach x, W or b")
    judge.compare("linear's gradients: dL/dx = g W, dL/dW = g^T x (over all rows), dL/db = the sum of g's rows", case,
                  np.concatenate([np.ravel(g) for g in grads]), expect("linear_grads", x, w, upstream), **tolerance(x))


def judge_float32(task):
    """A float32 model stays float32: x, W and b in float32 give a float32 output."""
    r = np.random.default_rng(5)
    x, w, b = (r.standard_normal(s).astype(np.float32) for s in ((2, 3, 4), (5, 4), (5,)))
    got = task.call("linear", x, w, b, None)["out"]
    require_dtype("linear: a float32 model's dtype", "x (2, 3, 4), W (5, 4), b (5,) in float32", got, np.float32)


NOT_A_TENSOR = mistake("a numpy array, not a Tensor", "index the weight Tensor itself, so the gradient reaches the "
                       "table")
CUT_OFF = mistake("no gradient to the table", "the rows must come from a Tensor op on the weight Tensor itself: a "
                  "lookup in weight.data or weight.detach() makes a Tensor that backward cannot follow to the table")
EMBEDDING_MISTAKES = (("ids flattened", "the rows keep the ids' shape: (..., dim) for ids of shape (...)", "flat"),
                      ("ids shifted by one", "ids count from 0: id i picks row i of the table", "shifted"))


def check_embedding(task):
    judge = Judge()
    for seed, (vocab, dim, ids_shape, dtype) in with_fresh(((5, 2, (3,), np.float64), (7, 3, (2, 4), np.float64),
                                                            (4, 5, (2, 3, 2), np.float64), (6, 3, (2, 2), np.float32)), 1):
        r = np.random.default_rng(seed)
        weight = r.standard_normal((vocab, dim)).astype(dtype)
        ids = r.integers(0, vocab, ids_shape)
        ids.reshape(-1)[-1] = ids.reshape(-1)[0]                      # a repeated id
        upstream = r.standard_normal(ids_shape + (dim,))
        found = task.call("embedding", weight, ids, upstream)
        case = f"ids {ids_shape} in a ({vocab}, {dim}) {np.dtype(dtype)} table, an id repeated"
        if not found["tensor"]:
            raise Wrong(f"embedding, {case}: {NOT_A_TENSOR}")
        judge.compare("embedding: the rows of the table picked by the ids", case, found["out"],
                      expect("embedding", weight, ids),
                      [(name, why, expect("embedding_wrong", weight, ids, v)) for name, why, v in EMBEDDING_MISTAKES])
        require_dtype("embedding: the table's dtype", case, found["out"], dtype)
        if found["backward_raised"]:
            raise rebuilt(found["backward_raised"], 0)
        if not found["requires_grad"] or found["grad"] is None:
            raise Wrong(f"embedding, {case}: {CUT_OFF}")
        judge.compare("the table's gradient: each id's row gets the sum of its positions' gradients", case,
                      found["grad"], expect("embedding_grad", ids, vocab, upstream),
                      [("repeated ids overwrite", "a repeated id's row must accumulate every position's gradient",
                        expect("embedding_grad_assigned", ids, vocab, upstream))])
    judge_training(judge, task)
    return "four tables (one float32), 1-D to 3-D ids with a repeat, and the table's gradient, and a seeded training run"
