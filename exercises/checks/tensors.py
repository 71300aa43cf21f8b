"""The checks of the tensor engine: unbroadcast, MatMul's backward and the loop matmul
kernel, on non-square shapes, batches, broadcast batches, vectors and random upstream
gradients."""

import numpy as np

from exercises.checks.end_to_end import judge_training
from exercises.checks.expected import expect
from exercises.checks.feedback import Judge, Wrong, mistake, said, tolerance, with_fresh
from exercises.zygote import Raised

REDUCTIONS = [((2, 3), (3,)), ((2, 3), (1, 3)), ((2, 3), (2, 1)), ((2, 3, 4), (3, 4)), ((2, 3, 4), (3, 1)),
              ((2, 3, 4), (1, 1, 4)), ((2, 3, 4), (4,)), ((2, 3, 4), ()), ((5, 1, 4), (1, 1)), ((2, 3, 4), (1,)),
              ((4, 2, 3, 5), (2, 1, 5))]


def check_unbroadcast(task):
    judge = Judge()
    for seed, (grad_shape, shape) in with_fresh(REDUCTIONS, again=4):
        g = np.random.default_rng(seed).standard_normal(grad_shape)
        judge.compare("unbroadcast: the gradient summed over the dims broadcasting added or stretched, to the "
                      "input's shape", f"a {grad_shape} gradient to shape {shape}", task.call("unbroadcast", g, shape),
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
FIRST_BATCH_ONLY = ("a vector's gradient from the first batch only", "a 1-D A is a row (1, K) broadcast over "
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


def _joined(found, a_shape, b_shape, case):
    """dL/dA and dL/dB flattened and joined; Wrong if one is missing or not of its input's shape."""
    for name, grad, shape in (("A", found["a"], a_shape), ("B", found["b"], b_shape)):
        if grad is None:
            raise Wrong(f"[dL/dA, dL/dB], {case}: no gradient reached {name}")
        if np.shape(grad) != tuple(shape):
            raise Wrong(f"[dL/dA, dL/dB], {case}: dL/d{name} has shape {said(np.shape(grad))}, {name} {tuple(shape)}")
    return np.concatenate([np.ravel(found["a"]), np.ravel(found["b"])])


def check_matmul_backward(task):
    judge = Judge()
    for seed, (a_shape, b_shape) in with_fresh(MATMULS, again=4):
        r = np.random.default_rng(seed)
        a, b = r.standard_normal(a_shape), r.standard_normal(b_shape)
        case = f"A {a_shape} @ B {b_shape}, random upstream gradient (seed {seed})"
        g = r.standard_normal(np.matmul(a, b).shape)
        try:
            found = task.call("matmul_grads", a, b, g)
        except ValueError as err:
            kept = len(b_shape) == 1 and f"gradient of shape ({b_shape[0]}, 1) for its input 1" in str(err)
            if not kept:
                raise
            raise Wrong(f"[dL/dA, dL/dB], {case}: {COLUMN_KEPT}") from None
        got = _joined(found, a_shape, b_shape, case)
        if len(a_shape) >= 2 and len(b_shape) >= 2:
            judge.compare("[dL/dA, dL/dB]: dA = grad @ B^T (A's shape), dB = A^T @ grad (B's shape)", case,
                          got, expect("matmul_grads", a, b, g, "right"),
                          [(*why, expect("matmul_grads", a, b, g, v)) for v, why in MATMUL_MISTAKES.items()],
                          **tolerance(a))
            continue
        first = [] if len(a_shape) != 1 or len(b_shape) <= 2 else \
            [(*FIRST_BATCH_ONLY, expect("matmul_vector_grads", a, b, g, True))]
        judge.compare("[dL/dA, dL/dB] with a vector: its added dim dropped from its gradient", case, got,
                      expect("matmul_vector_grads", a, b, g, False), first, **tolerance(a))
    judge_training(judge, task)
    return "square, non-square, batched, broadcast batches, vectors (also against batches); random upstream " \
        "gradients, and a seeded training run"


FIRST_BATCH = ("only the first batch", "the rows run over every (t, i): t = row // m, i = row % m")
LOOP_MISTAKES = {"assign": ("= instead of +=", "c[t, i, j] keeps only the last product: add each a*b term"),
                 "b_transposed": ("b's indices swapped", "the sum runs over a's columns and b's rows: b[t, k, j]"),
                 "k_short": ("the k loop one short", "k runs over every one of a's columns, range(a.shape[2])"),
                 "one_batch": FIRST_BATCH, "batch_index_lost": FIRST_BATCH}


def check_matmul_loops(task):
    judge = Judge()
    for compiled in (True, False):      # compiled first: no code of the region has run in the child before
        # (run as Python, it could rewire the probe that compiles it; compiled, it cannot reach Python)
        how = "compiled by Numba" if compiled else "run as Python (NUMBA_DISABLE_JIT=1)"
        for seed, (a_shape, b_shape) in with_fresh((((1, 1), (1, 1)), ((3, 3), (3, 3)), ((3, 5), (5, 2)),
                                                    ((2, 3, 4), (2, 4, 7)), ((3, 2, 2), (3, 2, 2)), ((2, 0, 3), (2, 3, 4))), 3):
            r = np.random.default_rng(seed)
            a, b = r.standard_normal(a_shape), r.standard_normal(b_shape)
            batch = int(np.prod(a_shape[:-2]))
            a3, b3 = a.reshape((batch,) + a_shape[-2:]), b.reshape((batch,) + b_shape[-2:])
            try:
                got = task.call("matmul_loops", a, b, compiled)
            except (Raised, ImportError) as err:         # Numba's own errors, or its missing linear algebra
                if not compiled:
                    raise
                kind = getattr(err, "kind", type(err).__name__)
                raise Wrong(f"loops.matmul {how}, {a_shape} @ {b_shape}: Numba cannot compile it: "
                            f"{mistake('not compilable', NOT_COMPILABLE)} ({kind}: {str(err)[:300]})") from None
            judge.compare(f"loops.matmul {how}: c[t, i, j] = sum over k of a[t, i, k] b[t, k, j]",
                          f"{a_shape} @ {b_shape}", np.reshape(got, (batch, a_shape[-2], b_shape[-1])),
                          expect("matmul_loops", a3, b3, "right"),
                          [(*LOOP_MISTAKES[v], expect("matmul_loops", a3, b3, v)) for v in LOOP_MISTAKES])
    return "1 x 1, square, odd sizes, batches, an empty dim, against numpy; run as Python and compiled"


NOT_COMPILABLE = ("a kernel is compiled by Numba's @njit, which takes plain loops over numbers and arrays: no np.matmul "
                  "on 3-D arrays, no a[t] @ b[t]; write the three loops")
