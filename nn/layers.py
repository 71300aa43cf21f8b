"""The basic layers, each one Module."""

import numpy as np

from nn import functional as F
from nn import init
from nn.module import Module, Parameter


class Linear(Module):
    """y = x W^T + b with W of shape (out_features, in_features).
    Init as PyTorch: W and b ~ U(-1/sqrt(in), 1/sqrt(in)).  A float input must have the
    weights' dtype (PyTorch refuses the mix too): every model's float input meets a Linear
    first, so a float64 input into a float32 model is an error, not a silent float64 run."""

    def __init__(self, in_features, out_features, bias=True, generator=None, dtype=np.float32):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / np.sqrt(in_features) if in_features else 0.0
        self.weight = Parameter(init.uniform((out_features, in_features), bound, generator, dtype))
        self.bias = Parameter(init.uniform((out_features,), bound, generator, dtype)) if bias else None

    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise ValueError(f"Linear({self.in_features}, {self.out_features}): input's last dim is "
                             f"{x.shape[-1]} (input shape {x.shape}), expected {self.in_features}")
        if x.dtype != self.weight.dtype and np.issubdtype(x.dtype, np.floating):
            raise TypeError(f"Linear({self.in_features}, {self.out_features}): the input is {x.dtype} and the "
                            f"weights {self.weight.dtype}; numpy would quietly compute everything after in the "
                            f"wider one. Cast the input (x.astype(np.{self.weight.dtype})) or the model "
                            f"(model.to(\"{x.dtype}\"))")
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Embedding(Module):
    """A table of `num_embeddings` vectors of size `embedding_dim`, looked up by id.
    Init N(0, 1) as PyTorch.  Ids outside 0..num_embeddings-1 are an error."""

    def __init__(self, num_embeddings, embedding_dim, generator=None, dtype=np.float32):
        super().__init__()
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.weight = Parameter(init.normal((num_embeddings, embedding_dim), 1.0, generator, dtype))

    def forward(self, ids):
        return F.embedding(ids, self.weight)   # (...,) -> (..., embedding_dim)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """Normalize each vector over its last dims, then scale (weight=1) and shift (bias=0;
    bias=False leaves the shift out, as in PyTorch and GPT models without biases)."""

    def __init__(self, normalized_shape, eps=1e-5, bias=True, dtype=np.float32):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = Parameter(np.ones(self.normalized_shape, dtype))
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, bias={self.bias is not None}"


class RMSNorm(Module):
    """Scale each vector by the inverse of its root mean square over the last dims, then by
    a trained gain (weight=1; elementwise_affine=False: none): LayerNorm without centring
    and without a shift, the norm of Llama-style models (PyTorch's nn.RMSNorm; eps=None is
    the machine epsilon of the input's dtype, as there)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, dtype=np.float32):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.eps = eps
        self.weight = Parameter(np.ones(self.normalized_shape, dtype)) if elementwise_affine else None

    def forward(self, x):
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"


class Dropout(Module):
    """Zero elements with probability p while training (scaling the rest by 1/(1-p));
    the identity in eval mode."""

    def __init__(self, p=0.5, generator=None):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: p must be in [0, 1], got {p}")
        self.p = p
        self.generator = generator

    def forward(self, x):
        return F.dropout(x, self.p, self.training, self.generator)

    def extra_repr(self):
        return f"p={self.p}"


class ReLU(Module):
    def forward(self, x):
        return x.relu()


class SiLU(Module):
    """x sigmoid(x) (see autograd.ops.SiLU)."""

    def forward(self, x):
        return x.silu()


class GELU(Module):
    """GELU, x Phi(x): the exact erf form by default, or approximate="tanh" (see autograd.ops.GELUFn)."""

    def __init__(self, approximate="none"):
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return x.gelu(self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"
