"""Layer norm forward and backward for the fast tier: one pass per row, rows shared by threads."""

import numpy as np

from autograd.engine_room.chunks import chunked, share_of
from autograd.engine_room.dispatch import PARALLEL_MIN_ELEMENTS, array_types, chunks_for


def _make_layer_norm(dtype):
    """Layer norm forward and backward (see reference.layer_norm) for one dtype.  Rows are
    independent, so threads share them.  The parameter gradients are sums over rows: each
    chunk adds up a share of the columns, every column over all rows in row order (rows
    split among threads would group the sums differently, and every trained model's last
    bits would change with the number of threads)."""

    def layer_norm_rows(x, weight, bias, eps, out, xhat, rstd, chunk, chunks):
        x, out, xhat, rstd = (share_of(x, chunk, chunks), share_of(out, chunk, chunks), share_of(xhat, chunk, chunks),
                              share_of(rstd, chunk, chunks))
        n, d = x.shape
        for i in range(n):
            total = x[i, 0] * 0
            for j in range(d):
                total += x[i, j]
            mean = total / d
            var = total * 0
            for j in range(d):
                c = x[i, j] - mean
                var += c * c
            r = 1 / np.sqrt(var / d + eps)
            rstd[i, 0] = r
            for j in range(d):
                h = (x[i, j] - mean) * r
                xhat[i, j] = h
                out[i, j] = h * weight[j] + bias[j]

    def layer_norm_backward_rows(grad, xhat, rstd, weight, dx, dweight, dbias, chunk, chunks):
        # BEGIN TWIN layer_norm_backward
        first, stop = chunk * grad.shape[1] // chunks, (chunk + 1) * grad.shape[1] // chunks
        # this chunk's columns, summed in buffers of its own: summed in dweight itself, the
        # chunks' shares met in one cache line, which both threads wrote for every row (two
        # threads were slower than one)
        dweight_share, dbias_share = np.zeros(stop - first, dweight.dtype), np.zeros(stop - first, dbias.dtype)
        for i in range(grad.shape[0]):              # each column summed in row order
            grad_row, xhat_row = grad[i, first:stop], xhat[i, first:stop]
            for j in range(stop - first):
                dweight_share[j] += grad_row[j] * xhat_row[j]
                dbias_share[j] += grad_row[j]
        for j in range(stop - first):               # element by element: a slice assignment
            dweight[first + j] = dweight_share[j]   # checks the shapes, and its error message
            dbias[first + j] = dbias_share[j]       # (string formatting) takes seconds to compile
        grad, xhat, rstd, dx = (share_of(grad, chunk, chunks), share_of(xhat, chunk, chunks),
                                share_of(rstd, chunk, chunks), share_of(dx, chunk, chunks))
        n, d = grad.shape
        for i in range(n):
            mean_g = grad[i, 0] * 0
            mean_gx = grad[i, 0] * 0
            for j in range(d):
                gw = grad[i, j] * weight[j]
                mean_g += gw
                mean_gx += gw * xhat[i, j]
            mean_g /= d
            mean_gx /= d
            for j in range(d):
                dx[i, j] = rstd[i, 0] * (grad[i, j] * weight[j] - mean_g - xhat[i, j] * mean_gx)
        # END TWIN

    name = np.dtype(dtype).name
    return (chunked(layer_norm_rows, name, array_types(dtype, "2r", "1r", "1r", "s", "2w", "2w", "2w")),
            chunked(layer_norm_backward_rows, name, array_types(dtype, "2r", "2r", "2r", "1r", "2w", "1w", "1w")))


_layer_norm_kernels = {}


def _layer_norm_kernel(dtype, backward):
    dtype = np.dtype(dtype)
    if dtype not in _layer_norm_kernels:
        _layer_norm_kernels[dtype] = _make_layer_norm(dtype.type)
    return _layer_norm_kernels[dtype][int(backward)]


def layer_norm(x, weight, bias, eps):
    """Same signature and results as reference.layer_norm, in one pass per row."""
    dtype = x.dtype
    x = np.ascontiguousarray(x)
    out, xhat = np.empty_like(x), np.empty_like(x)
    rstd = np.empty((x.shape[0], 1), dtype)
    _layer_norm_kernel(dtype, False)(x, np.ascontiguousarray(weight, dtype), np.ascontiguousarray(bias, dtype),
                                     dtype.type(eps), out, xhat, rstd, chunks_for(x.size, PARALLEL_MIN_ELEMENTS))
    return out, xhat, rstd


def layer_norm_backward(grad, xhat, rstd, weight):
    """Same signature and results as reference.layer_norm_backward."""
    # BEGIN TWIN layer_norm_backward
    grad = np.ascontiguousarray(grad, xhat.dtype)
    dx = np.empty_like(grad)
    dweight, dbias = np.empty(grad.shape[1], xhat.dtype), np.empty(grad.shape[1], xhat.dtype)
    _layer_norm_kernel(xhat.dtype, True)(grad, xhat, rstd, np.ascontiguousarray(weight, xhat.dtype), dx, dweight, dbias,
                                         chunks_for(grad.size, PARALLEL_MIN_ELEMENTS))
    return dx, dweight, dbias
    # END TWIN
