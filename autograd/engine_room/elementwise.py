"""GELU, ReLU and masked fill for the fast tier: one pass over the elements each, threads
sharing runs of elements."""

import math

import numba
import numpy as np
from numba.extending import register_jitable

from autograd.engine_room import gemm
from autograd.engine_room.chunks import chunked, share_of
from autograd.engine_room.dispatch import PARALLEL_MIN_ELEMENTS, array_types, chunks_for, float_dtype
from autograd.engine_room.fast_math import JIT, make_exp_nonpositive
from autograd.kernels import reference


def _make_gelu(dtype):
    """GELU forward and backward, elementwise, for one dtype (see reference.gelu).

    float64 calls libm's erf, exp and tanh (exact, scalar).  float32 is written so that
    LLVM vectorizes it: Phi(x) = 1 - erfc(x / sqrt 2) / 2 with erfc from the Chebyshev
    fit of Numerical Recipes (section 6.2, fractional error < 1.2e-7 everywhere, below
    float32 rounding), and tanh u = sign(u) (1 - e) / (1 + e) with e = exp(-2|u|), each exp
    by `make_exp_nonpositive`.  The loops are compiled for 512-bit vectors (see gemm.py's
    docstring): elementwise, so the results' bits are the same either way, and on a CPU with
    AVX-512 the wider vectors take fewer instructions."""
    f = np.dtype(dtype).type
    exact = dtype == np.float64
    exp_nonpositive = make_exp_nonpositive(dtype, keep_nan=False)
    ZERO, HALF, ONE, TWO, THREE = f(0), f(0.5), f(1), f(2), f(3)
    SQRT_HALF, INV_SQRT_2PI = f(math.sqrt(0.5)), f(1 / math.sqrt(2 * math.pi))
    SQRT_2_OVER_PI, CUBIC = f(math.sqrt(2 / math.pi)), f(0.044715)
    ERFC = tuple(f(c) for c in (0.17087277, -0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806,
                                0.09678418, 0.37409196, 1.00002368, -1.26551223))   # highest power first

    @register_jitable(**JIT)
    def cdf(v):
        """Phi(v) = (1 + erf(v / sqrt 2)) / 2."""
        if exact:
            return HALF * (ONE + math.erf(v * SQRT_HALF))
        z = abs(v) * SQRT_HALF
        t = ONE / (ONE + HALF * z)
        p = ERFC[0]
        for c in ERFC[1:]:
            p = p * t + c
        tail = HALF * t * exp_nonpositive(p - z * z)              # erfc(z) / 2
        return ONE - tail if v >= ZERO else tail

    @register_jitable(**JIT)
    def tanh(u):
        if exact:
            return math.tanh(u)
        e = exp_nonpositive(-TWO * abs(u))
        t = (ONE - e) / (ONE + e)
        return t if u >= ZERO else -t

    @register_jitable(**JIT)
    def pdf(v):
        """Phi'(v) = exp(-v^2 / 2) / sqrt(2 pi)."""
        return INV_SQRT_2PI * (math.exp(-HALF * v * v) if exact else exp_nonpositive(-HALF * v * v))

    def gelu_forward(x, out, tanh_form, chunk, chunks):
        """out = x Phi(x)."""
        gemm.prefer_wide_vectors()
        x, out = share_of(x, chunk, chunks), share_of(out, chunk, chunks)
        for i in range(x.shape[0]):
            v = x[i]
            if tanh_form:
                out[i] = HALF * v * (ONE + tanh(SQRT_2_OVER_PI * (v + CUBIC * v * v * v)))
            else:
                out[i] = v * cdf(v)

    def gelu_backward(x, grad, dx, tanh_form, chunk, chunks):
        """dx = grad (Phi(x) + x Phi'(x))."""
        gemm.prefer_wide_vectors()
        x, grad, dx = share_of(x, chunk, chunks), share_of(grad, chunk, chunks), share_of(dx, chunk, chunks)
        for i in range(x.shape[0]):
            v = x[i]
            if tanh_form:
                t = tanh(SQRT_2_OVER_PI * (v + CUBIC * v * v * v))
                slope = HALF * (ONE + t) + HALF * v * (ONE - t * t) * SQRT_2_OVER_PI * (ONE + THREE * CUBIC * v * v)
            else:
                slope = cdf(v) + v * pdf(v)
            dx[i] = grad[i] * slope

    name, flag = np.dtype(dtype).name, numba.boolean
    return (chunked(gelu_forward, name, array_types(dtype, "1r", "1w") + (flag,)),
            chunked(gelu_backward, name, array_types(dtype, "1r", "1r", "1w") + (flag,)))


_gelu_kernels = {}


def _gelu_kernel(dtype, backward):
    dtype = np.dtype(dtype)
    if dtype not in _gelu_kernels:
        _gelu_kernels[dtype] = _make_gelu(dtype.type)
    return _gelu_kernels[dtype][int(backward)]


def _gelu_form(approximate):
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return approximate == "tanh"


def gelu(x, approximate):
    """Same signature and results as reference.gelu."""
    tanh_form = _gelu_form(approximate)
    if float_dtype(x) is None:
        return reference.gelu(x, approximate)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    _gelu_kernel(flat.dtype, False)(flat, out, tanh_form, chunks_for(flat.size, PARALLEL_MIN_ELEMENTS))
    return out.reshape(x.shape)


