"""The fast kernels give up threads while other processes keep the cores busy (dispatch.py)."""
import numba
import pytest

from autograd.engine_room import dispatch


@pytest.fixture
def machine(monkeypatch):
    """A 2-core machine whose clock, CPU counters and our process time the test moves."""
    state = {"now": 100.0, "busy": 0, "total": 0, "ours": 0.0}
    monkeypatch.setattr(dispatch.time, "monotonic", lambda: state["now"])
    monkeypatch.setattr(dispatch.time, "process_time", lambda: state["ours"])
    monkeypatch.setattr(dispatch, "_machine_jiffies", lambda: (state["busy"], state["total"]))
    monkeypatch.setattr(dispatch.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    dispatch.share_cores(True)

    def advance(seconds, ours, elsewhere):
        """seconds pass; this process keeps `ours` cores busy, other processes `elsewhere`."""
        state["now"] += seconds
        state["ours"] += ours * seconds
        state["busy"] += round((ours + elsewhere) * seconds * 100)
        state["total"] += round(2 * seconds * 100)
        return dispatch.threads()
    return advance


def test_threads_follow_what_other_processes_leave_free(machine):
    assert machine(0, 0, 0) == 2                                 # the first sample: nothing known, all threads
    assert machine(0.3, 2.0, 0.0) == 2                           # alone
    assert machine(0.3, 1.0, 1.0) == 1                           # another process keeps a core busy
    assert machine(0.1, 1.0, 0.0) == 1                           # within a sample: unchanged
    assert machine(0.3, 1.0, 0.2) == 2                           # it stopped
    assert dispatch.use_threads(10 ** 9, 1) and dispatch.chunks_for(10 ** 9, 1) == 2


def test_sharing_can_be_turned_off(machine):
    dispatch.share_cores(False)
    machine(0, 0, 0)
    assert machine(0.3, 1.0, 1.0) == 2
