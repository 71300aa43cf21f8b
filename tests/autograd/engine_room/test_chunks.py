"""chunks.py: a chunk function run in several chunks through the one launcher (a frame of
its arguments, a relay per argument types) does every chunk once, with its own arguments,
and an exception raised in a chunk reaches the caller."""

import functools

import numba
import numpy as np
import pytest
from numba import types

from autograd.engine_room import chunks as chunking


def _mark_rows(x, scale, flag, out, chunk, chunks):
    """out's rows of this chunk = x's rows * scale, + chunk + 1 (so that a row no chunk
    wrote stays 0), negated when flag."""
    source, target = chunking.share_of(x, chunk, chunks), chunking.share_of(out, chunk, chunks)
    for i in range(target.shape[0]):
        for j in range(target.shape[1]):
            value = source[i, j] * scale + chunk + 1
            target[i, j] = -value if flag else value


def _fail_in_chunk(x, chunk, chunks):
    """Raise in chunk 2 only; mark x[chunk] in the others."""
    if chunk == 2:
        raise ValueError("chunk failed")
    x[chunk] = 1.0


MATRIX = types.Array(types.float64, 2, "C")


@functools.cache
def marking_kernel():
    return chunking.chunked(_mark_rows, "test", (MATRIX, types.float32, types.boolean, MATRIX))


@functools.cache
def failing_kernel():
    return chunking.chunked(_fail_in_chunk, "test", (types.Array(types.float64, 1, "C"),))


@pytest.mark.parametrize("chunk_count", [1, 2, 3, 7])
def test_every_chunk_runs_once_on_its_own_rows_with_every_argument(chunk_count):
    kernel = marking_kernel()
    x = np.arange(14 * 3, dtype=np.float64).reshape(14, 3)
    out = np.zeros_like(x)
    kernel(x, np.float32(2.0), True, out, chunk_count)
    expected = np.empty_like(x)
    for chunk in range(chunk_count):
        rows = slice(chunk * 14 // chunk_count, (chunk + 1) * 14 // chunk_count)
        expected[rows] = -(x[rows] * 2.0 + chunk + 1)
    np.testing.assert_array_equal(out, expected)


def test_an_exception_in_a_chunk_reaches_the_caller():
    kernel = failing_kernel()
    x = np.zeros(4)
    kernel(x, 2)                                           # no chunk 2
    np.testing.assert_array_equal(x, [1, 1, 0, 0])
    with pytest.raises(ValueError, match="chunk failed"):
        kernel(x, 3)


def test_kernels_with_other_argument_types_share_the_launcher():
    if numba.config.DISABLE_JIT:
        pytest.skip("no launcher without the JIT")
    first, second = marking_kernel(), failing_kernel()
    assert first.launcher == second.launcher and first.enter is not second.enter
