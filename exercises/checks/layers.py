"""The checks of the layers: Linear's forward and Embedding's lookup, on batches of
sequences, odd sizes, with and without a bias, and the gradients that flow through them."""

import numpy as np

from exercises.checks.end_to_end import judge_training
from exercises.checks.expected import expect
from exercises.checks.feedback import Judge, Wrong, mistake, require_dtype

LINEARS = [((3, 3), 3), ((1, 3), 3), ((2, 4), 4), ((2, 3, 4), 5), ((5, 2), 3), ((3, 1, 2, 6), 7)]


BIAS_TRUTH = mistake("`if bias:` on an array", "an array of several numbers is neither true nor false: test "
                     "`if bias is not None:`")
NONE_BIAS = mistake("a missing bias added", "F.linear(x, W) passes bias=None: add the bias only if bias is not None")


def check_linear():
    from autograd import Tensor, gradcheck
    from nn import functional as F
    judge = Judge()
    for seed, (x_shape, out) in enumerate(LINEARS):
        r = np.random.default_rng(seed)
        x, w, b = r.standard_normal(x_shape), r.standard_normal((out, x_shape[-1])), r.standard_normal(out)
        case = f"x {x_shape}, W {w.shape}, b ({out},)"
        try:
            got, no_bias = F.linear(Tensor(x), Tensor(w), Tensor(b)).data, F.linear(Tensor(x), Tensor(w)).data
        except ValueError as err:
            raise Wrong(f"linear: y = x W^T + b, {case}: " + (BIAS_TRUTH if "truth value of an array" in str(err)
                                                              else f"raised ValueError: {err}")) from None
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
                           "row (N, out) + (out,)", expect("linear_bias_on_rows", x, w, b))] if rows == out else []))
        judge.compare("linear without a bias: y = x W^T", case, no_bias, expect("linear", x, w, np.zeros(out)))
    xs, ws, bs = (Tensor(np.random.default_rng(9).standard_normal(s), requires_grad=True) for s in ((2, 3, 4), (5, 4), (5,)))
    gradcheck(lambda x, w, b: F.linear(x, w, b), [xs, ws, bs])
    judge_training(judge)
    return "five shapes (batches of sequences, 1 x 1 to 4-D), with and without a bias, and its gradients, and a seeded training run"


NOT_A_TENSOR = mistake("a numpy array, not a Tensor", "index the weight Tensor itself, so the gradient reaches the "
                       "table")
CUT_OFF = mistake("no gradient to the table", "the rows must come from a Tensor op on weight itself (weight[ids]): "
                  "a lookup in weight.data or weight.detach() makes a Tensor that backward cannot follow to the table")
EMBEDDING_MISTAKES = (("ids flattened", "the rows keep the ids' shape: (..., dim) for ids of shape (...)", "flat"),
                      ("ids shifted by one", "ids count from 0: id i picks row i of the table", "shifted"))


def check_embedding():
    from autograd import Tensor
    from nn import functional as F
    judge = Judge()
    for seed, (vocab, dim, ids_shape, dtype) in enumerate(((5, 2, (3,), np.float64), (7, 3, (2, 4), np.float64),
                                                           (4, 5, (2, 3, 2), np.float64), (6, 3, (2, 2), np.float32))):
        r = np.random.default_rng(seed)
        weight = Tensor(r.standard_normal((vocab, dim)).astype(dtype), requires_grad=True)
        ids = r.integers(0, vocab, ids_shape)
        ids.reshape(-1)[-1] = ids.reshape(-1)[0]                      # a repeated id
        out = F.embedding(ids, weight)
        case = f"ids {ids_shape} in a ({vocab}, {dim}) {np.dtype(dtype)} table, an id repeated"
        if not isinstance(out, Tensor):
            raise Wrong(f"embedding, {case}: {NOT_A_TENSOR}")
        judge.compare("embedding: the rows of the table picked by the ids", case, out.data,
                      expect("embedding", weight.data, ids),
                      [(name, why, expect("embedding_wrong", weight.data, ids, v)) for name, why, v in EMBEDDING_MISTAKES])
        require_dtype("embedding: the table's dtype", case, out, dtype)
        if not out.requires_grad:
            raise Wrong(f"embedding, {case}: {CUT_OFF}")
        upstream = r.standard_normal(ids_shape + (dim,))
        out.backward(Tensor(upstream))
        if weight.grad is None:
            raise Wrong(f"embedding, {case}: {CUT_OFF}")
        judge.compare("the table's gradient: each id's row gets the sum of its positions' gradients", case,
                      weight.grad, expect("embedding_grad", ids, vocab, upstream),
                      [("repeated ids overwrite", "a repeated id's row must accumulate every position's gradient",
                        expect("embedding_grad_assigned", ids, vocab, upstream))])
    judge_training(judge)
    return "four tables (one float32), 1-D to 3-D ids with a repeat, and the table's gradient, and a seeded training run"
