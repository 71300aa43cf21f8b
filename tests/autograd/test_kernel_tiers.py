"""Every kernel of every tier against its numpy definition (autograd/kernels/reference.py),
the switch between tiers, and what a learner steps through with the JIT off."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from autograd import kernels
from autograd.kernels import reference
from tests.helpers import ENGINE_ROOM, ENGINE_ROOM_ABSENT

DTYPES = [np.float32, np.float64]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def tol(dtype):
    return dict(rtol=2e-5, atol=2e-6) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-13)


def layouts(x):
    """x as it is, as a transposed view of a contiguous array, and as a strided slice."""
    transposed = np.ascontiguousarray(np.swapaxes(x, -1, -2)).swapaxes(-1, -2)
    strided = np.repeat(x, 2, axis=-1)[..., ::2]
    return {"contiguous": x, "transposed": transposed, "strided": strided}


MATMUL_SHAPES = [((3, 5), (5, 7)), ((1, 1), (1, 1)), ((7, 33), (33, 1)), ((2, 1, 3, 5), (4, 5, 2)),
                 ((0, 4), (4, 3)), ((3, 0), (0, 2)), ((2, 3, 4), (4, 5)), ((5, 2), (2, 0))]
ROW_SHAPES = [(5, 7), (3, 1), (1, 33), (2, 3, 13), (4, 0), (0, 6)]
needs_engine_room = pytest.mark.skipif(not ENGINE_ROOM, reason=ENGINE_ROOM_ABSENT)
TIERS_HERE = [name for name in kernels.TIERS if name != "fast" or ENGINE_ROOM]


@pytest.fixture(params=["loops", pytest.param("fast", marks=needs_engine_room)])
def tier(request):
    return kernels._load(request.param)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("a_shape,b_shape", MATMUL_SHAPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
def test_matmul_matches_numpy(tier, dtype, a_shape, b_shape, layout):
    rng = np.random.default_rng(len(a_shape) + a_shape[-1])
    a = layouts(rng.standard_normal(a_shape).astype(dtype))[layout]
    b = layouts(rng.standard_normal(b_shape).astype(dtype))["contiguous" if layout == "strided" else layout]
    got = tier.matmul(a, b)
    assert got.dtype == dtype
    np.testing.assert_allclose(got, reference.matmul(a, b), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_grad_is_matmul_bit_for_bit_whatever_the_operands_layout(tier, dtype):
    """matmul_grad(a, b, operand): a @ b as matmul gives it, however the operand it is the
    gradient of lies in memory (a head of a (B, T, H, d) array, a transposed view, a copy)."""
    rng = np.random.default_rng(1)
    heads = rng.standard_normal((2, 9, 3, 8)).astype(dtype).transpose(0, 2, 1, 3)          # (2, 3, 9, 8)
    a, b = rng.standard_normal((2, 3, 9, 5)).astype(dtype), rng.standard_normal((2, 3, 5, 8)).astype(dtype)
    for operand in (heads, np.ascontiguousarray(heads), layouts(np.ascontiguousarray(heads))["transposed"]):
        got = tier.matmul_grad(a, b, operand)
        assert got.shape == operand.shape and got.dtype == dtype
        np.testing.assert_array_equal(got, tier.matmul(a, b))
    np.testing.assert_allclose(tier.matmul(a, b), reference.matmul_grad(a, b, heads), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "strided"])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_row_wise_forwards_match_numpy(tier, dtype, shape, layout, name):
    rng = np.random.default_rng(shape[-1])
    x = layouts((rng.standard_normal(shape) * 3).astype(dtype))[layout]
    got = getattr(tier, name)(x)
    assert got.dtype == dtype and got.shape == x.shape
    np.testing.assert_allclose(got, getattr(reference, name)(x), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", ROW_SHAPES)
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_row_wise_backwards_match_numpy(tier, dtype, shape, layout, name):
    rng = np.random.default_rng(shape[-1] + 1)
    y = getattr(reference, name)(rng.standard_normal(shape).astype(dtype))
    dy = layouts(rng.standard_normal(shape).astype(dtype))[layout]
    got = getattr(tier, name + "_backward")(y, dy)
    assert got.dtype == dtype and got.shape == y.shape
    np.testing.assert_allclose(got, getattr(reference, name + "_backward")(y, dy), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_large_logits_and_fully_masked_rows_give_no_nan(tier, dtype, name):
    x = np.array([[1e4, -1e4, 3e4], [-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0]], dtype)
    y = getattr(tier, name)(x)
    assert not np.isnan(y).any()                                     # log-softmax of a masked entry is -inf
    np.testing.assert_allclose(y, getattr(reference, name)(x), **tol(dtype))
    dx = getattr(tier, name + "_backward")(y, np.ones_like(x))
    assert np.isfinite(dx).all() and (dx[1] == 0).all()                 # the masked row passes no gradient


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_nan_and_inf_give_a_nan_row(tier, name):
    x = np.array([[0.0, np.nan, 1.0], [0.0, np.inf, 1.0], [0.0, 1.0, 2.0]])
    y = getattr(tier, name)(x)
    assert np.isnan(y[:2]).all() and np.isfinite(y[2]).all()


def test_every_tier_offers_every_kernel():
    """A tier that does not write a kernel runs its numpy definition: loops writes six (but
    those a student copy cut, whose numpy definitions are its exercises: twins.py)."""
    loops = kernels._load("loops")
    written = {name for name in kernels.KERNELS if getattr(loops, name) is not getattr(reference, name)}
    assert written == {"matmul", "matmul_grad", "softmax", "softmax_backward", "log_softmax",
                       "log_softmax_backward"} - set(kernels.kernels_cut())


@needs_engine_room
def test_the_fast_tier_writes_every_kernel():
    """Every one (but those a student copy cut, which run their numpy definitions: twins.py)."""
    fast, cut = kernels._load("fast"), kernels.kernels_cut()
    assert all((getattr(fast, name) is getattr(reference, name)) == (name in cut) for name in kernels.KERNELS)


def test_use_tier_routes_every_call_and_refuses_an_unknown_tier():
    previous = kernels.tier()
    x = np.random.default_rng(0).standard_normal((3, 5))
    try:
        for name in TIERS_HERE:
            kernels.use_tier(name)
            assert kernels.tier() == name
            np.testing.assert_allclose(kernels.softmax(x), reference.softmax(x), atol=1e-12)
        with pytest.raises(ValueError, match="unknown kernel tier 'numba'; expected one of numpy, loops, fast"):
            kernels.use_tier("numba")
        assert kernels.tier() == TIERS_HERE[-1]                          # unchanged by the refused call
    finally:
        kernels.use_tier(previous)


def run_python(script, **env):
    environment = {k: v for k, v in os.environ.items() if k not in ("AUTOGRAD_KERNELS", "NUMBA_DISABLE_JIT")}
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                            cwd=ROOT, env=dict(environment, **env), timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.mark.parametrize("env,expected", [({}, "fast" if ENGINE_ROOM else "loops"),       # absent: the loops, slower
                                          ({"NUMBA_DISABLE_JIT": "1"}, "loops"), ({"AUTOGRAD_KERNELS": "numpy"}, "numpy"),
                                          ({"NUMBA_DISABLE_JIT": "1", "AUTOGRAD_KERNELS": "fast"}, "fast")])
def test_the_environment_chooses_the_tier(env, expected):
    assert run_python("from autograd import kernels; print(kernels.tier())", **env) == expected


STEP_INTO = """
    import inspect, json, os, sys
    import numpy as np
    from autograd import Tensor
    a = Tensor(np.arange(6.0).reshape(2, 3) / 6, requires_grad=True)
    b = Tensor(np.arange(6.0).reshape(3, 2) / 6, requires_grad=True)
    (a @ b).softmax(-1).sum().backward()            # the kernels loaded before tracing starts
    a.grad = b.grad = None
    below = (os.path.join("autograd", "kernels"), os.path.join("autograd", "engine_room"))
    lines, longest = set(), {}

    def trace(frame, event, arg):
        path = os.path.relpath(frame.f_code.co_filename)
        if not path.startswith(below):
            return trace
        if event == "call":
            source = inspect.getsourcelines(frame.f_code)[0]
            longest[f"{path}:{frame.f_code.co_name}"] = len(source)
        elif event == "line":
            lines.add((path, frame.f_lineno))
        return trace

    sys.settrace(trace)
    (a @ b).softmax(-1).sum().backward()
    sys.settrace(None)
    print(json.dumps({"lines": len(lines), "files": sorted({path for path, _ in lines}), "functions": longest}))
