"""The engine room's kernels against their numpy definitions, and the ops' gradients with the fast tier."""

import os
import re
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest

from autograd import gradcheck, kernels
from autograd import engine_room
from autograd.engine_room import dispatch, elementwise, normalization, rowwise, warmup
from autograd.kernels import reference
from tests.helpers import leaf

DTYPES = [np.float32, np.float64]
SIZES = [1, 7, 33, 65, 129]


def tol(dtype):
    return dict(rtol=2e-5, atol=2e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)


@pytest.fixture
def fast_tier():
    previous = kernels.tier()
    kernels.use_tier("fast")
    yield
    kernels.use_tier(previous)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,k,n", [(m, k, n) for m in SIZES for k in (1, 33, 129) for n in SIZES][::3])
def test_matmul_matches_numpy(dtype, m, k, n):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    out = engine_room.matmul(a, b)
    assert out.dtype == dtype and out.shape == (m, n)
    np.testing.assert_allclose(out, reference.matmul(a, b), **tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_large_enough_for_threads(dtype):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((200, 130)).astype(dtype)
    b = rng.standard_normal((130, 190)).astype(dtype)
    np.testing.assert_allclose(engine_room.matmul(a, b), a @ b, rtol=1e-4 if dtype == np.float32 else 1e-11, atol=1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_transposed_and_broadcast_batches(dtype):
    rng = np.random.default_rng(2)
    a = rng.standard_normal((3, 1, 9, 5)).astype(dtype)
    b = rng.standard_normal((4, 7, 5)).astype(dtype).transpose(0, 2, 1)   # (4, 5, 7), not contiguous
    assert not b.flags.c_contiguous
    np.testing.assert_allclose(engine_room.matmul(a, b), reference.matmul(a, b), **tol(dtype))
    at = rng.standard_normal((33, 65)).astype(dtype).T                   # (65, 33) transposed view
    bt = rng.standard_normal((7, 33)).astype(dtype).T
    np.testing.assert_allclose(engine_room.matmul(at, bt), reference.matmul(at, bt), **tol(dtype))
    w = rng.standard_normal((6, 5)).astype(dtype)                          # (..., M, K) @ (K, N) folds rows
    np.testing.assert_allclose(engine_room.matmul(a, w.T), reference.matmul(a, w.T), **tol(dtype))


def _with_layout(x, layout):
    """x's values (its last two dims) in memory laid out as: C (row-major), T (a transposed
    view), S (rows contiguous, further apart than a row), G (no unit stride at all)."""
    if layout == "C":
        return np.ascontiguousarray(x)
    if layout == "T":
        return np.ascontiguousarray(x.swapaxes(-1, -2)).swapaxes(-1, -2)
    wide = np.zeros(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
    if layout == "S":
        wide[..., :x.shape[-1]] = x
        return wide[..., :x.shape[-1]]
    wide[..., ::2] = x
    return wide[..., ::2]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout_a", "CTSG")
@pytest.mark.parametrize("layout_b", "CTG")
@pytest.mark.parametrize("n", [20, 150, 300])
@pytest.mark.parametrize("m", [70, 260])
def test_matmul_every_operand_layout(dtype, layout_a, layout_b, n, m):
    """Every packing path of the Goto driver (k > KC): A rows contiguous or S (read in
    place), A transposed read in place (few B panels: n 20, 150, and columns under 1 KiB
    apart: m 70) or packed k-major with prefetching (many panels: n 300, or columns far
    apart: m 260), strided; several K blocks and row blocks, partial strips, register
    tiles stored straight into C and edge tiles through the buffer."""
    rng = np.random.default_rng(n)
    a = rng.standard_normal((m, 300)).astype(dtype)
    b = rng.standard_normal((300, n)).astype(dtype)
    out = engine_room.matmul(_with_layout(a, layout_a), _with_layout(b, layout_b))
    np.testing.assert_allclose(out, reference.matmul(a, b), **(tol(dtype) if dtype == np.float32 else
                                                              dict(rtol=1e-11, atol=1e-11)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout_a", "CT")
@pytest.mark.parametrize("m", [1, 13, 16])
def test_goto_driver_reads_b_in_place_for_few_rows_with_the_packed_paths_bits(dtype, layout_a, m):
    """With at most B_IN_PLACE_MAX_ROWS rows of A (the output layer's weight gradient
    g^T @ x), the Goto driver reads B's rows where they are instead of packing them: the
    same sums, so each row must equal that row of a taller product, which packs B."""
    from autograd.engine_room import gemm
    assert m <= gemm.B_IN_PLACE_MAX_ROWS
    rng = np.random.default_rng(m)
    nr = gemm.NR[dtype]
    tall = _with_layout(rng.standard_normal((4 * gemm.B_IN_PLACE_MAX_ROWS, 600)).astype(dtype), layout_a)
    b = rng.standard_normal((600, 2 * nr)).astype(dtype)                 # K blocks 3, whole panels
    np.testing.assert_array_equal(engine_room.matmul(tall[:m], b), engine_room.matmul(tall, b)[:m])
    np.testing.assert_allclose(engine_room.matmul(tall[:m], b), reference.matmul(tall[:m], b),
                               **(dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else tol(dtype)))   # sums of 600


def _run_driver(kernel, a, b, chunks):
    """kernel (a gemm driver) on one batch of 3-D operands, the way engine_room.matmul calls it."""
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), a.dtype)
    index = np.arange(a.shape[0])
    kernel(a[None], b[None], index, index if b.shape[0] == a.shape[0] else np.zeros_like(index), out[None], chunks)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("m,n", [(70, 37), (260, 70)])
def test_goto_driver_packs_b_of_every_layout_into_the_same_bits(dtype, m, n):
    """gemm.pack_b copies a B whose rows are contiguous (C, S) along its rows, a transposed
    one (T) down its columns, and one with no unit stride (G) number by number; the
    panels, and so the products, must be the same bits, and the tiles' prefetches of C
    must not disturb them.  K = 600: three K blocks, the last partial; n 37 and 70: a
    partial last panel, zero padded.  On one thread (each chunk packs its own), in 3
    chunks, and with one B for 3 matrices (both pack it once up front, shared)."""
    from autograd.engine_room import gemm
    rng = np.random.default_rng(m + n)
    a = rng.standard_normal((3, m, 600)).astype(dtype)
    b = rng.standard_normal((1, 600, n)).astype(dtype)
    driver = gemm.gemm_kernel(dtype)
    for chunks in (1, 3):
        for operands in ((a[:1], b), (a, b)):
            results = [_run_driver(driver, operands[0], _with_layout(operands[1], layout), chunks) for layout in "CSTG"]
            for result in results[1:]:
                np.testing.assert_array_equal(result, results[0])
            np.testing.assert_allclose(results[0], np.matmul(*operands), rtol=1e-4 if dtype == np.float32 else 1e-11,
                                       atol=1e-3 if dtype == np.float32 else 1e-11)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout_a", "CTSG")
@pytest.mark.parametrize("layout_b", "CTG")
@pytest.mark.parametrize("m,k,n", [(3, 5, 7), (10, 16, 10), (16, 11, 33), (70, 40, 17), (130, 64, 90),
                                   (13, 704, 64), (5, 300, 33), (16, 600, 17), (11, 520, 96), (12, 400, 7),
                                   (20, 12, 8), (17, 9, 4), (10, 300, 4)])
def test_small_matmul_every_layout_and_edge(dtype, layout_a, layout_b, m, k, n):
    """The small-matrix driver (k <= KC, or at most FEW_ROWS rows with K in blocks; n <=
    MAX_COLS): operands read in place or copied, a matrix smaller than one tile, overlapping
    last strips and panels (their later K blocks added once), a narrow last panel (n 33),
    several row blocks, the wide tile and the narrow one (a product at most one register
    wide: n 7 or 8 in float32, 4 in float64); batched, with B broadcast; serial and split in 3
    parallel chunks.  It must give the very bits of the Goto driver (the same sums in the
    same order)."""
    from autograd.engine_room import gemm, small_gemm
    rng = np.random.default_rng(m + k + n)
    a = _with_layout(rng.standard_normal((4, m, k)).astype(dtype), layout_a)
    b = _with_layout(rng.standard_normal((4, k, n)).astype(dtype), layout_b)
    assert small_gemm.small_enough(m, k, n)
    out = engine_room.matmul(a, b)
    atol = tol(dtype)["atol"] * max(1.0, k / 64)            # sums of up to 704 products round more
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=tol(dtype)["rtol"], atol=atol)
    goto = _run_driver(gemm.gemm_kernel(dtype), a, b, 1)
    np.testing.assert_array_equal(out, goto)
    np.testing.assert_array_equal(_run_driver(small_gemm.small_gemm_kernel(dtype), a, b, 3), goto)
    shared = _run_driver(small_gemm.small_gemm_kernel(dtype), a, b[:1], 1)   # one B for every A
    np.testing.assert_array_equal(shared, _run_driver(gemm.gemm_kernel(dtype), a, b[:1], 1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("heads", [2, 8])
def test_small_matmul_reads_b_in_place_or_copies_it_by_its_row_stride(dtype, heads):
    """Attention's P^T @ dout, dout one head of a (batch, T, heads x d) array: B's rows are
    heads x d numbers apart.  The small driver reads them in place when that is under
    gemm.IN_PLACE_MAX_STRIDE bytes, else copies them (rows 1 KiB apart crowd a few sets of
    L1; 8 heads of float32: 1 KiB): both give the Goto driver's bits."""
    from autograd.engine_room import gemm, small_gemm
    rng = np.random.default_rng(heads)
    t, d = 65, 32
    p = rng.random((3, t, t)).astype(dtype).swapaxes(1, 2)
    dout = rng.standard_normal((3, t, heads * d)).astype(dtype)[:, :, d:2 * d]
    out = engine_room.matmul(p, dout)
    np.testing.assert_allclose(out, np.matmul(p, dout), **tol(dtype))
    np.testing.assert_array_equal(out, _run_driver(gemm.gemm_kernel(dtype), p, dout, 1))
    np.testing.assert_array_equal(_run_driver(small_gemm.small_gemm_kernel(dtype), p, dout, 3), out)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("b_count", [3, 1])
def test_goto_driver_gives_the_same_bits_in_any_number_of_chunks(dtype, b_count):
    """The Goto driver over 3 matrices of several row blocks and K blocks (K 600 > KC),
    a transposed A, each matrix with its own B or one B for all (packed once, up front):
    in 1, 2, 3 or 5 chunks (cut inside a matrix's row blocks) every element is the same
    sum in the same order, so the bits are the same, and no row is left unwritten."""
    from autograd.engine_room import gemm
    rng = np.random.default_rng(b_count)
    a = rng.standard_normal((3, 600, 350)).astype(dtype).swapaxes(1, 2)       # (3, 350, 600), transposed
    b = rng.standard_normal((b_count, 600, 70)).astype(dtype)
    driver = gemm.gemm_kernel(dtype)
    outputs = []
    for chunk_count in (1, 2, 3, 5):
        out = np.full((1, 3, 350, 70), np.nan, dtype)
        driver(a[None], b[None], np.arange(3), np.arange(3) % b_count, out, chunk_count)
        outputs.append(out[0])
    np.testing.assert_allclose(outputs[0], np.matmul(a, b), rtol=1e-4 if dtype == np.float32 else 1e-11, atol=1e-3)
    for out in outputs[1:]:
        np.testing.assert_array_equal(out, outputs[0])


@pytest.mark.parametrize("shape_a,shape_b", [((0, 3), (3, 4)), ((2, 0), (0, 4)), ((2, 3), (3, 0)), ((0, 2, 3), (3, 4))])
def test_matmul_empty_dims(shape_a, shape_b):
    a, b = np.ones(shape_a, np.float32), np.ones(shape_b, np.float32)
    out = engine_room.matmul(a, b)
    np.testing.assert_array_equal(out, reference.matmul(a, b))
    assert out.shape == np.matmul(a, b).shape


def _rows_with_edge_cases(n, dtype, seed):
    rng = np.random.default_rng(seed)
    x = (3 * rng.standard_normal((6, n))).astype(dtype)
    x[1] = -np.inf                          # a fully masked row
    x[2, ::2] = -np.inf                     # a partly masked row
    x[3, 0] = 1e4                           # huge logits
    x[4] = -1e4
    x[4, -1] = 1e4
    return x


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_row_kernels_forward_match_numpy(dtype, n, name):
    x = _rows_with_edge_cases(n, dtype, n)
    out = getattr(engine_room, name)(x)
    assert out.dtype == dtype and not np.isnan(out).any()
    assert np.isfinite(out[np.isfinite(x)]).all()
    np.testing.assert_allclose(out, getattr(reference, name)(x), **tol(dtype))
    np.testing.assert_array_equal(out[1], 0)   # fully masked row: zeros, not NaN


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("name,forward", [("softmax_backward", "softmax"), ("log_softmax_backward", "log_softmax")])
def test_row_kernels_backward_match_numpy(dtype, n, name, forward):
    x = _rows_with_edge_cases(n, dtype, n + 1)
    y = getattr(reference, forward)(x)
    dy = np.random.default_rng(n).standard_normal(x.shape).astype(dtype)
    dx = getattr(engine_room, name)(y, dy)
    assert np.isfinite(dx).all()
    np.testing.assert_allclose(dx, getattr(reference, name)(y, dy), rtol=1e-4 if dtype == np.float32 else 1e-11,
                               atol=1e-4 if dtype == np.float32 else 1e-11)
    if n > 1:
        np.testing.assert_array_equal(dx[1], 0)   # fully masked row: zero gradient


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [3, rowwise.SHORT_ROW - 1])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_short_rows_go_a_block_at_a_time_with_their_edge_cases(dtype, n, name):
    """Rows shorter than rowwise.SHORT_ROW are exponentiated in blocks of several rows: fully
    masked, NaN and huge rows at the first and last row of a block and of the array."""
    per_block = rowwise.BLOCK_NUMBERS // n
    x = (3 * np.random.default_rng(n).standard_normal((2 * per_block + 5, n))).astype(dtype)
    masked, nan, huge = [0, per_block - 1, 2 * per_block + 4], [per_block, 2 * per_block - 1], [per_block + 1]
    x[masked] = -np.inf
    x[nan, n // 2] = np.nan
    x[huge, 0] = 1e4
    with np.errstate(invalid="ignore"):
        out, want = getattr(engine_room, name)(x), getattr(reference, name)(x)
    np.testing.assert_allclose(out, want, **tol(dtype))                # NaN where want has NaN
    assert (out[masked] == 0).all() and np.isnan(out[nan]).all()
    assert np.isfinite(np.delete(out, nan, axis=0)).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [3, rowwise.LONG_ROW, rowwise.LONG_ROW + 1])
def test_log_softmax_backward_goes_a_block_at_a_time_with_masked_rows_at_its_edges(dtype, n):
    """Rows up to rowwise.LONG_ROW take their exps a block of rows at a time (longer ones row by
    row): fully masked rows (y = 0) at the first and last row of a block and of the array
    get zero gradient, and every other row the reference's."""
    per_block = max(1, rowwise.BLOCK_NUMBERS // n)
    x = (3 * np.random.default_rng(n).standard_normal((2 * per_block + 5, n))).astype(dtype)
    masked = [0, per_block - 1, per_block, 2 * per_block + 4]
    x[masked] = -np.inf
    y = reference.log_softmax(x)
    dy = np.random.default_rng(n + 1).standard_normal(x.shape).astype(dtype)
    dx = engine_room.log_softmax_backward(y, dy)
    np.testing.assert_allclose(dx, reference.log_softmax_backward(y, dy), **tol(dtype))
    assert (dx[masked] == 0).all() and (np.delete(dx, masked, axis=0) != 0).any(axis=1).all()


@pytest.mark.parametrize("dtype", DTYPES)
def test_fast_exp_is_accurate_over_its_whole_range(dtype):
    """softmax([d, 0]) = e^d / (1 + e^d) exercises the kernel's exp for d from -700 to 0."""
    low = -80 if dtype == np.float32 else -700
    d = np.linspace(low, 0, 2001).astype(dtype)
    x = np.stack([d, np.zeros_like(d)], axis=1)
    expected = np.exp(d.astype(np.float64)) / (1 + np.exp(d.astype(np.float64)))
    got = engine_room.softmax(x)[:, 0]
    rel = np.abs(got - expected) / expected
    assert rel.max() < (2e-6 if dtype == np.float32 else 1e-13)


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_row_kernels_on_non_contiguous_empty_and_3d_input(name):
    x = np.random.default_rng(3).standard_normal((5, 7, 4)).astype(np.float32).transpose(0, 2, 1)
    np.testing.assert_allclose(getattr(engine_room, name)(x), getattr(reference, name)(x), **tol(np.float32))
    empty = np.zeros((0, 5), np.float32)
    assert getattr(engine_room, name)(empty).shape == (0, 5)
    assert getattr(engine_room, name)(np.zeros((3, 0), np.float32)).shape == (3, 0)


def test_large_rows_use_threads_and_agree():
    x = np.random.default_rng(4).standard_normal((300, 400)).astype(np.float32)
    np.testing.assert_allclose(engine_room.softmax(x), reference.softmax(x), **tol(np.float32))


@pytest.mark.parametrize("case", [
    (lambda a, b: a @ b, [(3, 5), (5, 4)]),
    (lambda a, b: a @ b, [(2, 1, 3, 5), (4, 5, 2)]),
    (lambda a: a.softmax(-1), [(3, 7)]),
    (lambda a: a.log_softmax(1), [(2, 5, 3)]),
    (lambda a: a.masked_fill(np.array([False, True, True, False, True]), -np.inf).softmax(-1), [(3, 5)]),
    (lambda a: a.logsumexp(-1), [(4, 6)]),
])
def test_gradcheck_with_fast_kernels(fast_tier, case):
    fn, shapes = case
    assert kernels.tier() == "fast"
    assert gradcheck(fn, [leaf(*s) for s in shapes])


def test_prepare_keeps_the_chosen_tier_and_readies_the_engine_room():
    """kernels.prepare() (the training loops call it before starting their clocks) leaves
    the numpy tier alone and puts the engine room's kernels behind the fast one."""
    previous = kernels.tier()
    try:
        kernels.use_tier("numpy")
        kernels.prepare()
        assert kernels.tier() == "numpy" and kernels._current is reference
        kernels.use_tier("fast")
        kernels.prepare()
        assert kernels._current.matmul is engine_room.matmul and kernels.tier() == "fast"
    finally:
        kernels.use_tier(previous)


def test_every_process_runs_the_kernels_from_numbas_cache_and_gets_the_same_bits(tmp_path):
    """With an empty cache, the first kernel call compiles the float32 kernels in child
    processes (a share each: the serial GEMM driver in one, the small-matrix one in the
    other), and the first float64 softmax the float64 ones, and loads them from the cache,
    as every later process does (compile_once.py): compiled in the calling process,
    softmax's serial and parallel builds gave other last bits than when loaded (in both
    dtypes).  Also, nothing recompiles in the second process: the fast exp, the row max and
    the GEMM driver's packing close over intrinsics, and reached directly an intrinsic
    pickled differently in every process, Numba's cache key with it.  The fused attention
    kernels, made ready first (kernels.prepare, as the GPT's training does), are
    compiled in the same children, beside the others."""
    script = textwrap.dedent("""
        import hashlib, numpy as np
        from autograd import kernels
        from autograd import engine_room
        from autograd.engine_room import attention, dispatch, elementwise, gemm, normalization, rowwise, small_gemm, warmup
        kernels.prepare_in_background(np.float32, fused_attention=True)   # as demos.gpt does, before its data
        kernels.softmax(np.zeros((2, 3), np.float32))     # the first kernel call waits for those children
        kernels.prepare(np.float32, fused_attention=True)
        rng = np.random.default_rng(0)
        digest = hashlib.sha256()
        q = rng.standard_normal((2, 3, 70, 32)).astype(np.float32)
        out, lse = attention.attention_forward(q, q, q, None, 0.2)
        for x in (out, lse) + attention.attention_backward(q, q, q, None, 0.2, out, lse, q):
            digest.update(x.tobytes())
        for dtype in (np.float32, np.float64):
            for shape in [(64, 64), (300, 257)]:                      # serial and parallel builds
                x = (rng.standard_normal(shape) * 5).astype(dtype)
                y = kernels.softmax(x)
                for out in (y, kernels.log_softmax(x), kernels.softmax_backward(y, x), kernels.matmul(x, x.T)):
                    digest.update(out.tobytes())
        loaded = [rowwise._rowwise_set(dtype)["softmax"].compiled for dtype in (np.float32, np.float64)]
        loaded += [gemm.gemm_kernel(np.float32).compiled, small_gemm.small_gemm_kernel(np.float32).compiled]
        print(digest.hexdigest(), sum(sum(k.stats.cache_misses.values()) for k in loaded),
              min(sum(k.stats.cache_hits.values()) for k in loaded))
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    env.pop("AUTOGRAD_COMPILE_IN_PROCESS", None)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    runs = [subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True)
            for _ in range(2)]
    assert all(run.returncode == 0 for run in runs), runs[0].stderr + runs[1].stderr
    (first, misses, hits), (second, *counts) = (run.stdout.split() for run in runs)
    assert first == second
    for what in ("the float32 Numba kernels and the fused attention kernels for float32", "the float64 Numba kernels"):
        assert re.search(f"compiling {what} in [12] child process", runs[0].stderr)
        assert re.search(f"{what} compiled in [0-9]+ s", runs[0].stderr)
    assert runs[0].stderr.count("compiling") == 2                    # started once, waited for twice
    assert "compiling" not in runs[1].stderr                         # the markers say it is done
    assert (misses, hits) == ("0", "1") and counts == ["0", "1"]      # loaded, not compiled, both times


def test_a_process_that_leaves_early_stops_its_compiling_children(tmp_path):
    """A demo starts the compile children before it reads its data; if it then leaves
    (a user's mistake: exit status 2), the children stop with it and mark nothing done."""
    script = textwrap.dedent("""
        import sys
        from autograd import kernels
        from autograd.engine_room import compile_once
        kernels.prepare_in_background()
        print(" ".join(str(child.pid) for child in compile_once._under_way["float32"].children))
        sys.exit(2)
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    env.pop("AUTOGRAD_COMPILE_IN_PROCESS", None)
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    run = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True)
    assert run.returncode == 2, run.stderr
    pids = [int(pid) for pid in run.stdout.split()]
    assert pids and not any(os.path.exists(f"/proc/{pid}") for pid in pids)
    assert not [name for name in os.listdir(os.path.dirname(_marker_in(tmp_path))) if name.endswith(".done")]


def _marker_in(cache):
    """The float32 marker's path when Numba caches in `cache`."""
    script = "from autograd.engine_room import compile_once; print(compile_once.marker('float32'))"
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    return subprocess.run([sys.executable, "-c", script], env=dict(os.environ, NUMBA_CACHE_DIR=str(cache)), cwd=root,
                          capture_output=True, text=True, check=True).stdout.strip()


def test_no_kernel_links_numbas_string_code(tmp_path):
    """A kernel that assigns one array to a slice of another (x[a:b] = y) makes Numba compile
    the shape check's error message, formatted at run time: unicode repr, concatenation,
    integers to text.  Nothing fails and nothing runs slower; only the compile takes longer
    (4.6 s of the float32 set's, when LayerNorm's backward had one).  So every kernel is
    compiled here with an empty cache (a kernel loaded from the cache carries no code to
    read) and its LLVM module searched for Numba's unicode functions; a function with such a
    slice assignment, compiled alongside, shows that the search finds them."""
    script = textwrap.dedent("""
        import gc
        import numba
        import numpy as np
        from numba.core.dispatcher import Dispatcher
        from autograd import engine_room
        from autograd.engine_room import attention, dispatch, elementwise, normalization, rowwise, warmup

        def links_string_code(dispatcher):
            return any("7unicode" in overload.library.get_llvm_str() for overload in dispatcher.overloads.values())

        @numba.njit
        def assigns_a_slice(x, y):
            x[1:3] = y
        assigns_a_slice(np.zeros(4), np.ones(2))
        assert links_string_code(assigns_a_slice)

        warmup.warmup(dtypes=(np.float32,))
        attention._kernels_for(np.float32)
        def is_ours(x):
            try:
                return isinstance(x, Dispatcher) and (x.py_func.__module__ or "").startswith("autograd")
            except ReferenceError:                      # a weak proxy whose object is gone
                return False
        ours = [x for x in gc.get_objects() if is_ours(x)]
        print(sum(len(x.overloads) for x in ours), [x.py_func.__qualname__ for x in ours if links_string_code(x)])
    """)
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path), AUTOGRAD_COMPILE_IN_PROCESS="1")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    compiled, offenders = result.stdout.split(" ", 1)
    assert int(compiled) >= 60                         # the float32 set and the fused attention were searched
    assert offenders.strip() == "[]", f"kernels that compile Numba's string code: {offenders}"


def test_kernels_run_as_plain_python_with_jit_disabled():
    script = textwrap.dedent("""
        import numpy as np
        from autograd import engine_room
        from autograd.engine_room import dispatch, elementwise, normalization, rowwise, warmup
        from autograd.kernels import reference
        import numba
        assert numba.config.DISABLE_JIT
        rng = np.random.default_rng(0)
        a, b = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
        np.testing.assert_allclose(engine_room.matmul(a, b), a @ b, rtol=1e-12)
        x = rng.standard_normal((3, 6)).astype(np.float32)
        x[1] = -np.inf
        for name in ("softmax", "log_softmax"):
            np.testing.assert_allclose(getattr(engine_room, name)(x), getattr(reference, name)(x), rtol=1e-5, atol=1e-6)
        y = reference.softmax(x)
        np.testing.assert_allclose(engine_room.softmax_backward(y, x * 0 + 1), reference.softmax_backward(y, x * 0 + 1), atol=1e-6)
        from autograd.engine_room import attention, transpose
        q, k, v = (rng.standard_normal((2, 40, 32)) for _ in range(3))
        mask = rng.random((40, 40)) < 0.5                          # seeded, True = may attend
        mask[7] = False                                             # a query that sees no key
        mask = np.broadcast_to(mask, (2, 40, 40))
        out, lse = attention.attention_forward(q, k, v, mask, 0.3)
        want_out, want_lse = reference.attention_forward(q, k, v, mask, 0.3)
        np.testing.assert_allclose(out, want_out, atol=1e-12)
        for got, want in zip(attention.attention_backward(q, k, v, mask, 0.3, out, lse, q),
                             reference.attention_backward(q, k, v, mask, 0.3, want_out, want_lse, q)):
            np.testing.assert_allclose(got, want, atol=1e-11)
        x, target = rng.standard_normal((33, 17)), np.zeros((17, 33))
        transpose.copy_transposed(x, target, 2.0)
        assert (target == 2.0 * x.T).all()
        from autograd.engine_room import gemm, small_gemm
        a3, b3, index = rng.standard_normal((1, 1, 70, 40)), rng.standard_normal((1, 1, 40, 17)), np.zeros(1, np.int64)
        for driver in (gemm.gemm_kernel(np.float64), small_gemm.small_gemm_kernel(np.float64)):
            c3 = np.full((1, 1, 70, 17), np.nan)
            driver(a3, b3, index, index, c3, 3)                        # in 3 chunks, one after another
            np.testing.assert_allclose(c3[0, 0], a3[0, 0] @ b3[0, 0], rtol=1e-12)
        print("steppable")
    """)
    env = dict(os.environ, NUMBA_DISABLE_JIT="1")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    result = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "steppable" in result.stdout


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("weight_decay,decoupled", [(0.0, False), (0.1, False), (0.1, True)])
@pytest.mark.parametrize("size", [1, 7, 129, (3, 5), (4, 1, 33)])
def test_adam_step_matches_numpy(dtype, weight_decay, decoupled, size):
    rng = np.random.default_rng(np.prod(size))
    p, g = rng.standard_normal((2,) + np.shape(np.empty(size))).astype(dtype)
    m, v = rng.standard_normal(size).astype(dtype), rng.random(size).astype(dtype)
    states = [[p.copy(), m.copy(), v.copy()] for _ in range(2)]
    for step in (1, 2, 3):
        for backend, (pp, mm, vv) in zip((engine_room, reference), states):
            backend.adam_step(pp, g, mm, vv, 0.01, 0.9, 0.999, 1e-8, weight_decay, decoupled, step)
    for got, want in zip(*states):
        np.testing.assert_allclose(got, want, **tol(dtype))
    assert not np.allclose(states[0][0], p)           # the parameters did move


@pytest.mark.parametrize("p", [np.zeros((4, 3)).T, np.zeros(8)[::2]], ids=["transposed", "strided"])
def test_adam_step_refuses_a_non_contiguous_parameter(p):
    with pytest.raises(ValueError, match="parameter array must be contiguous"):
        engine_room.adam_step(p, np.ones(p.shape), np.zeros(p.shape), np.zeros(p.shape), 0.1, 0.9, 0.999, 1e-8, 0.0, False, 1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_adam_step_on_an_empty_parameter_changes_nothing(dtype):
    p, m, v = np.zeros((0, 3), dtype), np.zeros((0, 3), dtype), np.zeros((0, 3), dtype)
    engine_room.adam_step(p, np.zeros((0, 3), dtype), m, v, 0.1, 0.9, 0.999, 1e-8, 0.1, True, 1)
    assert p.shape == m.shape == v.shape == (0, 3)


def test_adam_step_rounds_its_scalars_to_the_parameters_dtype():
    """float32 parameters are updated with float32 scalars: a learning rate that differs from
    another only below float32's precision gives the same bits."""
    start = np.random.default_rng(3).standard_normal(37).astype(np.float32)
    results = []
    for lr in (1e-3, 1e-3 * (1 + 1e-12)):
        p, m, v = start.copy(), np.zeros(37, np.float32), np.zeros(37, np.float32)
        engine_room.adam_step(p, np.ones(37, np.float32), m, v, lr, 0.9, 0.999, 1e-8, 0.1, True, 2)
        results.append(p)
    np.testing.assert_array_equal(*results)
    assert not np.array_equal(results[0], start)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("ids", [[], [3], [0, 4, 0, 0, 2], [[1, -1], [-5, 4]], list(range(5)) * 40])
def test_index_add_rows_matches_numpy(dtype, ids):
    """Repeated ids accumulate in order (bit for bit as ufunc.at), negative ids count from
    the end, rows may arrive non-contiguous or shaped like the ids."""
    ids = np.array(ids, dtype=np.int64)
    rng = np.random.default_rng(ids.size)
    base = rng.standard_normal((5, 7)).astype(dtype)
    rows = rng.standard_normal((7,) + ids.shape).astype(dtype)
    rows = np.moveaxis(rows, 0, -1)                    # (..., 7), not contiguous
    got, want = base.copy(), base.copy()
    engine_room.index_add_rows(got, ids, rows)
    reference.index_add_rows(want, ids, rows)
    np.testing.assert_array_equal(got, want)
    if ids.size:
        assert not np.array_equal(got, base)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (33, 65), (3, 0, 5), (1001, 3)])
@pytest.mark.parametrize("contiguous", [True, False])
def test_sum_of_squares_matches_numpy(dtype, shape, contiguous):
    """Accumulated in float64 whatever the input's dtype: float32 gradients whose squares
    would lose digits in a float32 sum (values around 1e3 next to 1e-3) give numpy's float64 result."""
    rng = np.random.default_rng(sum(shape) + 1)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(dtype)
    if not contiguous:
        x = np.asfortranarray(x).T if x.ndim > 1 else x[::-1]
    got, want = engine_room.sum_of_squares(x), reference.sum_of_squares(x)
    assert isinstance(got, float)
    assert got == pytest.approx(want, rel=1e-13, abs=0)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows,width", [(1, 1), (7, 33), (65, 7), (3, 129), (600, 131)])   # the last: parallel
def test_layer_norm_kernels_match_numpy(dtype, rows, width):
    rng = np.random.default_rng(rows * width)
    x = (3 * rng.standard_normal((rows, width)) + 1).astype(dtype)
    w, b = rng.standard_normal(width).astype(dtype), rng.standard_normal(width).astype(dtype)
    got, want = engine_room.layer_norm(x, w, b, 1e-5), reference.layer_norm(x, w, b, 1e-5)
    for a, e in zip(got, want):
        assert a.dtype == dtype
        np.testing.assert_allclose(a, e, **tol(dtype))
    g = rng.standard_normal((rows, width)).astype(dtype)
    for a, e in zip(engine_room.layer_norm_backward(g, *want[1:], w), reference.layer_norm_backward(g, *want[1:], w)):
        np.testing.assert_allclose(a, e, rtol=1e-4 if dtype == np.float32 else 1e-11,
                                   atol=1e-4 if dtype == np.float32 else 1e-11)


@pytest.mark.parametrize("dtype", DTYPES)
def test_row_wise_and_elementwise_kernels_give_the_same_bits_in_one_chunk_or_three(dtype):
    """A threaded call cuts the rows (elements) into chunks, one call of the same compiled
    function each (chunks.py): the result must not depend on the cut, and every row must be
    written (outputs start as NaN)."""
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((301, 37)) * 4).astype(dtype), rng.standard_normal((301, 37)).astype(dtype)
    x[5] = -np.inf                                                   # a fully masked row
    flat, grad = x[6:].reshape(-1), y[6:].reshape(-1)
    mask, row_of = rng.random((7, 37)) < 0.3, np.arange(301) % 7
    rows = rowwise._rowwise_set(dtype)
    # (kernel, its arguments before the output, after it)
    calls = [(rows["softmax"], (x,), ()), (rows["log_softmax"], (x,), ()),
             (rows["softmax_backward"], (reference.softmax(x), y), ()),
             (rows["log_softmax_backward"], (reference.log_softmax(y), y), ()),
             (elementwise._gelu_kernel(dtype, False), (flat,), (True,)), (elementwise._gelu_kernel(dtype, True), (flat, grad), (False,)),
             (elementwise._relu_kernel(dtype, False), (flat,), ()), (elementwise._relu_kernel(dtype, True), (flat, grad), ()),
             (elementwise._masked_fill_kernel(dtype), (y, mask, row_of, dtype(-1e9)), ())]
    for kernel, before, after in calls:
        outputs = [np.full_like(before[0], np.nan) for _ in range(2)]
        for out, chunks in zip(outputs, (1, 3)):
            kernel(*before, out, *after, chunks)
        assert not np.isnan(outputs[0]).any(), kernel.compiled
        np.testing.assert_array_equal(*outputs)


def test_a_matmul_runs_threaded_only_with_the_work_its_driver_needs(monkeypatch):
    """With two threads a product runs threaded from PARALLEL_MIN_FLOPS through the
    small-matrix driver (attention's products, all heads in one call), from twice that
    through the Goto driver, whose threaded call is two parallel regions (B's panels packed
    up front, then the product): the size-S step's 10-12 MFLOP linear layers stay serial,
    which kept two threads from making that step slower than one."""
    from autograd.engine_room import chunks
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)
    calls = []
    original = chunks.ChunkedKernel.__call__

    def recording(self, *arguments_then_chunks):
        calls.append((self.compiled.py_func.__qualname__.split("[")[0], arguments_then_chunks[-1]))
        return original(self, *arguments_then_chunks)

    monkeypatch.setattr(chunks.ChunkedKernel, "__call__", recording)
    rng = np.random.default_rng(0)
    threshold = dispatch.PARALLEL_MIN_FLOPS
    cases = [((640, 64), (64, 128), "gemm_chunk", 1),                  # 10.5 MFLOP: under twice the threshold
             ((640, 64), (64, 256), "gemm_chunk", 2),                  # 21 MFLOP
             ((40, 4, 32, 32), (40, 4, 32, 32), "small_gemm_chunk", 2),   # 10.5 MFLOP in 160 matrices
             ((20, 4, 32, 32), (20, 4, 32, 32), "small_gemm_chunk", 1)]   # 5.2 MFLOP
    for a_shape, b_shape, driver, least_chunks in cases:
        a, b = rng.standard_normal(a_shape).astype(np.float32), rng.standard_normal(b_shape).astype(np.float32)
        flops = 2 * a.size // a_shape[-1] * a_shape[-1] * b_shape[-1]
        assert (flops >= threshold * (1 if driver == "small_gemm_chunk" else 2)) == (least_chunks > 1)
        calls.clear()
        np.testing.assert_allclose(engine_room.matmul(a, b), np.matmul(a, b), rtol=1e-4, atol=1e-4)
        product = [chunk_count for name, chunk_count in calls if name.endswith(driver)]
        assert len(product) == 1, calls
        assert (product[0] > 1) == (least_chunks > 1), (a_shape, b_shape, calls)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_in_one_chunk_or_three_gives_the_same_bits(dtype):
    """Threads share the rows (3 chunks here) and the parameter gradients' columns, each
    column still summed in row order, so a model trains to the same bits on one thread or two."""
    rng = np.random.default_rng(0)
    x, g = rng.standard_normal((2, 700, 130)).astype(dtype)
    w, b = rng.standard_normal((2, 130)).astype(dtype)
    forward, backward = normalization._layer_norm_kernel(dtype, False), normalization._layer_norm_kernel(dtype, True)
    results = []
    for chunks in (1, 3):
        out, xhat, rstd = np.empty_like(x), np.empty_like(x), np.empty((700, 1), dtype)
        forward(x, w, b, dtype(1e-5), out, xhat, rstd, chunks)
        dx, dw, db = np.empty_like(x), np.empty(130, dtype), np.empty(130, dtype)
        backward(g, xhat, rstd, w, dx, dw, db, chunks)
        results.append((out, xhat, rstd, dx, dw, db))
    for serial, threaded in zip(*results):
        np.testing.assert_array_equal(serial, threaded)
    np.testing.assert_allclose(results[0][4], (g * results[0][1]).sum(0), rtol=1e-4)   # dweight summed over all rows


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
@pytest.mark.parametrize("shape", [(0,), (1,), (7, 33), (3, 5, 129)])
def test_gelu_kernels_match_numpy(dtype, approximate, shape):
    rng = np.random.default_rng(len(shape))
    x = (3 * rng.standard_normal(shape)).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    for got, want in ((engine_room.gelu(x, approximate), reference.gelu(x, approximate)),
                      (engine_room.gelu_backward(x, g, approximate), reference.gelu_backward(x, g, approximate))):
        assert got.dtype == dtype and got.shape == shape
        np.testing.assert_allclose(got, want, **tol(dtype))


def test_gelu_kernels_on_non_contiguous_input_and_known_values():
    x = np.linspace(-4, 4, 24).reshape(4, 6).T                 # (6, 4), a transposed view
    assert not x.flags.c_contiguous
    np.testing.assert_allclose(engine_room.gelu(x, "none"), reference.gelu(x, "none"), rtol=1e-12, atol=1e-15)
    # GELU(1) = Phi(1) = 0.8413447460685429..., GELU(-1) = -(1 - Phi(1))
    np.testing.assert_allclose(engine_room.gelu(np.array([1.0, -1.0]), "none"), [0.8413447460685429, -0.15865525393145707],
                               rtol=1e-14)
    with pytest.raises(ValueError, match="approximate must be 'none' or 'tanh'"):
        engine_room.gelu(x, "fast")


with np.errstate(invalid="ignore"):
    NEG_NAN = float(np.array(np.inf) - np.array(np.inf))   # inf - inf: a NaN with the sign bit set


@pytest.mark.parametrize("backend", ["fast", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bad", [np.nan, NEG_NAN, np.inf])
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_nan_and_inf_give_a_nan_row_as_in_pytorch(backend, dtype, bad, name):
    assert np.signbit(np.array([NEG_NAN], dtype))[0] or not np.signbit(bad)
    module = engine_room if backend == "fast" else reference
    x = np.array([[1.0, bad, 3.0], [1.0, 2.0, 3.0], [-np.inf, -np.inf, -np.inf]], dtype)
    with np.errstate(invalid="ignore"):
        y = getattr(module, name)(x)
        assert np.isnan(y[0]).all()                          # the row with NaN / +inf
        assert np.isfinite(y[1]).all() and (y[2] == 0).all()  # others untouched; masked row 0
        dy = np.ones_like(x)
        dx = getattr(module, name + "_backward")(y, dy)
    assert np.isnan(dx[0]).all() and np.isfinite(dx[1]).all()
    np.testing.assert_array_equal(dx[2], 0)


@pytest.mark.parametrize("backend", ["fast", "numpy"])
def test_nan_in_an_upstream_gradient_propagates(backend):
    module = engine_room if backend == "fast" else reference
    y = module.softmax(np.array([[1.0, 2.0, 3.0]], np.float32))
    assert np.isnan(module.softmax_backward(y, np.array([[0.0, np.nan, 1.0]], np.float32))).all()
    assert np.isnan(module.gelu(np.array([np.nan], np.float32), "none")).all()


def test_float32_log_softmax_is_accurate_for_large_logits():
    """Eleven equal logits of 1e4: log(1/11) exactly; regrouping (x - max) - lse as
    x - (max + lse) loses three digits in float32 (it gave -2.397461)."""
    for x in (np.full((1, 11), 1e4, np.float32), np.array([[1e4, 1e4 - 1, 1e4 - 3, 9e3]], np.float32)):
        want = reference.log_softmax(x.astype(np.float64))             # in float64: the digits float32 may keep
        np.testing.assert_allclose(engine_room.log_softmax(x), want, rtol=1e-6)


@pytest.mark.parametrize("backend", ["fast", "numpy"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_nan_propagates_through_every_fused_kernel(backend, dtype):
    """A NaN in row 0 of the input (or of the gradient) must reach row 0 of every output,
    and leave the other rows alone, in matmul, layer norm, GELU and Adam."""
    module = engine_room if backend == "fast" else reference
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5)).astype(dtype)
    x[0, 2] = np.nan
    w, b = np.ones(5, dtype), np.zeros(5, dtype)
    out = module.matmul(x, rng.standard_normal((5, 4)).astype(dtype))
    assert np.isnan(out[0]).all() and np.isfinite(out[1:]).all()
    with np.errstate(invalid="ignore"):
        y, xhat, rstd = module.layer_norm(x, w, b, 1e-5)
        dx, dw, db = module.layer_norm_backward(np.ones_like(x), xhat, rstd, w)
    assert np.isnan(y[0]).all() and np.isfinite(y[1:]).all() and np.isnan(dx[0]).all() and np.isnan(dw).all()
    for approximate in ("none", "tanh"):
        g = module.gelu(x, approximate)
        assert np.isnan(g[0, 2]) and np.isfinite(np.delete(g.ravel(), 2)).all()
        assert np.isnan(module.gelu_backward(x, np.ones_like(x), approximate)[0, 2])
    p, m, v = np.ones(4, dtype), np.zeros(4, dtype), np.zeros(4, dtype)
    module.adam_step(p, np.array([np.nan, 1, 1, 1], dtype), m, v, 1e-3, 0.9, 0.999, 1e-8, 0.0, False, 1)
    assert np.isnan(p[0]) and np.isfinite(p[1:]).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("x_shape,mask_shape", [
    ((2, 3, 5, 7), (5, 7)),            # a causal mask broadcast over batch and heads
    ((2, 3, 5, 7), (2, 1, 1, 7)),      # a key padding mask
    ((2, 3, 5, 7), (2, 3, 5, 7)),      # one of its own per element
    ((2, 3, 5, 7), (5, 1)),            # broadcast along the last dim
    ((4, 1), (4, 1)), ((7,), ()),      # size-1 last dim, a 0-d mask
    ((12, 4, 64, 64), (12, 1, 64, 64)),   # large enough for threads
])
def test_masked_fill_kernel_matches_numpy(dtype, x_shape, mask_shape):
    rng = np.random.default_rng(len(x_shape) + len(mask_shape))
    x = rng.standard_normal(x_shape).astype(dtype)
    mask = rng.random(mask_shape) < 0.5
    for value in (-np.inf, 0, 2.5):
        got = engine_room.masked_fill(x, mask, value)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, reference.masked_fill(x, mask, value))
    if mask.ndim == 4:                                 # a transposed (non-contiguous) input and mask
        x_t, mask_t = x.swapaxes(1, 2), mask.swapaxes(1, 2)
        np.testing.assert_array_equal(engine_room.masked_fill(x_t, mask_t, -np.inf), reference.masked_fill(x_t, mask_t, -np.inf))


def test_masked_fill_kernel_keeps_nan_and_empty_inputs():
    x = np.array([[np.nan, 1.0, np.inf], [2.0, np.nan, -1.0]], np.float32)
    mask = np.array([True, False, False])
    np.testing.assert_array_equal(engine_room.masked_fill(x, mask, 0.0), [[0.0, 1.0, np.inf], [0.0, np.nan, -1.0]])
    empty = np.zeros((0, 3), np.float32)
    assert engine_room.masked_fill(empty, mask, 0.0).shape == (0, 3)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0, 3), (1,), (7, 33), (300, 257)])   # the last: parallel
