"""Every test sees the same thread counts whatever else the machine runs: the kernels'
giving up threads to other processes (autograd/engine_room/dispatch.py) is turned off,
except where tests/autograd/engine_room/test_sharing.py turns it on with a simulated machine.
Results never depend on it; only the tests that count threaded calls would.  Without the
engine room (deleted: the kernels run on the loops tier) there are no such threads."""
import pytest

from tests.helpers import ENGINE_ROOM

if ENGINE_ROOM:
    from autograd.engine_room import dispatch


@pytest.fixture(autouse=True)
def same_threads_whatever_the_load():
    if ENGINE_ROOM:
        dispatch.share_cores(False)
    yield
    if ENGINE_ROOM:
        dispatch.share_cores(False)
