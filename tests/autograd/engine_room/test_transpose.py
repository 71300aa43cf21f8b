"""The in-register transposing copy (autograd/kernels/transpose.py) against numpy's .T."""

import numba
import numpy as np
import pytest

from autograd.engine_room import transpose


@numba.njit
def copy_transposed(x, target, factor):
    """The kernels call copy_transposed from compiled code (in Python the intrinsic is not callable)."""
    transpose.copy_transposed(x, target, factor)


@pytest.mark.parametrize("lanes", [4, 8, 16])
def test_the_shuffle_rounds_transpose_a_square(lanes):
    """The docstring's algorithm, played with numpy on lane numbers: after the rounds
    h = L/2, ..., 1, row c holds column c."""
    rows = [np.arange(r * lanes, (r + 1) * lanes) for r in range(lanes)]
    h = lanes // 2
    while h >= 1:
        first, second = transpose.shuffle_masks(lanes, h)
        mixed = list(rows)
        for top in range(0, lanes, 2 * h):
            for i in range(top, top + h):
                both = np.concatenate([rows[i], rows[i + h]])
                mixed[i], mixed[i + h] = both[first], both[second]
        rows = mixed
        h //= 2
    np.testing.assert_array_equal(np.array(rows), np.arange(lanes * lanes).reshape(lanes, lanes).T)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(64, 32), (33, 17), (16, 16), (1, 40), (40, 1), (0, 5), (5, 0), (7, 3)])
def test_copy_transposed_equals_numpy_bit_for_bit(dtype, shape):
    """Whole squares, edges, size-1 and empty dims; target wider than x (a padded buffer,
    whose other entries stay as they were); rows of x from a larger array (not contiguous
    as a whole)."""
    rng = np.random.default_rng(0)
    big = rng.standard_normal((shape[0], shape[1] + 3)).astype(dtype)
    x = big[:, :shape[1]]
    target = np.full((shape[1] + 2, shape[0] + 5), 7, dtype)
    factor = dtype(0.37)
    copy_transposed(x, target, factor)
    np.testing.assert_array_equal(target[:shape[1], :shape[0]], factor * x.T)
    assert (target[shape[1]:] == 7).all() and (target[:, shape[0]:] == 7).all()
