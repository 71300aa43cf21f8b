"""A fresh student copy handing every exercise out, made once for the whole session (making
one is slow; no test changes it: one that needs to copies it first)."""
import pytest

from tests.exercises.helpers import exercises


@pytest.fixture(scope="session")
def fresh(tmp_path_factory):
    copy = tmp_path_factory.mktemp("fresh") / "copy"
    status, out = exercises("make", str(copy))
    assert status == 0, out
    return copy
