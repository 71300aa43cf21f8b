"""The checks of the tensor engine: unbroadcast, MatMul's backward and the loop matmul
kernel, on non-square shapes, batches, broadcast batches, vectors and random upstream
gradients."""

import numpy as np

from exercises.checks.end_to_end import judge_training
from exercises.checks.expected import expect
from exercises.checks.feedback import Judge, Wrong, mistake

REDUCTIONS = [((2, 3), (3,)), ((2, 3), (1, 3)), ((2, 3), (2, 1)), ((2, 3, 4), (3, 4)), ((2, 3, 4), (3, 1)),
              ((2, 3, 4), (1, 1, 4)), ((2, 3, 4), (4,)), ((2, 3, 4), ()), ((5, 1, 4), (1, 1)), ((2, 3, 4), (1,)),
              ((4, 2, 3, 5), (2, 1, 5))]


def check_unbroadcast():
    from autograd.engine import unbroadcast
    judge = Judge()
    for seed, (grad_shape, shape) in enumerate(REDUCTIONS):
        g = np.random.default_rng(seed).standard_normal(grad_shape)
        judge.compare("unbroadcast: the gradient summed over the dims broadcasting added or stretched, to the "
                      "input's shape", f"a {grad_shape} gradient to shape {shape}", unbroadcast(g, shape),
                      expect("unbroadcast", g, shape, "right"),
                      [("size-1 dims dropped", "sum the stretched dims with keepdims=True: the input had them, of "
                        "size 1", expect("unbroadcast", g, shape, "no_keepdims")),
                       ("stretched dims not summed", "besides the leading dims broadcasting added, sum the dims "
                        "of size 1 it stretched", expect("unbroadcast", g, shape, "leading_only")),
                       ("mean instead of sum", "an input used n times gets the sum of the n gradients",
                        expect("unbroadcast", g, shape, "mean")),
                       ("trailing dims summed", "broadcasting adds dims on the left: sum the leading "
                        "grad.ndim - len(shape) dims", expect("unbroadcast", g, shape, "trailing")),
                       ("size-1 dims counted from the left", "broadcasting aligns shapes on the right: the input's "
                        "dim i is the gradient's dim i + (grad.ndim - len(shape)); sum the added leading dims first",
                        expect("unbroadcast", g, shape, "from_the_left"))])
    return "eleven shapes: added dims, stretched dims, both, to a scalar"


MATMULS = [((3, 3), (3, 3)), ((2, 3), (3, 4)), ((4, 2), (2, 5)), ((3, 3, 3), (3, 3, 3)), ((2, 3, 4), (2, 4, 5)),
           ((2, 3, 4), (4, 2)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (4, 3)), ((3, 4), (4,)),
           ((3,), (4, 3, 2)), ((4, 2, 3), (3,))]
WRONG_DIMS = ("the wrong dims transposed", "a batch of matrices (T, M, K) needs only its last two dims swapped, "
              "np.swapaxes(x, -1, -2): .T reverses every dim, and swapping dims 0 and 1 moves the batch")
COLUMN_KEPT = mistake("a vector's added dim kept", "a 1-D B was made a column (K, 1) for the product: drop that dim "
                      "from its gradient, grad_b[..., 0], as the forward drops it from the output")
FIRST_BATCH_ONLY = mistake("a vector's gradient from the first batch only", "a 1-D A is a row (1, K) broadcast over "
                           "B's batch, so its gradient sums every batch's part: drop the added dim with "
                           "grad_a[..., 0, :]; grad_a[0] keeps the first batch's part only")
MATMUL_MISTAKES = {
    "b_not_transposed": ("B not transposed", "dL/dA = grad @ B^T"),
    "a_not_transposed": ("A not transposed", "dL/dB = A^T @ grad"),
    "neither_transposed": ("A and B not transposed", "dL/dA = grad @ B^T and dL/dB = A^T @ grad"),
    "db_transposed": ("dB transposed", "dL/dB = A^T @ grad has B's shape (K, N)"),
    "order_swapped": ("factors in the wrong order", "matrix products do not commute: dA = grad @ B^T, dB = A^T @ grad"),
    "whole_transpose": WRONG_DIMS, "axes_0_1": WRONG_DIMS,
    "fold_reshaped": ("reshaped instead of transposed", "A's batch folded into rows is (B*M, K): transpose it to "
                      "(K, B*M); reshape(K, -1) gives that shape with the numbers in the wrong places")}


