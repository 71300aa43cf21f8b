"""The child's answers as the judge reads them: bounded data (exercises/wire.py), and what of
them a message quotes marked as the child's, hidden in the teacher's grade where the child
held solutions (exercises/child_text.py)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exercises import checks, wire
from exercises.checks.feedback import difference
from exercises.child_text import shown


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(0, 3), max_size=wire.MAX_DIMS), dtype=st.sampled_from(["float32", "int64", "bool"]),
       seed=st.integers(0, 2 ** 16))
def test_an_array_of_up_to_max_dims_travels_unchanged(shape, dtype, seed):
    array = np.asarray(np.random.default_rng(seed).standard_normal(shape) * 3).astype(dtype)
    got = wire.decode(wire.encode({"out": array, "rows": [[1, 2], [3]]})[4:])
    assert got["out"].dtype == array.dtype and got["out"].shape == array.shape and np.array_equal(got["out"], array)
    assert got["rows"] == [[1, 2], [3]]


@pytest.mark.parametrize("shape", [[0] * (wire.MAX_DIMS + 1), [0, 2 ** 59], [0] + [1] * 20 + [3]])
def test_an_empty_array_of_many_or_huge_dims_is_refused(shape):
    """An empty array's shape is free: 61 dims of 0 or 1 and one below 2^59 spelled 15 bytes
    of a solution into 'expected shape (1, 3), got (0, 1, 1, 0, ...)'."""
    body = b'{"__array__":["float64",' + str(shape).replace(" ", "").encode() + b',""]}'
    with pytest.raises(wire.WireError, match="not an array"):
        wire.decode(body)


@pytest.mark.parametrize("body", [b"[" + b"{}," * wire.MAX_CONTAINERS + b"{}]",
                                  b"[" + b"0," * (wire.MAX_ITEMS + 1) + b"0]"], ids=["dicts", "items"])
def test_an_answer_of_too_many_lists_dicts_or_items_is_refused_before_it_is_parsed(body):
    """4 MB of '{},' parsed is 1.4 million dicts, gigabytes in the grader once several were kept."""
    with pytest.raises(wire.WireError, match="more than"):
        wire.decode(body)


def test_a_shape_or_value_of_the_childs_is_hidden_where_the_child_held_solutions():
    expected = np.zeros((1, 3))
    for got, said in ((np.zeros((0, 1, 1, 0)), "(0, 1, 1, 0)"), (np.array([[0.0, 123.25, 0.0]]), "123.25")):
        message = difference(got, expected)
        assert said in shown(message, False, "softmax")
        hidden = shown(message, True, "softmax")
        assert said not in hidden and "…" in hidden and "python -m exercises check softmax" in hidden


def test_what_the_judges_own_code_raises_on_an_answer_is_the_childs_text(monkeypatch):
    """int('...') of a dict key the child sent raised a ValueError quoting the key: a base64
    solution, shown whole in the teacher's grade."""
    def judge(task):
        return [int(key) for key in {"c2VsZi5ncmFk": 0}]
    monkeypatch.setitem(checks.CHECKS, "value_mul", judge)
    status, message = checks.run("value_mul", None)
    assert status == "not yet" and "c2VsZi5ncmFk" in shown(message, False, "value_mul")
    assert "c2VsZi5ncmFk" not in shown(message, True, "value_mul") and "raised ValueError: …" in shown(
        message, True, "value_mul")


@pytest.mark.parametrize("seconds", [0.5, 1.5])
def test_a_child_that_reads_nothing_is_timed_out_at_the_deadline_not_waited_for(seconds):
    """The judge's sends keep the task's deadline: a task child that never reads its calls
    (trial 15's, answering from a peek) fills the socket, and a plain write then blocked the
    whole class's grade for ever."""
    import socket
    import time
    from exercises.zygote import Crashed, Task
    judge, child = socket.socketpair()
    try:
        task = Task(None, judge, time.monotonic() + seconds, 100)
        started = time.monotonic()
        with pytest.raises(Crashed) as info:
            task.call("softmax", np.zeros((512, 512)))         # 2 MB: far more than a socket holds
        assert info.value.verdict[0] == "timed out" and task.broken
        assert seconds - 0.1 < time.monotonic() - started < seconds + 2
    finally:
        judge.close()
        child.close()


ORPHANED = """
import os, socket, sys, time
from exercises.child import _ended_or_orphaned
child = os.fork()
if child == 0:
    os.setsid()
    time.sleep(120)
    os._exit(0)
grader, control = socket.socketpair()
print(child, flush=True)
grader.close()                                  # the grader is gone
_ended_or_orphaned(child, False, control)
print("still here", flush=True)
"""


def test_a_zygote_whose_grader_is_gone_kills_its_task_and_ends():
    """When the grader dies mid-task (killed by `timeout` while a task stalled, in trial 15),
    the control socket closes: the zygote kills the task's processes and ends, so nothing of
    the run outlives it."""
    import os
    import subprocess
    import sys
    import time
    from tests.exercises.helpers import ROOT
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", ORPHANED], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "still here" not in run.stdout, run.stdout + run.stderr
    assert time.monotonic() - started < 30
    task = int(run.stdout.split()[0])
    for _ in range(50):                            # killed; reaped by init once its parent is gone
        if not os.path.exists(f"/proc/{task}") or open(f"/proc/{task}/stat").read().split()[2] == "Z":
            break
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{task}") or open(f"/proc/{task}/stat").read().split()[2] == "Z"
