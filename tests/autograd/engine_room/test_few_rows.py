"""few_rows.py: a few rows by a large transposed row-major weight (a step of generation),
against the numpy definition, for every row count it takes, several shapes, both dtypes,
and any number of threads' shares."""
import numpy as np
import pytest

from autograd import kernels
from autograd.engine_room import few_rows
from autograd.kernels import reference

TOLERANCE = {np.float32: 2e-5, np.float64: 1e-12}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [1, 2, 3, 4, 17, 64])
@pytest.mark.parametrize("k, n", [(576, 1536), (97, 1003), (256, 49152 // 64), (1, 1 << 16), (4096, 17)])
def test_few_rows_by_a_transposed_weight_match_numpy(dtype, m, k, n):
    rng = np.random.default_rng(m * k + n)
    x, weight = rng.standard_normal((m, k)).astype(dtype), rng.standard_normal((n, k)).astype(dtype)
    assert few_rows.takes(x, weight.T) == (weight.size >= few_rows.MIN_WEIGHT)
    out = kernels.matmul(x, weight.T)
    expected = reference.matmul(x.astype(np.float64), weight.T.astype(np.float64))
    assert out.shape == (m, n) and out.dtype == dtype
    np.testing.assert_allclose(out, expected, rtol=TOLERANCE[dtype], atol=TOLERANCE[dtype] * np.sqrt(k))


@pytest.mark.parametrize("chunks", [1, 2, 3, 7])
def test_any_number_of_shares_gives_the_same_bits(chunks):
    rng = np.random.default_rng(chunks)
    x, weight = rng.standard_normal((3, 300)).astype(np.float32), rng.standard_normal((1001, 300)).astype(np.float32)
    one = few_rows.product(x, weight.T)
    kernel = few_rows._kernels[np.dtype(np.float32)]
    out = np.full((3, 1001), np.nan, np.float32)
    kernel(x, weight, out, chunks)
    np.testing.assert_array_equal(out, one)


def test_what_it_does_not_take_goes_elsewhere():
    rng = np.random.default_rng(0)
    weight = rng.standard_normal((1 << 12, 64)).astype(np.float32)
    assert not few_rows.takes(rng.standard_normal((few_rows.MAX_ROWS + 1, 64)).astype(np.float32), weight.T)  # many rows
    assert not few_rows.takes(rng.standard_normal((1, 64)).astype(np.float32), weight.T.copy())   # not transposed
    assert not few_rows.takes(rng.standard_normal((1, 64)), weight.T)                             # float64 x float32
    assert not few_rows.takes(rng.standard_normal((1, 64)).astype(np.float32), weight[:8].T)      # small weight
