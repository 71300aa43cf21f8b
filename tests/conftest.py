"""Every test sees the same thread counts whatever else the machine runs: the kernels'
giving up threads to other processes (autograd/engine_room/dispatch.py) is turned off,
except where tests/autograd/engine_room/test_sharing.py turns it on with a simulated machine.
Results never depend on it; only the tests that count threaded calls would.  Without the
engine room (deleted: the kernels run on the loops tier) there are no such threads.

The quick lane, `python -m pytest -m quick`: the tests below are marked `quick` (registered
in pyproject.toml), a few minutes' worth at most that holds each package's core: every op's
gradcheck, the engine, the scalar engine, the layers and optimizers, attention, the model's
gradchecks, a short training, the exercises' catalog (each solution passes its check), a
demo's run, the house's rules and the docs' counts.  CI runs the whole suite."""
import pytest

from tests.helpers import ENGINE_ROOM

if ENGINE_ROOM:
    from autograd.engine_room import dispatch


QUICK = ("tests/autograd/test_ops_gradcheck.py", "tests/autograd/test_engine.py", "tests/autograd/test_scalar.py",
         "tests/test_every_op_is_gradchecked.py", "tests/nn/test_layers.py", "tests/nn/test_optim.py",
         "tests/transformer/test_attention.py", "tests/transformer/test_model.py",
         "tests/transformer/test_decoding_and_training.py::test_short_training_run_halves_the_copy_loss",
         "tests/exercises/test_grading.py::test_every_solution_passes_its_check",
         "tests/demos/test_train_demo.py", "tests/test_house.py", "tests/test_docs_tell_the_truth.py")


def pytest_collection_modifyitems(config, items):
    """Mark the quick lane's tests (QUICK: files, or tests by name)."""
    for item in items:
        if item.nodeid.startswith(QUICK):
            item.add_marker(pytest.mark.quick)


@pytest.fixture(autouse=True)
def same_threads_whatever_the_load():
    if ENGINE_ROOM:
        dispatch.share_cores(False)
    yield
    if ENGINE_ROOM:
        dispatch.share_cores(False)
