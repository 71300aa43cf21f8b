"""The matmuls a real training step makes, as the benchmarks record them."""

import numpy as np
import pytest

from tests.helpers import ENGINE_ROOM_ABSENT

engine_room = pytest.importorskip("autograd.engine_room", reason=ENGINE_ROOM_ABSENT)

from demos.bench import train as bench_train, gemm_calls  # noqa: E402  (it measures the engine room)


def test_layout_names():
    x = np.zeros((6, 4), np.float32)
    assert gemm_calls.layout(x) == "C"
    assert gemm_calls.layout(x.T) == "T"
    assert gemm_calls.layout(np.zeros((6, 8), np.float32)[:, :4]) == "S"


def test_every_matmul_of_a_training_step_equals_numpy():
    """The operands one step passes (transposed weight-gradient views, per-head strided
    slices, 13-row products that end in a partial strip) through the kernel of the
    process that trained with them: a kernel whose in-place strips were miscompiled gave
    garbage here only after a training step, never on fresh random operands."""
    calls = gemm_calls.record_matmuls(bench_train.ours("S"))
    assert {gemm_calls.layout(c["a"]) for c in calls} >= {"C", "T", "S"}
    assert sum(c["count"] for c in calls) > 100
    for call in calls:
        a, b = call["a"], call["b"]
        expected = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(engine_room.matmul(a, b), expected, rtol=1e-4, atol=1e-4 * (1 + np.abs(expected).max()),
                                   err_msg=gemm_calls.describe(call))
    flops = {gemm_calls.describe(c): c["flops"] for c in calls}
    assert flops["(640, 64) C @ (64, 64) T"] == 2 * 640 * 64 * 64