"""


def test_with_the_jit_off_a_learner_steps_through_few_short_functions_in_the_loops_tier():
    """NUMBA_DISABLE_JIT=1: (a @ b).softmax(-1).sum().backward() runs at most 80 lines of the
    kernels, all in the loops tier (the registry binds its functions: no frame of its own),
    no function longer than 40 lines."""
    import json
    seen = json.loads(run_python(STEP_INTO, NUMBA_DISABLE_JIT="1"))
    assert seen["files"] == [os.path.join("autograd", "kernels", "loops.py")]
    assert seen["lines"] <= 80, seen
    assert max(seen["functions"].values()) <= 40, seen["functions"]


def test_each_kernel_name_is_the_chosen_tiers_function_bound_at_its_first_call():
    """kernels.softmax IS the tier's function once a kernel has run (no forwarding frame);
    use_tier at run time rebinds it for modules that did `from autograd import kernels`."""
    from autograd.kernels import loops
    previous = kernels.tier()
    x = np.random.default_rng(0).standard_normal((3, 5))
    try:
        kernels.use_tier("loops")
        assert "softmax" not in vars(kernels)                            # nothing loaded until a kernel runs
        kernels.softmax(x)
        assert kernels.softmax is loops.softmax and kernels.layer_norm is reference.layer_norm
        kernels.use_tier("numpy")
        np.testing.assert_array_equal(kernels.softmax(x), reference.softmax(x))
        assert kernels.softmax is reference.softmax and kernels.matmul is reference.matmul
        with pytest.raises(AttributeError, match="has no attribute 'no_such_kernel'"):
            kernels.no_such_kernel
    finally:
        kernels.use_tier(previous)


def test_importing_autograd_loads_no_tier():
    """Importing autograd (as the scalar engine's demos do) loads no tier and compiles nothing."""
    out = run_python("""
        import sys
        import autograd
        from autograd import kernels
        print(kernels._current is None, "numba" in sys.modules, "autograd.engine_room" in sys.modules)
    """)
    assert out == "True False False"


FALLBACK = """
    import sys
    import numpy as np
    {break_it}
    from autograd import kernels
    from autograd.kernels import loops, reference
    x = np.random.default_rng(0).standard_normal((3, 5))
    np.testing.assert_allclose(kernels.softmax(x), reference.softmax(x), atol=1e-12)
    kernels.prepare()
    print(kernels.tier(), kernels.softmax is loops.softmax)
"""


@pytest.mark.parametrize("break_it", [
    "sys.modules['autograd.engine_room'] = None                  # as if the folder were deleted",
    pytest.param("import autograd.engine_room as room; room.ready = lambda: 1 / 0    # failing to build",
                 marks=needs_engine_room)])
def test_an_engine_room_that_cannot_be_loaded_leaves_the_loops_tier_said_in_one_line(break_it):
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(FALLBACK).format(break_it=break_it)],
                            capture_output=True, text=True, cwd=ROOT, timeout=300,
                            env={k: v for k, v in os.environ.items() if k not in ("AUTOGRAD_KERNELS",)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["loops", "True"]
    said = [line for line in result.stderr.splitlines() if "engine room" in line]
    assert len(said) == 1 and "running the loops tier instead" in said[0], result.stderr


def test_compiling_a_loop_kernel_is_said_in_one_line_and_loading_it_is_not(tmp_path):
    """The loops tier with the JIT on: a kernel compiled for a new dtype (float64 too) is
    announced on stderr as it starts, once; a later process loads it from the cache silently."""
    script = """
        import numpy as np
        from autograd import kernels
        a = np.ones((2, 3))
        assert (kernels.matmul(a, a.T) == 3).all()
    """
    env = dict(AUTOGRAD_KERNELS="loops", NUMBA_CACHE_DIR=str(tmp_path))
    for expected in (1, 0):
        result = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                                cwd=ROOT, timeout=600, env=dict(os.environ, **env))
        assert result.returncode == 0, result.stderr
        said = [line for line in result.stderr.splitlines() if line.startswith("autograd: compiling")]
        assert len(said) == expected, result.stderr
        assert all("matmul_loops" in line and "float64" in line for line in said)


def test_a_loop_compiled_is_announced_once_with_why_and_how_long(tmp_path):
    """The first process with an empty cache says, in one line, which loop it compiles, why
    and roughly how long; a later process loads it from the cache and says nothing."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_JIT"}
    env.update(NUMBA_CACHE_DIR=str(tmp_path), AUTOGRAD_KERNELS="loops")
    script = "from autograd import kernels; import numpy as np; x = np.zeros((2, 3), np.float32); kernels.softmax(x); kernels.softmax(x)"
    runs = [subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
            for _ in range(2)]
    assert runs[0].stderr == ("autograd: compiling softmax_loops (autograd/kernels/loops.py) for float32 arrays with Numba "
                              "now, as Numba's cache holds no build of it yet (a first run, or a fresh cache): about a "
                              "second each for the loops tier's kernels (this one, and any other this run needs "
                              "compiled); later runs load them from the cache\n")
    assert runs[1].stderr == ""
