"""Ops that move elements around without changing them: reshape, transpose, permute,
expand, indexing, concatenation and stacking, and their inverses splitting and unbinding
(ops with several outputs).  Their backward moves the gradient back."""

import math

import numpy as np

from autograd import kernels
from autograd.function import Function, normalize_dim


class Reshape(Function):
    """Same elements, new shape (one dim may be -1);  the gradient is reshaped back.
    `unsqueeze` and `squeeze` are reshapes too."""

    def forward(ctx, a, shape):
        ctx.in_shape = a.shape
        known = math.prod(n for n in shape if n != -1)
        if list(shape).count(-1) > 1 or (-1 not in shape and known != a.size) or (
                -1 in shape and (known == 0 or a.size % known)):
            raise ValueError(f"cannot reshape a tensor of shape {a.shape} ({a.size} elements) to {shape}")
        return a.reshape(shape)

    def backward(ctx, grad):
        return grad.reshape(ctx.in_shape)


class Transpose(Function):
    """Swap two dims;  the gradient is swapped back."""

    def forward(ctx, a, dim0, dim1):
        ctx.dim0, ctx.dim1 = normalize_dim(dim0, a.ndim, "transpose"), normalize_dim(dim1, a.ndim, "transpose")
        return np.swapaxes(a, ctx.dim0, ctx.dim1)

    def backward(ctx, grad):
        return np.swapaxes(grad, ctx.dim0, ctx.dim1)


class Permute(Function):
    """Reorder all dims;  the gradient goes through the inverse permutation."""

    def forward(ctx, a, dims):
        dims = tuple(normalize_dim(d, a.ndim, "permute") for d in dims)
        if sorted(dims) != list(range(a.ndim)):
            raise ValueError(f"dims {dims} are not a permutation of the {a.ndim} dims of shape {a.shape}")
        ctx.dims = dims
        return np.transpose(a, dims)

    def backward(ctx, grad):
        return np.transpose(grad, np.argsort(ctx.dims))


class Expand(Function):
    """Broadcast to a larger shape without copying (-1 keeps a dim);  the engine sums the
    gradient back over the expanded dims."""

    def forward(ctx, a, shape):
        lead = len(shape) - a.ndim
        if lead < 0:
            raise ValueError(f"cannot expand shape {a.shape} to fewer dims {shape}")
        shape = tuple(a.shape[i - lead] if n == -1 else n for i, n in enumerate(shape))
        return np.broadcast_to(a, shape)

    def backward(ctx, grad):
        return grad


class Index(Function):
    """out = a[key] (slices, ints, integer or boolean arrays);  the gradient is scattered
    back with accumulation: an element picked k times receives k gradients."""

    def forward(ctx, a, key):
        ctx.key, ctx.in_shape, ctx.advanced = key, a.shape, _is_advanced(key)
        return a[key]

    def backward(ctx, grad):
        out = np.zeros(ctx.in_shape, dtype=grad.dtype)
        if _is_row_lookup(ctx.key) and out.size:           # rows picked by ids: an embedding's lookup
            kernels.index_add_rows(out.reshape(ctx.in_shape[0], -1), ctx.key, grad)
        elif ctx.advanced:
            np.add.at(out, ctx.key, grad)   # repeated indices add up
        else:
            out[ctx.key] = grad             # basic slicing picks each element at most once
        return out


def _is_row_lookup(key):
    """Whether key picks whole rows by an integer array (the case kernels.index_add_rows
    scatters back)."""
    return isinstance(key, np.ndarray) and np.issubdtype(key.dtype, np.integer)


def _is_advanced(key):
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (np.ndarray, list)) for k in keys)


class Cat(Function):
    """Concatenate along `dim`;  each input gets its slice of the gradient."""

    def forward(ctx, *arrays, dim=0):
        if not arrays:
            raise ValueError("cat needs at least one tensor")
        ctx.dim = normalize_dim(dim, arrays[0].ndim, "cat")
        ctx.sizes = [a.shape[ctx.dim] for a in arrays]
        return np.concatenate(arrays, axis=ctx.dim)

    def backward(ctx, grad):
        return tuple(np.split(grad, np.cumsum(ctx.sizes)[:-1], axis=ctx.dim))


class Split(Function):
    """Cut along `dim` into pieces of the given sizes (several outputs, views of the input);
    the gradient is the pieces' gradients concatenated back (Cat run backwards).
    `q, k, v = qkv.split(d, dim=-1)` is one node with three outputs."""

    def forward(ctx, a, sizes, dim):
        ctx.dim = normalize_dim(dim, a.ndim, "split")
        if any(n < 0 for n in sizes) or sum(sizes) != a.shape[ctx.dim]:
            raise ValueError(f"split: sizes {list(sizes)} do not add up to the size {a.shape[ctx.dim]} "
                             f"of dim {ctx.dim} of shape {a.shape}")
        return tuple(np.split(a, np.cumsum(sizes)[:-1], axis=ctx.dim))

    def backward(ctx, *grads):
        return np.concatenate(grads, axis=ctx.dim)


class Unbind(Function):
    """The slices along `dim`, each without that dim (several outputs, views of the input);
    the gradient is the slices' gradients stacked back (Stack run backwards)."""

    def forward(ctx, a, dim):
        ctx.dim = normalize_dim(dim, a.ndim, "unbind")
        return tuple(np.moveaxis(a, ctx.dim, 0))

    def backward(ctx, *grads):
        return np.stack(grads, axis=ctx.dim)


class Stack(Function):
    """Stack equal-shaped tensors along a new dim;  each input gets its slice of the gradient."""

    def forward(ctx, *arrays, dim=0):
        if not arrays:
            raise ValueError("stack needs at least one tensor")
        ctx.dim = normalize_dim(dim, arrays[0].ndim + 1, "stack")
        return np.stack(arrays, axis=ctx.dim)

    def backward(ctx, grad):
        return tuple(np.moveaxis(grad, ctx.dim, 0))
