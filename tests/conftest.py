"""Every test sees the same thread counts whatever else the machine runs: the kernels'
giving up threads to other processes (autograd/engine_room/dispatch.py) is turned off,
except where tests/autograd/engine_room/test_sharing.py turns it on with a simulated machine.
Results never depend on it; only the tests that count threaded calls would."""
import pytest

from autograd.engine_room import dispatch


@pytest.fixture(autouse=True)
def same_threads_whatever_the_load():
    dispatch.share_cores(False)
    yield
    dispatch.share_cores(False)
