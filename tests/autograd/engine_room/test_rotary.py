"""rotary.py: RoPE's rotation of pairs in the fast tier gives reference.rotate_pairs's
numbers bit for bit, for both pairings and dtypes, odd sizes, operands that are views,
angles broadcast as rotary_embedding passes them, empty and size-1 dims; what it does not
take goes to the numpy definition."""

import numpy as np
import pytest

from autograd.engine_room import rotary
from autograd.kernels import reference


def angles(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(shape).astype(dtype) for _ in range(2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
@pytest.mark.parametrize("x_shape, angle_shape", [
    ((1, 3, 100, 64), (100, 32)),          # a layer's cached keys at SmolLM2-135M's size
    ((2, 9, 1, 6), (1, 3)),                # one new query per head
    ((3, 7, 10), (3, 7, 5)),               # (B, T, d) with each sequence's own positions
    ((2, 5, 7, 2), (2, 1, 7, 1)),          # (B, H, T, d) with each sequence's own positions; d = 2
    ((5, 4), (5, 2)),                      # (T, d)
    ((0, 3, 4, 8), (4, 4)), ((2, 3, 0, 8), (0, 4)),                     # empty dims
])
def test_rotation_is_the_numpy_definitions_bit_for_bit(dtype, pairing, x_shape, angle_shape):
    x = np.random.default_rng(len(x_shape)).standard_normal(x_shape).astype(dtype)
    cos, sin = angles(angle_shape, dtype, sum(x_shape))
    got = rotary.rotate_pairs(x, cos, sin, pairing)
    assert got.shape == x.shape and got.dtype == dtype and rotary._angles_fit(x, cos, sin)
    np.testing.assert_array_equal(got, reference.rotate_pairs(x, cos, sin, pairing))


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_views_are_read_where_they_lie(pairing):
    """Heads of a (B, T, H, d) array seen as (B, H, T, d), a strided last dim, broadcast angles."""
    rng = np.random.default_rng(1)
    heads = rng.standard_normal((2, 6, 3, 8)).astype(np.float32).transpose(0, 2, 1, 3)           # (B, H, T, d)
    strided = rng.standard_normal((4, 16)).astype(np.float32)[:, ::2]                            # (T, d), stride 2
    for x in (heads, strided):
        cos, sin = angles(x.shape[-2:-1] + (4,), np.float32, 2)
        cos = np.broadcast_to(cos, (2,) + cos.shape)[0]                                          # read-only view
        np.testing.assert_array_equal(rotary.rotate_pairs(x, cos, sin, pairing),
                                      reference.rotate_pairs(x, cos, sin, pairing))


def test_what_it_does_not_take_goes_to_numpy(monkeypatch):
    """Five dims, mixed dtypes, cos and sin of two shapes: the
    numpy definition runs (the kernel is never asked for)."""
    monkeypatch.setattr(rotary, "rotate_kernel", None)
    rng = np.random.default_rng(3)
    cos, sin = angles((3, 2), np.float64, 0)
    cases = [(rng.standard_normal((2, 1, 2, 3, 4)), cos, sin),
             (rng.standard_normal((3, 4)).astype(np.float32), cos, sin),
             (rng.standard_normal((3, 4)), cos, sin[:1])]
    for x, cos, sin in cases:
        assert not rotary._angles_fit(x, cos, sin) or x.ndim > 4
        np.testing.assert_array_equal(rotary.rotate_pairs(x, cos, sin, "half"),
                                      reference.rotate_pairs(x, cos, sin, "half"))
