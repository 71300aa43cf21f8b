"""`Module` and `Parameter`: the containers that turn tensors into trainable models.

Assigning a `Parameter` or a `Module` to an attribute of a module registers it, so
`parameters()`, `state_dict()`, `train()` and `eval()` find it by name, as in PyTorch.
"""

import weakref
from collections import OrderedDict

import numpy as np

from autograd import Tensor
from autograd.running_module import running_module
from autograd.tensor import RemovableHandle


class Parameter(Tensor):
    """A leaf tensor that a Module owns and an optimizer updates; always requires grad.

    `.data` and `.grad` are plain numpy arrays: an optimizer (or a learner in a debugger)
    may read them and assign new arrays.
    """

    def __init__(self, data, requires_grad=True):
        super().__init__(data.data if isinstance(data, Tensor) else data, requires_grad=requires_grad)
        if not np.issubdtype(self.data.dtype, np.floating):
            raise TypeError(f"Parameter: data must be floating point, got {self.data.dtype}")

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


class Module:
    """Base class of every layer and model: subclasses define `forward` and assign their
    parameters and sub-modules as attributes in `__init__` (after `super().__init__()`)."""

    def __init__(self):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() before assigning attributes")
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            self._parameters[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
            object.__setattr__(value, "_owner", (weakref.ref(self), name))   # for .path
        object.__setattr__(self, name, value)

    def __delattr__(self, name):
        self._parameters.pop(name, None)
        self._modules.pop(name, None)
        object.__delattr__(self, name)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} must define forward()")

    def __call__(self, *args, **kwargs):
        entered = running_module.set(weakref.ref(self))   # nodes made in forward say this module's path
        try:
            output = self.forward(*args, **kwargs)
        finally:
            running_module.reset(entered)                 # the caller's module again, even if forward raised
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    def register_forward_hook(self, hook):
        """Call hook(module, inputs, output) after every forward of this module; a hook that
        returns something replaces the output (PyTorch's semantics).  Returns a handle
        whose .remove() unregisters it.  Useful to look at what a layer computes, e.g. the
        attention weights, without changing the model's code."""
        return RemovableHandle(self._forward_hooks, hook)

    # ----- walking the tree -----

    @property
    def path(self):
        """This module's dotted name inside the model that owns it, e.g.
        'decoder.layers.1.cross_attn' ('' for the model itself): stopped in a forward in a
        debugger, `p self.path` says which of the many layers of one class you are in."""
        names, module = [], self
        while "_owner" in module.__dict__ and module._owner[0]() is not None:
            owner, name = module._owner
            names.append(name)
            module = owner()
        return ".".join(reversed(names))

    def named_modules(self, prefix=""):
        """(dotted name, module) for this module and every descendant, depth first."""
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(f"{prefix}.{name}" if prefix else name)

    def modules(self):
        return (m for _, m in self.named_modules())

    def children(self):
        return iter(self._modules.values())

    def named_parameters(self, prefix="", remove_duplicate=True):
        """(dotted name, parameter) pairs such as ('encoder.layers.0.self_attn.q_proj.weight', p).
        A parameter shared by two modules (weight tying) is listed once unless remove_duplicate=False."""
        seen = set()
        for module_name, module in self.named_modules(prefix):
            for name, p in module._parameters.items():
                if remove_duplicate and id(p) in seen:
                    continue
                seen.add(id(p))
                yield (f"{module_name}.{name}" if module_name else name), p

    def parameters(self):
        return [p for _, p in self.named_parameters()]

    # ----- modes and gradients -----

    def train(self, mode=True):
        """Training mode (dropout active) for this module and all below it."""
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def eval(self):
        """Evaluation mode (dropout is the identity) for this module and all below it."""
        return self.train(False)

    def to(self, dtype):
        """Cast every parameter to `dtype` (a numpy dtype or its name, e.g. "float64"), in place,
        keeping tied parameters tied; returns self (PyTorch's module.to(dtype))."""
        dtype = np.dtype(dtype)
        if not np.issubdtype(dtype, np.floating):
            raise TypeError(f"{type(self).__name__}.to: parameters must be floating point, got {dtype}")
        for p in self.parameters():
            p.data = p.data.astype(dtype, copy=False)
            p.grad = None if p.grad is None else p.grad.astype(dtype, copy=False)
        return self

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None

    # ----- saving and loading -----

    def state_dict(self):
        """{dotted name: numpy array (a copy)} for every parameter, tied ones under each name."""
        return OrderedDict((name, p.data.copy()) for name, p in self.named_parameters(remove_duplicate=False))

    def load_state_dict(self, state_dict, strict=True):
        """Copy arrays into the parameters.  Every problem (missing key, unexpected key,
        shape mismatch) is reported together, by name, and nothing is changed if any is
        found.  strict=False ignores missing and unexpected keys, never shape mismatches."""
        own = OrderedDict(self.named_parameters(remove_duplicate=False))
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        mismatched = [f"{k}: expected shape {own[k].shape}, got {np.shape(state_dict[k])}"
                      for k in own if k in state_dict and np.shape(state_dict[k]) != own[k].shape]
        problems = []
        if strict and missing:
            problems.append(f"{len(missing)} missing keys: " + _first_few(missing, ", "))
        if strict and unexpected:
            problems.append(f"{len(unexpected)} unexpected keys: " + _first_few(unexpected, ", "))
        if mismatched:
            problems.append(f"{len(mismatched)} shape mismatches: " + _first_few(mismatched, "; "))
        if problems:
            raise KeyError(f"load_state_dict for {type(self).__name__} failed, nothing was loaded: "
                           + " | ".join(problems))
        for name, p in own.items():
            if name in state_dict:      # its own C-ordered copy (a transposed array's would keep Fortran order)
                p.data = np.array(state_dict[name], dtype=p.data.dtype, order="C")
        return missing, unexpected

    # ----- printing -----

    def extra_repr(self):
        return ""

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for name, child in self._modules.items():
            child_text = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {child_text}")
        return "\n".join(lines) + (")" if len(lines) == 1 else "\n)")


class ModuleList(Module):
    """A list of modules whose parameters are registered (under names '0', '1', ...)."""

    def __init__(self, modules=()):
        super().__init__()
        for m in modules:
            self.append(m)

    def append(self, module):
        setattr(self, str(len(self._modules)), module)
        return self

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())


class Sequential(ModuleList):
    """Modules applied one after another: Sequential(a, b, c)(x) == c(b(a(x)))."""

    def __init__(self, *modules):
        super().__init__(modules)

    def forward(self, x):
        for m in self:
            x = m(x)
        return x


def _first_few(items, separator, count=3):
    """The first `count` items joined, and how many more there are: an error message that
    names the problem without listing a whole model's parameters."""
    more = f"{separator}... and {len(items) - count} more" if len(items) > count else ""
    return separator.join(items[:count]) + more