def test_relu_kernels_match_numpy(dtype, shape):
    rng = np.random.default_rng(shape[-1])
    x = rng.standard_normal(shape).astype(dtype)
    g = rng.standard_normal(shape).astype(dtype)
    for x_in, g_in in ((x, g), (x.T, g.T)):                          # contiguous, then transposed views
        out = engine_room.relu(x_in)
        np.testing.assert_array_equal(out, reference.relu(x_in))
        assert out.dtype == dtype and out.shape == x_in.shape
        np.testing.assert_array_equal(engine_room.relu_backward(out, g_in), reference.relu_backward(out, g_in))


def test_relu_of_infinities_and_nan():
    """relu(-inf) is 0 (a * (a > 0) gave NaN there), relu(NaN) is NaN, and no gradient
    passes where the output is 0 or NaN."""
    x = np.array([-np.inf, -1.0, 0.0, 2.0, np.inf, np.nan], np.float32)
    for module in (engine_room, reference):
        out = module.relu(x)
        np.testing.assert_array_equal(out, [0.0, 0.0, 0.0, 2.0, np.inf, np.nan])
        np.testing.assert_array_equal(module.relu_backward(out, np.ones_like(x)), [0, 0, 0, 1, 1, 0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("accumulate", [False, True])
def test_generated_micro_kernel_overwrites_or_adds_to_its_tile(accumulate, dtype):
    """tile = a_panel^T @ b_panel, or tile += with accumulate (the fused attention's
    products add into the gradients they sum); the compiled kernel (LLVM IR emitted by
    micro_kernel.py) gives the very bits of its Python source compiled by Numba (both fuse
    each multiply-add: the 'contract' flag), with a strided a_panel, and with k = 0 (a zero
    tile, or the tile unchanged)."""
    from autograd.engine_room import gemm, micro_kernel
    rng = np.random.default_rng(0)
    a_panel = rng.standard_normal((7, 5)).astype(dtype)[::2, 1:3]       # (4, 2), both strides odd
    b_panel, tile = rng.standard_normal((4, 3)).astype(dtype), rng.standard_normal((2, 3)).astype(dtype)
    kernel = gemm.compile_micro_kernel(2, 3, dtype, accumulate=accumulate)
    python = micro_kernel._python_micro_kernel(2, 3, dtype, accumulate)
    run = numba.njit(lambda a, b, k, c: kernel(a, b, k, c))
    if not numba.config.DISABLE_JIT:
        python = numba.njit(fastmath={"contract"}, error_model="numpy")(python)
    for k in (4, 0):
        compiled, expected = tile.copy(), tile.copy()
        run(a_panel, b_panel, k, compiled)
        python(a_panel, b_panel, k, expected)
        np.testing.assert_array_equal(compiled, expected)
        product = a_panel[:k].T.astype(np.float64) @ b_panel[:k]
        np.testing.assert_allclose(compiled, product + (tile if accumulate else 0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES)
def test_product_writes_into_an_out_array_of_any_layout(dtype):
    """products.product(a, b, out=...): the product's very bits, written where out's strides
    say (rows contiguous: by the kernels themselves; columns contiguous: through a copy);
    an out of the wrong shape is an error, raised before anything is written."""
    from autograd.engine_room import products
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4, 7, 5)).astype(dtype)
    b = rng.standard_normal((3, 4, 5, 70)).astype(dtype)
    direct = products.product(a, b)
    heads = np.empty((3, 7, 4, 70), dtype).transpose(0, 2, 1, 3)       # (B, T, H, d) seen as (B, H, T, d)
    columns = np.empty((3, 4, 70, 7), dtype).swapaxes(-1, -2)         # columns contiguous
    flat = np.empty((7, 70), dtype)[::-1]                               # rows in reverse, 2-D
    for out in (heads, columns):
        assert products.product(a, b, out=out) is out
        np.testing.assert_array_equal(out, direct)
    assert products.product(a[0, 0], b[0, 0], out=flat) is flat
    np.testing.assert_array_equal(flat, direct[0, 0])
    untouched = np.zeros((3, 4, 7, 69), dtype)
    with pytest.raises(ValueError):
        products.product(a, b, out=untouched)
    assert not untouched.any()


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_like_lays_the_product_out_as_the_operand_with_the_same_bits(dtype):
    """engine_room.matmul(a, b, like=operand): a head of (B, T, H, d) seen as (B, H, T, d)
    gets its product in that order of dims, a transposed view gets a transposed product;
    the numbers are those of the plain product, bit for bit."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4, 7, 5)).astype(dtype)
    b = rng.standard_normal((3, 4, 5, 6)).astype(dtype)
    direct = engine_room.matmul(a, b)
    heads = np.empty((3, 7, 4, 6), dtype).transpose(0, 2, 1, 3)
    laid = engine_room.matmul(a, b, like=heads)
    assert laid.strides == heads.strides
    np.testing.assert_array_equal(laid, direct)
    transposed = np.empty((3, 4, 6, 7), dtype).swapaxes(-1, -2)
    laid = engine_room.matmul(a, b, like=transposed)
    assert laid.strides[-2] == laid.itemsize and not laid.flags.c_contiguous
    np.testing.assert_allclose(laid, direct, **tol(dtype))


def test_the_compile_line_says_why_and_how_long(tmp_path, monkeypatch):
    """A first run says so; after an earlier build's compile (another digest's marker), the
    line says what changed and how long that compile took (the marker records it)."""
    from autograd.engine_room import compile_once
    monkeypatch.setattr(compile_once, "marker", lambda kind: str(tmp_path / f"autograd-{kind}-kernels-0123abcd.done"))
    assert "first run" in compile_once.why_and_how_long(["float64"])
    (tmp_path / "autograd-float32-attention-kernels-99.done").write_text("float32-attention: compiled in 2 child processes in 7.4 s; see")
    assert "first run" in compile_once.why_and_how_long(["float64"])        # another kind's compile says nothing of this one
    (tmp_path / "autograd-float64-kernels-42.done").write_text("float64: compiled in 2 child processes in 12.6 s; see")
    said = compile_once.why_and_how_long(["float64"])
    assert "changed since their last compile here, which took 13 s" in said
    assert "which took 7 s" in compile_once.why_and_how_long(["float32-attention"])
