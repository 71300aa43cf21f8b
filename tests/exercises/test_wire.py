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