def gelu_backward(x, grad, approximate):
    """Same signature and results as reference.gelu_backward."""
    tanh_form = _gelu_form(approximate)
    if float_dtype(x) is None:
        return reference.gelu_backward(x, grad, approximate)
    flat = np.ascontiguousarray(x).reshape(-1)
    dx = np.empty_like(flat)
    _gelu_kernel(flat.dtype, True)(flat, np.ascontiguousarray(grad, x.dtype).reshape(-1), dx, tanh_form,
                                   chunks_for(flat.size, PARALLEL_MIN_ELEMENTS))
    return dx.reshape(x.shape)


# ============================================================================ ReLU

def _make_relu(dtype):
    def relu_forward(x, out, chunk, chunks):
        """out = x where x > 0, else 0 (NaN stays NaN)."""
        x, out = share_of(x, chunk, chunks), share_of(out, chunk, chunks)
        for i in range(x.shape[0]):
            out[i] = 0 if x[i] <= 0 else x[i]

    def relu_backward(out, grad, dx, chunk, chunks):
        """dx = grad where the output is > 0, else 0."""
        out, grad, dx = share_of(out, chunk, chunks), share_of(grad, chunk, chunks), share_of(dx, chunk, chunks)
        for i in range(out.shape[0]):
            dx[i] = grad[i] if out[i] > 0 else 0

    name = np.dtype(dtype).name
    return (chunked(relu_forward, name, array_types(dtype, "1r", "1w")),
            chunked(relu_backward, name, array_types(dtype, "1r", "1r", "1w")))


_relu_kernels = {}


def _relu_kernel(dtype, backward):
    dtype = np.dtype(dtype)
    if dtype not in _relu_kernels:
        _relu_kernels[dtype] = _make_relu(dtype.type)
    return _relu_kernels[dtype][int(backward)]


def relu(x):
    """Same signature and results as reference.relu."""
    if float_dtype(x) is None:
        return reference.relu(x)
    flat = np.ascontiguousarray(x).reshape(-1)
    out = np.empty_like(flat)
    _relu_kernel(flat.dtype, False)(flat, out, chunks_for(flat.size, PARALLEL_MIN_ELEMENTS))
    return out.reshape(x.shape)


def relu_backward(out, grad):
    """Same signature and results as reference.relu_backward."""
    if float_dtype(out) is None:
        return reference.relu_backward(out, grad)
    flat = np.ascontiguousarray(out).reshape(-1)
    dx = np.empty_like(flat)
    _relu_kernel(flat.dtype, True)(flat, np.ascontiguousarray(grad, out.dtype).reshape(-1), dx,
                                   chunks_for(flat.size, PARALLEL_MIN_ELEMENTS))
    return dx.reshape(out.shape)


# ============================================================================ masked fill

def _make_masked_fill(dtype):
    def masked_fill_rows(rows, mask_rows, row_of, value, out, chunk, chunks):
        """out[i, j] = value where mask_rows[row_of[i], j], else rows[i, j]."""
        rows, row_of, out = share_of(rows, chunk, chunks), share_of(row_of, chunk, chunks), share_of(out, chunk, chunks)
        width = rows.shape[1]
        for i in range(rows.shape[0]):
            mask, source, target = gemm.row_run(mask_rows, row_of[i], 0, width), gemm.row_run(rows, i, 0, width), \
                gemm.row_run(out, i, 0, width)
            for j in range(width):
                target[j] = value if mask[j] else source[j]

    rows, out, value = array_types(dtype, "2r", "2w", "s")
    mask_rows = numba.types.Array(numba.boolean, 2, "C", readonly=True)
    row_of = numba.types.Array(numba.intp, 1, "A", readonly=True)           # may be a broadcast (stride 0)
    return chunked(masked_fill_rows, np.dtype(dtype).name, (rows, mask_rows, row_of, value, out))


_masked_fill_kernels = {}


def _masked_fill_kernel(dtype):
    dtype = np.dtype(dtype)
    if dtype not in _masked_fill_kernels:
        _masked_fill_kernels[dtype] = _make_masked_fill(dtype.type)
    return _masked_fill_kernels[dtype]


def masked_fill(x, mask, value):
    """Same signature and results as reference.masked_fill, in one pass (numpy's where with
    a mask broadcast over the batch and heads takes 3 ns an element).  x is seen as rows of
    its last dim; row i of x reads row row_of[i] of the mask (the broadcast, as indices)."""
    mask = np.asarray(mask)
    if float_dtype(x) is None or x.ndim == 0 or x.size == 0 or mask.dtype != np.bool_:
        return reference.masked_fill(x, mask, value)
    width = x.shape[-1]
    if mask.ndim == 0 or mask.shape[-1] != width:                    # broadcast along the last dim
        mask = np.broadcast_to(mask, mask.shape[:-1] + (width,))
    mask_rows = np.ascontiguousarray(mask).reshape(-1, width)           # (M, L)
    row_of = np.broadcast_to(np.arange(len(mask_rows)).reshape(mask.shape[:-1]), x.shape[:-1]).reshape(-1)   # (N,)
    rows = np.ascontiguousarray(x).reshape(-1, width)                   # (N, L)
    out = np.empty_like(rows)
    _masked_fill_kernel(x.dtype)(rows, mask_rows, row_of, x.dtype.type(value), out,
                                 chunks_for(x.size, PARALLEL_MIN_ELEMENTS))
    return out.reshape(x.shape)
