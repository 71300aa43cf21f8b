"""Elementwise ops.  Binary ops broadcast like numpy; their backward returns gradients in
the broadcast output shape and the engine sums them back to each input's shape."""

import numpy as np

from autograd import kernels
from autograd.function import Function


class Add(Function):
    """out = a + b;  dout/da = 1,  dout/db = 1."""

    def forward(ctx, a, b):
        return a + b

    def backward(ctx, grad):
        return grad, grad


class Sub(Function):
    """out = a - b;  dout/da = 1,  dout/db = -1."""

    def forward(ctx, a, b):
        return a - b

    def backward(ctx, grad):
        return grad, (-grad if ctx.needs_input_grad[1] else None)


class Mul(Function):
    """out = a * b;  dout/da = b,  dout/db = a."""

    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a * b

    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad * b if ctx.needs_input_grad[0] else None, grad * a if ctx.needs_input_grad[1] else None


class Div(Function):
    """out = a / b;  dout/da = 1/b,  dout/db = -a/b^2."""

    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a / b

    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        return grad / b if ctx.needs_input_grad[0] else None, -grad * a / (b * b) if ctx.needs_input_grad[1] else None


class Pow(Function):
    """out = a ** b;  dout/da = b a^(b-1),  dout/db = a^b log(a) (needs a > 0)."""

    def forward(ctx, a, b):
        out = a ** b
        ctx.save_for_backward(a, b, out)
        return out

    def backward(ctx, grad):
        a, b, out = ctx.saved_tensors
        grad_a = grad * b * a ** (b - 1) if ctx.needs_input_grad[0] else None
        grad_b = grad * out * np.log(a) if ctx.needs_input_grad[1] else None
        return grad_a, grad_b


class Neg(Function):
    """out = -a;  dout/da = -1."""

    def forward(ctx, a):
        return -a

    def backward(ctx, grad):
        return -grad


class Exp(Function):
    """out = e^a;  dout/da = e^a = out."""

    def forward(ctx, a):
        out = np.exp(a)
        ctx.save_for_backward(out)
        return out

    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out


class Log(Function):
    """out = ln a;  dout/da = 1/a."""

    def forward(ctx, a):
        ctx.save_for_backward(a)
        return np.log(a)

    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return grad / a


class Sqrt(Function):
    """out = sqrt(a);  dout/da = 1 / (2 sqrt(a))."""

    def forward(ctx, a):
        out = np.sqrt(a)
        ctx.save_for_backward(out)
        return out

    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad / (2 * out)


class Tanh(Function):
    """out = tanh(a);  dout/da = 1 - out^2."""

    def forward(ctx, a):
        out = np.tanh(a)
        ctx.save_for_backward(out)
        return out

    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * (1 - out * out)


class Sigmoid(Function):
    """out = 1 / (1 + e^-a), computed as (1 + tanh(a/2)) / 2 so no exp overflows;
    dout/da = out (1 - out)."""

    def forward(ctx, a):
        out = 0.5 * (1 + np.tanh(0.5 * a))
        ctx.save_for_backward(out)
        return out

    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return grad * out * (1 - out)


class ReLUFn(Function):
    """out = max(a, 0);  dout/da = 1 where a > 0, else 0.  (kernels.relu: one pass; the
    output says where a > 0, so it is all backward keeps.)"""

    def forward(ctx, a):
        out = kernels.relu(a)
        ctx.save_for_backward(out)
        return out

    def backward(ctx, grad):
        (out,) = ctx.saved_tensors
        return kernels.relu_backward(out, grad)


class GELUFn(Function):
    """GELU(a) = a Phi(a), with Phi the standard normal CDF (PyTorch's GELU):
        exact (approximate="none"):  Phi(a) = (1 + erf(a / sqrt 2)) / 2
        approximate="tanh":          Phi(a) ~ (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) / 2
    dout/da = Phi(a) + a Phi'(a).  Both forms run as kernels (autograd.kernels.gelu and
    gelu_backward, Numba with numpy twins), since numpy has no erf."""

    def forward(ctx, a, approximate="none"):
        ctx.approximate = approximate
        ctx.save_for_backward(a)
        return kernels.gelu(a, approximate)

    def backward(ctx, grad):
        (a,) = ctx.saved_tensors
        return kernels.gelu_backward(a, grad, ctx.approximate)


class SiLU(Function):
    """SiLU(a) = a sigmoid(a) = a / (1 + e^-a) (the "swish" of Llama's SwiGLU feed-forward),
    written as PyTorch computes it: precise in both tails (e^-a overflowing to inf for very
    negative a gives -0, not NaN);  dout/da = s + a s (1 - s) = s (1 + a (1 - s)), s = sigmoid(a)."""

    def forward(ctx, a):
        with np.errstate(over="ignore"):
            denominator = 1 + np.exp(-a)                   # 1 + e^-a: inf where e^-a overflows
        ctx.save_for_backward(a, 1 / denominator)          # s = sigmoid(a)
        return a / denominator

    def backward(ctx, grad):
        a, s = ctx.saved_tensors
        return s * (1 + a * (1 - s)) * grad
