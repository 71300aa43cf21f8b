"""Functions that build tensors from several tensors: cat, stack, where."""

from autograd import ops
from autograd.tensor import Tensor


def _as_tensor(x, like=None):
    if isinstance(x, Tensor):
        return x
    return like._lift(x) if like is not None else Tensor(x)


def cat(tensors, dim=0):
    """Concatenate tensors along an existing dim."""
    return ops.Cat.apply(*[_as_tensor(t) for t in tensors], dim=dim)


def stack(tensors, dim=0):
    """Stack equal-shaped tensors along a new dim."""
    return ops.Stack.apply(*[_as_tensor(t) for t in tensors], dim=dim)


def where(condition, a, b):
    """a where condition is True, b elsewhere (condition: boolean Tensor or array)."""
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    a, b = _as_tensor(a, like), _as_tensor(b, like)
    condition = condition.data if isinstance(condition, Tensor) else condition
    return ops.Where.apply(a, b, condition=condition)
