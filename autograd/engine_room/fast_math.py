"""What the Numba kernels share: compile options, builds under distinct names, and three
pieces of arithmetic LLVM can vectorize where the obvious code does not.

- `bits_to_float` reinterprets an integer's bits as a float (one LLVM bitcast);
- `make_row_max` finds a row's maximum through its integer bits, which vectorizes;
- `make_exp_nonpositive` builds exp(d) for d <= 0 as a polynomial and a power of two, so a
  loop of exps vectorizes (libm's exp is a scalar call, one number at a time).

Fast-math: the flags allow reassociation (vectorized sums) and fused multiply-add, but
NOT 'nnan'/'ninf': masked attention scores are -inf and must stay -inf.
"""

import math
import sys

import numba
import numpy as np
from numba import types
from numba.extending import intrinsic, register_jitable

FASTMATH = {"nsz", "reassoc", "contract", "arcp", "afn"}
JIT = dict(fastmath=FASTMATH, cache=True, boundscheck=False, error_model="numpy")   # numpy: x / 0 is inf, no check


def _bits_to_float_python(bits):
    """Plain-Python twin of bits_to_float, for NUMBA_DISABLE_JIT=1."""
    bits = np.asarray(bits)
    return bits.view(np.float32 if bits.dtype == np.int32 else np.float64)[()]


@intrinsic
def _bits_to_float_intrinsic(typingctx, bits):
    """Reinterpret an int32 (int64) as the float32 (float64) with the same bits: one LLVM
    `bitcast`, which vectorizes (numpy's `.view` does this for whole arrays)."""
    from llvmlite import ir
    if bits == numba.int32:
        result, llvm_type = numba.float32, ir.FloatType()
    elif bits == numba.int64:
        result, llvm_type = numba.float64, ir.DoubleType()
    else:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], llvm_type)
    return result(bits), codegen


bits_to_float = _bits_to_float_python if numba.config.DISABLE_JIT else _bits_to_float_intrinsic

# The kernels below call `fast_math.bits_to_float`, through this module, not the intrinsic
# itself: Numba's cache key pickles the functions a kernel closes over together with the
# globals they use, and an intrinsic pickles differently in every process (a fresh id), so
# each process missed the cache and compiled again; a module pickles as its name.
fast_math = sys.modules[__name__]


@intrinsic
def _ln2_remainder_jit(typingctx, t, k, high, low):
    """(t - k high) - k low, computed in that order whatever fast-math flags the kernel
    around it has: with 'reassoc' LLVM may fold it into t - k (high + low), whose rounded
    constant leaves an error of k ulps of ln 2 in the remainder, and exp near its lowest
    argument loses most of float32's digits on a CPU without fused multiply-add.  Flagged
    'contract' only, so that a CPU with FMA still fuses each product into its difference."""
    if not all(isinstance(x, types.Float) and x == t for x in (t, k, high, low)):
        return None

    def codegen(context, builder, signature, args):
        t_value, k_value, high_value, low_value = args
        flags = ("contract",)
        rest = builder.fsub(t_value, builder.fmul(k_value, high_value, flags=flags), flags=flags)
        return builder.fsub(rest, builder.fmul(k_value, low_value, flags=flags), flags=flags)
    return t(t, k, high, low), codegen


def _ln2_remainder_python(t, k, high, low):
    return (t - k * high) - k * low


ln2_remainder = _ln2_remainder_python if numba.config.DISABLE_JIT else _ln2_remainder_jit


def make_exp_nonpositive(dtype, keep_nan=True):
    """exp(d) for d <= 0 in `dtype`, as straight arithmetic that LLVM vectorizes (libm's
    exp is a scalar call).  exp(d) = 2^k * e^r with k = round(d / ln 2) and
    r = d - k ln 2, |r| <= ln2/2: e^r is a Taylor polynomial (Horner's rule) and 2^k is
    built from its bits, (k + bias) << mantissa bits.  Every constant is of that dtype.

    keep_nan: exp(NaN) is NaN, so that a NaN in a row reaches the row's sum (softmax needs
    this); without it exp(NaN) is 0, one select fewer, which keeps GELU's loop vectorized
    (GELU's NaN propagates through its other factors anyway)."""
    f = np.dtype(dtype).type
    it = np.int32 if dtype == np.float32 else np.int64
    MANTISSA = it(23 if dtype == np.float32 else 52)
    BIAS = it(127 if dtype == np.float32 else 1023)
    # e^r = sum_k r^k / k! on |r| <= ln2/2: degree 7 is below float32 rounding, 12 below float64's
    DEGREE = 7 if dtype == np.float32 else 12
    TAYLOR = tuple(f(1.0 / math.factorial(k)) for k in range(DEGREE, -1, -1))   # highest power first
    LOG2E = f(1.4426950408889634)
    LN2_HI = f(0.693145751953125)                    # ln 2 split in two so k * LN2_HI is exact
    LN2_LO = f(1.4286068203094173e-06)
    LOWEST = f(-87.0 if dtype == np.float32 else -708.0)   # exp below this is 0 (or denormal)
    ZERO, HALF = f(0.0), f(0.5)

    @register_jitable(**JIT)
    def exp_nonpositive(d):
        t = d if d > LOWEST else LOWEST
        k_int = it(t * LOG2E - HALF)               # round to nearest (t <= 0): truncate t/ln2 - 1/2
        two_to_k = fast_math.bits_to_float(it((k_int + BIAS) << MANTISSA))
        k = f(k_int)
        r = fast_math.ln2_remainder(t, k, LN2_HI, LN2_LO)
        p = TAYLOR[0]
        for c in TAYLOR[1:]:
            p = p * r + c
        if keep_nan:
            return p * two_to_k if d >= LOWEST else (ZERO if d < LOWEST else d)
        return p * two_to_k if d >= LOWEST else ZERO
    return exp_nonpositive


def make_row_max(dtype):
    """row_max(bits): the max of a row of `dtype` numbers given as their integer bits
    (row.view(int32 or int64)); -inf for an all -inf row.  Flipping the non-sign bits of
    negative floats makes integer order equal float order, and LLVM vectorizes an integer
    max reduction (it does not vectorize the float one).  The mapping is its own inverse."""
    bits = 32 if dtype == np.float32 else 64
    it = np.int32 if dtype == np.float32 else np.int64
    SIGN_SHIFT = it(bits - 1)
    SIGN_OFF = it(2 ** (bits - 1) - 1)               # all bits but the sign bit
    MIN_KEY = it(-2 ** (bits - 1))

    @register_jitable(**JIT)
    def row_max(row_bits):
        best = MIN_KEY
        for j in range(row_bits.shape[0]):
            key = row_bits[j] ^ ((row_bits[j] >> SIGN_SHIFT) & SIGN_OFF)
            best = key if key > best else best
        return fast_math.bits_to_float(it(best ^ ((best >> SIGN_SHIFT) & SIGN_OFF)))   # Numba computes ints in int64
    return row_max
