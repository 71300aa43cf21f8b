"""A fresh student copy, made once for the tests of a module."""
import pytest

from tests.exercises.helpers import exercises


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    copy = tmp_path_factory.mktemp("fresh") / "copy"
    status, out = exercises("make", str(copy))
    assert status == 0, out
    return copy