def _matmul_grads(a, b, g):
    """[dL/dA, dL/dB] of the project's a @ b given upstream g, flattened and joined."""
    (a @ b).backward(g)
    return np.concatenate([np.ravel(a.grad), np.ravel(b.grad)]) if a.grad is not None and b.grad is not None \
        else np.zeros(0)


def _first_batch_only(a, b):
    """Whether the project's dL/dA, for a 1-D a times a batched b, is only b's first matrix's part."""
    from autograd import Tensor
    a, b = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    g = np.random.default_rng(0).standard_normal(b.shape[:-2] + b.shape[-1:])
    (a @ b).backward(Tensor(g))
    first = b.data.reshape((-1,) + b.shape[-2:])[0] @ g.reshape(-1, b.shape[-1])[0]
    return a.grad is not None and np.size(a.grad) == first.size and np.allclose(np.ravel(a.grad), first)


def check_matmul_backward():
    from autograd import GradcheckError, Tensor, gradcheck
    judge = Judge()
    for seed, (a_shape, b_shape) in enumerate(MATMULS):
        r = np.random.default_rng(seed)
        a = Tensor(r.standard_normal(a_shape), requires_grad=True)
        b = Tensor(r.standard_normal(b_shape), requires_grad=True)
        case = f"A {a_shape} @ B {b_shape}, random upstream gradient (seed {seed})"
        if len(a_shape) >= 2 and len(b_shape) >= 2:
            g = r.standard_normal(np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + (a_shape[-2], b_shape[-1]))
            judge.compare("[dL/dA, dL/dB]: dA = grad @ B^T (A's shape), dB = A^T @ grad (B's shape)", case,
                          _matmul_grads(a, b, Tensor(g)), expect("matmul_grads", a.data, b.data, g, "right"),
                          [(*why, expect("matmul_grads", a.data, b.data, g, v)) for v, why in MATMUL_MISTAKES.items()])
            continue
        try:
            gradcheck(lambda a, b: a @ b, [a, b])
        except (GradcheckError, ValueError) as err:
            kept = len(b_shape) == 1 and f"gradient of shape ({b_shape[0]}, 1) for its input 1" in str(err)
            first = len(a_shape) == 1 and len(b_shape) > 2 and _first_batch_only(a.data, b.data)
            raise Wrong(f"[dL/dA, dL/dB] against finite differences, {case}: "
                        f"{COLUMN_KEPT if kept else FIRST_BATCH_ONLY if first else err}") from None
    judge_training(judge)
    return "square, non-square, batched, broadcast batches, vectors (also against batches); random upstream " \
        "gradients, and a seeded training run"


FIRST_BATCH = ("only the first batch", "the rows run over every (t, i): t = row // m, i = row % m")
LOOP_MISTAKES = {"assign": ("= instead of +=", "c[t, i, j] keeps only the last product: add each a*b term"),
                 "b_transposed": ("b's indices swapped", "the sum runs over a's columns and b's rows: b[t, k, j]"),
                 "k_short": ("the k loop one short", "k runs over every one of a's columns, range(a.shape[2])"),
                 "one_batch": FIRST_BATCH, "batch_index_lost": FIRST_BATCH}


def check_matmul_loops():
    from autograd.kernels import loops
    judge = Judge()
    for seed, (a_shape, b_shape) in enumerate((((1, 1), (1, 1)), ((3, 3), (3, 3)), ((3, 5), (5, 2)),
                                               ((2, 3, 4), (2, 4, 7)), ((3, 2, 2), (3, 2, 2)), ((2, 0, 3), (2, 3, 4)))):
        r = np.random.default_rng(seed)
        a, b = r.standard_normal(a_shape), r.standard_normal(b_shape)
        batch = int(np.prod(a_shape[:-2]))
        a3, b3 = a.reshape((batch,) + a_shape[-2:]), b.reshape((batch,) + b_shape[-2:])
        judge.compare("loops.matmul: c[t, i, j] = sum over k of a[t, i, k] b[t, k, j]", f"{a_shape} @ {b_shape}",
                      np.reshape(loops.matmul(a, b), (batch, a_shape[-2], b_shape[-1])),
                      expect("matmul_loops", a3, b3, "right"),
                      [(*LOOP_MISTAKES[v], expect("matmul_loops", a3, b3, v)) for v in LOOP_MISTAKES])
    return "1 x 1, square, odd sizes, batches, an empty dim, against numpy"
