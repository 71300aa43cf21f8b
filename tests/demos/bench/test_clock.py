"""The benchmarks' clock: wall time by default, the calling thread's CPU time with --clock cpu."""

import time

import pytest

from demos.bench import _clock, gemm_calls


@pytest.fixture
def restore_clock():
    yield
    _clock.use("wall", 1)


def test_the_cpu_clock_leaves_out_waiting_and_the_wall_clock_counts_it(restore_clock):
    """A step that sleeps 30 ms takes 30 ms on the wall clock and almost none on the CPU
    clock, in the step medians (train._median) and the interleaved rounds (gemm_calls) alike."""
    from demos.bench.train import _median
    nap = lambda: time.sleep(0.03)                                         # noqa: E731
    busy = lambda: sum(range(20000))                                        # noqa: E731
    _clock.use("wall", 1)
    assert _median(nap, 3) >= 0.03
    wall_nap, _, _ = gemm_calls.interleaved(nap, busy, rounds=3, seconds_each=0.0)
    assert wall_nap >= 0.03
    _clock.use("cpu", 1)
    assert _median(nap, 3) < 0.01
    cpu_nap, cpu_busy, _ = gemm_calls.interleaved(nap, busy, rounds=3, seconds_each=0.0)
    assert cpu_nap < 0.01 and cpu_busy > 0


@pytest.mark.parametrize("threads", [2, 4])
def test_the_cpu_clock_refuses_more_than_one_thread(threads, restore_clock):
    with pytest.raises(SystemExit, match="--clock cpu times the calling thread only: use it with --threads 1"):
        _clock.use("cpu", threads)
    assert _clock.now is time.perf_counter                     # refused before anything changed
