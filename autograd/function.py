"""`Function`: the base class of every differentiable op of the tensor engine.

An op is one subclass with `forward` and `backward` side by side:

    class Mul(Function):
        def forward(ctx, a, b):            # numpy arrays in, numpy array out
            ctx.save_for_backward(a, b)
            return a * b

        def backward(ctx, grad):           # d(loss)/d(out) in, one gradient per input out
            a, b = ctx.saved_tensors
            return grad * b, grad * a

`ctx` is the node itself: the `Function` instance made for this one application of the op.
It keeps the inputs, their `requires_grad` flags (`ctx.needs_input_grad`), what forward
saved, the op name, the output shape and the module whose forward made it
(`ctx.module_path`, see autograd/running_module.py), so a learner who stops in
`Softmax.backward` sees exactly which node they are in: `<Softmax node in blocks.2.attn,
output shape (12, 4, 64, 64)>`.

`backward` may return a gradient in the broadcast output shape; the engine's
`unbroadcast` (the one place where that happens) sums it back down to the input's shape.

An op with several outputs (`Split`) returns a tuple of arrays from forward; `apply` then
returns a tuple of tensors, and backward receives one gradient per output,
`backward(ctx, *grads)` (zeros for an output that the loss does not depend on), as in
PyTorch.
"""

import numpy as np

from autograd import anomaly, engine
from autograd.grad_mode import is_grad_enabled
from autograd.running_module import path_of, running_module


class Function:
    """One node of the graph: an op applied to some input tensors."""

    def forward(ctx, *arrays, **params):
        raise NotImplementedError(f"{type(ctx).__name__} must define forward(ctx, *arrays)")

    def backward(ctx, grad):
        raise NotImplementedError(f"{type(ctx).__name__} must define backward(ctx, grad)")

    num_outputs = 1                  # how many arrays forward returns (set by apply)
    saved_tensors = ()               # what forward saved for backward (None once freed)
    freed = False                    # whether a backward freed them (retain_graph=False)
    retained = None                  # {output number: weakref to a tensor that keeps its .grad} (retain_grad)
    hooks = None                     # {output number: {id: hook}}, gradient hooks of the outputs (register_hook)
    module_ref = None                # weak reference to the Module whose forward made this node (None: no module)

    def save_for_backward(ctx, *arrays):
        ctx.saved_tensors = arrays

    @property
    def name(ctx):
        return type(ctx).__name__

    @property
    def module_path(ctx):
        """Where in the model this node was made: the dotted name of the module whose
        forward was running ('blocks.2.attn'; a model itself, or a module called on its own,
        by its class name), None for an op called outside every module."""
        return path_of(ctx.module_ref)

    @property
    def where(ctx):
        """' in blocks.2.attn' (or '' outside every module), for messages about this node."""
        path = ctx.module_path
        return f" in {path}" if path else ""

    def __repr__(ctx):
        return f"<{ctx.name} node{ctx.where}, output shape {ctx.out_shape}>"

    @classmethod
    def apply(cls, *inputs, **params):
        """Run forward on the inputs' arrays and, if a gradient is needed, record the node.

        `inputs` are Tensors (differentiable arguments); `params` are plain Python/numpy
        values (a dim, a shape, a mask) passed to forward as keywords.
        """
        ctx = cls()
        arrays = [t.data for t in inputs]
        try:
            out = ctx.forward(*arrays, **params)
        except (ValueError, IndexError, TypeError) as err:
            # keep the traceback (it ends at the failing line of the op's forward) and say
            # which op, in which module, and which shapes were involved
            ctx.module_ref = running_module.get()
            err.add_note(f"in {cls.__name__}.forward{ctx.where}, input shapes: {', '.join(str(a.shape) for a in arrays)}")
            raise
        ctx.module_ref = running_module.get()        # the module whose forward is running (nn.Module.__call__)
        outs = out if isinstance(out, tuple) else (out,)
        if anomaly.is_anomaly_enabled():
            ctx.creation_stack = anomaly.creation_stack()
            for array in outs:
                anomaly.check_forward(ctx, inputs, array)
        from autograd.tensor import Tensor  # imported here: tensor.py imports the ops, which import this module
        if not (is_grad_enabled() and any(t.requires_grad for t in inputs)):
            tensors = tuple([Tensor._make(array, None) for array in outs])
            return tensors if isinstance(out, tuple) else tensors[0]
        ctx.inputs, ctx.needs_input_grad, ctx.num_outputs = inputs, tuple([t.requires_grad for t in inputs]), len(outs)
        ctx.out_shape = tuple([array.shape for array in outs]) if isinstance(out, tuple) else out.shape
        ctx.out_dtype = tuple([array.dtype for array in outs]) if isinstance(out, tuple) else out.dtype
        tensors = tuple([Tensor._make(array, ctx, number) for number, array in enumerate(outs)])
        return tensors if isinstance(out, tuple) else tensors[0]

    def output_grads(ctx, slots):
        """The gradients of this node's outputs, ready for its backward (the engine calls
        this): zeros for an output that no gradient reached (one piece of a split that the
        loss never used), then each output's hooks (Tensor.register_hook) and retained
        .grad (Tensor.retain_grad)."""
        for i in [i for i, g in enumerate(slots) if g is None]:
            several = ctx.num_outputs > 1
            slots[i] = np.zeros(ctx.out_shape[i] if several else ctx.out_shape,
                                ctx.out_dtype[i] if several else ctx.out_dtype)
        for i, hooks in (ctx.hooks or {}).items():
            slots[i] = engine.run_hooks(hooks, slots[i])
        for i, kept in (ctx.retained or {}).items():
            if (tensor := kept()) is not None:
                tensor.grad = slots[i].copy() if tensor.grad is None else tensor.grad + slots[i]
        return slots

    def release(ctx, retain_graph):
        """Free the arrays saved for backward (the engine calls this after backward), unless
        retain_graph: a second backward through this node is then an error, not a wrong answer."""
        if not retain_graph:
            ctx.saved_tensors, ctx.freed = None, True


def normalize_dim(dim, ndim, op):
    """Turn a possibly negative dim into 0..ndim-1, with a clear error when out of range."""
    if not isinstance(dim, (int, np.integer)):
        raise TypeError(f"{op}: dim must be an int, got {type(dim).__name__}")
    if not -max(ndim, 1) <= dim < max(ndim, 1):
        raise IndexError(
            f"{op}: dim {dim} is out of range for a tensor with {ndim} dims "
            f"(expected {-max(ndim, 1)}..{max(ndim, 1) - 1})")
    return dim % max(ndim, 1)


def normalize_dims(dim, ndim, op):
    """dim=None -> all dims; int or tuple -> a sorted tuple of non-negative dims."""
    if dim is None:
        return tuple(range(ndim))
    dims = (dim,) if isinstance(dim, (int, np.integer)) else tuple(dim)
    dims = tuple(sorted({normalize_dim(d, ndim, op) for d in dims}))
    return dims
