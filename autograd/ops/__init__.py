"""Every differentiable op of the tensor engine: one `Function` subclass each."""

from autograd.function import Function, normalize_dim, normalize_dims  # noqa: F401
from autograd.ops.elementwise import Add, Sub, Mul, Div, Pow, Neg, Exp, Log, Sqrt, Tanh, Sigmoid, ReLUFn, GELUFn, SiLU  # noqa: F401
from autograd.ops.reduce import Sum, Mean, Max  # noqa: F401
from autograd.ops.shape import Reshape, Transpose, Permute, Expand, Index, Cat, Stack, Split, Unbind  # noqa: F401
from autograd.ops.masking import MaskedFill, Where  # noqa: F401
from autograd.ops.matmul import MatMul  # noqa: F401
from autograd.ops.softmax import Softmax, LogSoftmax, LogSumExp  # noqa: F401
from autograd.ops.norm import LayerNormFn, RMSNormFn  # noqa: F401
from autograd.ops.linear import LinearFn  # noqa: F401
from autograd.ops.rotary import RotaryEmbeddingFn  # noqa: F401
from autograd.ops.attention import ScaledDotProductAttention  # noqa: F401
