"""demos.bench.threads: counting the kernel calls that ran threaded, comparing thread counts."""

import time

import numba
import numpy as np
import pytest

from tests.helpers import ENGINE_ROOM_ABSENT

engine_room = pytest.importorskip("autograd.engine_room", reason=ENGINE_ROOM_ABSENT)

from autograd.engine_room import dispatch  # noqa: E402  (what it measures is the engine room's)
from demos.bench.threads import compare, count_threaded_calls  # noqa: E402


def test_count_threaded_calls_counts_the_calls_cut_into_chunks(monkeypatch):
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    small, large = np.ones(100, np.float32), np.ones(dispatch.PARALLEL_MIN_ELEMENTS, np.float32)
    outputs = []
    assert count_threaded_calls(lambda: outputs.extend([engine_room.relu(small), engine_room.relu(large)])) == (1, 2)
    assert (outputs[1] == 1).all()


def test_compare_alternates_the_thread_counts_and_gives_many_over_one(monkeypatch):
    counts = []
    monkeypatch.setattr(numba, "set_num_threads", counts.append)
    steps = []

    def step():                     # twice as long on one thread as on two
        steps.append(counts[-1])
        time.sleep(0.004 if counts[-1] == 1 else 0.002)

    result = compare(step, threads=2, rounds=3, steps=2)
    assert counts == [1, 2] * 4                            # warm-up, then three rounds
    assert steps.count(1) == steps.count(2) == 3 + 3 * 2
    assert len(result["one_rounds_ms"]) == len(result["many_rounds_ms"]) == 3
    assert 0.3 < result["ratio"] < 0.9                     # 0.5, give or take the sleeps' overshoot
    assert result["one_ms"] > result["many_ms"]
