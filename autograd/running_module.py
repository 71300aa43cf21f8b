"""Which module's forward is running: the layer each node recorded meanwhile belongs to.

`nn.Module.__call__` sets `running_module` to (a weak reference to) its module while that
module's forward runs, and puts back what was there in a `finally`, so nested calls nest
and an exception leaves nothing behind.  `Function.apply` keeps it on every node it
makes, so a node can say where in the model it was made:

    >>> loss.grad_fn.inputs[0].grad_fn            # somewhere inside a GPT
    <Softmax node in blocks.2.attn, output shape (12, 4, 64, 64)>

A context variable, not a global: each thread (and each asyncio task) has its own.  The
reference is weak so that a graph never keeps a model alive, nor a model (holding a
tensor) its graph in a cycle.  autograd knows nothing of nn: anything with a `path` (its
dotted name in its model, '' for a model itself) can be a module here.
"""

import contextvars

running_module = contextvars.ContextVar("running_module", default=None)   # weakref.ref to a Module, or None


def path_of(module_ref):
    """The dotted name in its model of the module `module_ref` refers to ('blocks.2.attn'),
    its class name for a model itself or a module called on its own, None for no module."""
    module = None if module_ref is None else module_ref()
    return None if module is None else (getattr(module, "path", "") or type(module).__name__)
