"""The checks of tensors."""

import math

import numpy as np

from exercises.checks.feedback import Wrong, compare, rng


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
