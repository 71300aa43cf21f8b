"""`Tensor`: a numpy array that remembers how it was computed, so gradients can flow back.

A tensor made by the user is a *leaf* (`t.grad_fn is None`).  A tensor made by an op
points to the node that made it (`t.grad_fn`, an instance of the op's `Function` class),
and that node points to its inputs: together they form the graph that `backward()` walks.

dtypes: a tensor built from Python floats (or lists of them) is float32, like PyTorch's
default; one built from a numpy array keeps the array's dtype (float64 stays float64,
which is what `gradcheck` needs); Python ints give int64 and bools give bool.
Unlike `torch.tensor`, `Tensor(array)` copies the array so that later in-place updates
to the tensor never change the caller's array.
"""

from operator import attrgetter

import numpy as np
from numpy.lib.array_utils import normalize_axis_index   # C: no frame for a debugger's `s` to stop in

from autograd import engine, ops


class Tensor:
    __slots__ = ("data", "grad", "requires_grad", "_node", "_output_nr", "_hooks", "__weakref__")
    __array_priority__ = 1000  # numpy array (op) Tensor calls Tensor's reflected operator

    def __init__(self, data, requires_grad=False, dtype=None):
        if isinstance(data, Tensor):
            data = data.data
        if isinstance(data, (np.ndarray, np.generic)):
            array = np.array(data, dtype=dtype)
        else:
            array = np.array(data, dtype=dtype)
            if dtype is None and array.dtype == np.float64:
                array = array.astype(np.float32)   # Python floats -> float32 (PyTorch's default)
        if requires_grad and not np.issubdtype(array.dtype, np.floating):
            raise TypeError(
                f"Tensor: only floating-point tensors can require gradients, got dtype {array.dtype}")
        self.data = array
        self.grad = None
        self.requires_grad = bool(requires_grad)
        self._node = None
        self._output_nr = 0
        self._hooks = None

    @classmethod
    def _make(cls, array, node, output_nr=0):
        """Fast constructor used by ops: no copy, no checks.  output_nr: which output of
        `node` this is (0 unless the op returns several, like split)."""
        t = cls.__new__(cls)
        t.data, t.grad, t.requires_grad = array, None, node is not None
        t._node, t._output_nr, t._hooks = node, output_nr, None
        return t

    # ----- what a tensor is -----

    # .data's own shape, dtype and ndim, read by C getters (a debugger's `s` has no frame to stop in)
    shape = property(attrgetter("data.shape"), doc="The shape of .data, a tuple of ints.")
    dtype = property(attrgetter("data.dtype"), doc="The numpy dtype of .data.")
    ndim = property(attrgetter("data.ndim"), doc="The number of dims of .data.")

    @property
    def grad_fn(self):
        """The node (a Function instance) that produced this tensor; None for a leaf."""
        return self._node

    @property
    def is_leaf(self):
        return self._node is None

    def numel(self):
        return self.data.size

    def size(self, dim=None):
        return self.data.shape if dim is None else self.data.shape[dim]

    def __len__(self):
        return len(self.data)

    def __repr__(self):
        body = np.array2string(self.data, precision=4, threshold=20, edgeitems=2, separator=", ")
        origin = f", grad_fn={self._node.name}" if self._node is not None else (
            ", requires_grad=True" if self.requires_grad else "")
        return f"Tensor({body}, shape={self.data.shape}, dtype={self.data.dtype}{origin})"

    __hash__ = object.__hash__  # == is elementwise, as in PyTorch; identity hashing stays

    # ----- leaving the graph -----

    def numpy(self):
        return self.data

    def item(self):
        if self.data.size != 1:
            raise ValueError(f"item(): only a one-element tensor can be converted, got shape {self.shape}")
        return self.data.item()

    def tolist(self):
        return self.data.tolist()

    def detach(self):
        """The same data (shared, not copied) as a new leaf that requires no gradient."""
        return Tensor._make(self.data, None)

    def requires_grad_(self, requires_grad=True):
        if not self.is_leaf:
            raise RuntimeError("requires_grad_: only leaf tensors can change requires_grad")
        if requires_grad and not np.issubdtype(self.data.dtype, np.floating):
            raise TypeError(f"requires_grad_: only floating-point tensors can require gradients, got {self.dtype}")
        self.requires_grad = requires_grad
        return self

    def retain_grad(self):
        """Keep this intermediate tensor's .grad during backward (leaves always keep theirs)."""
        if self._node is not None:
            import weakref
            if self._node.retained is None:
                self._node.retained = {}
            self._node.retained[self._output_nr] = weakref.ref(self)

    def register_hook(self, hook):
        """Call hook(grad) when this tensor's gradient has been computed during backward;
        if it returns an array, that replaces the gradient (PyTorch's Tensor.register_hook).
        For a leaf the hook sees each gradient before it is added to .grad.  Returns a
        handle whose .remove() unregisters the hook."""
        if not self.requires_grad:
            raise RuntimeError("register_hook: this tensor does not require grad, so no gradient will reach it")
        if self._node is None:                      # a leaf keeps its hooks itself
            if self._hooks is None:
                self._hooks = {}
            return RemovableHandle(self._hooks, hook)
        if self._node.hooks is None:                # an op's output: its node keeps them, by output
            self._node.hooks = {}
        return RemovableHandle(self._node.hooks.setdefault(self._output_nr, {}), hook)

    # ----- backpropagation -----

    def _accumulate_grad(self, grad):
        """Add grad into this leaf's .grad, as PyTorch's AccumulateGrad does (the engine
        calls this): through the leaf's hooks first, and into memory of .grad's own, never
        an array the graph or a hook may still hold (an optimizer scales .grad in place)."""
        grad = engine.run_hooks(self._hooks, grad) if self._hooks else grad
        self.grad = grad.copy() if self.grad is None else self.grad + grad

    def backward(self, grad=None, retain_graph=False):
        """Compute d(self)/d(leaf) and add it to every leaf's .grad.

        grad: d(loss)/d(self), needed unless self holds one element.  The graph's saved
        arrays are freed afterwards unless retain_graph=True.
        """
        if not self.requires_grad:
            raise RuntimeError("backward: this tensor does not require grad and has no grad_fn "
                               "(was it made under no_grad, or from tensors without requires_grad?)")
        if grad is None:
            if self.data.size != 1:
                raise RuntimeError(
                    f"backward: grad can be implicitly created only for a one-element output, "
                    f"got shape {self.shape}; pass grad= of that shape")
            grad = np.empty(self.data.shape, self.data.dtype)
            grad.fill(1)                   # d(self)/d(self)
        else:
            grad = np.asarray(grad.data if isinstance(grad, Tensor) else grad, dtype=self.data.dtype)
            if grad.shape != self.data.shape:
                raise ValueError(f"backward: grad has shape {grad.shape} but the tensor has shape {self.shape}")
        if self._node is None:   # backward on a leaf: its gradient is grad itself
            self.grad = grad.copy() if self.grad is None else self.grad + grad
            return
        engine.run_backward(self, grad, retain_graph)

    # ----- operators (numpy broadcasting) -----

    def _lift(self, other):
        """A Python number or array as a constant tensor of a matching dtype."""
        if isinstance(other, Tensor):
            return other
        if isinstance(other, (int, float, bool)):
            return Tensor._make(np.asarray(other, dtype=np.result_type(self.data.dtype, other)), None)
        return Tensor._make(np.asarray(other), None)

    def __add__(self, other):
        return ops.Add.apply(self, self._lift(other))

    def __radd__(self, other):
        return ops.Add.apply(self._lift(other), self)

    def __sub__(self, other):
        return ops.Sub.apply(self, self._lift(other))

    def __rsub__(self, other):
        return ops.Sub.apply(self._lift(other), self)

    def __mul__(self, other):
        return ops.Mul.apply(self, self._lift(other))

    def __rmul__(self, other):
        return ops.Mul.apply(self._lift(other), self)

    def __truediv__(self, other):
        return ops.Div.apply(self, self._lift(other))

    def __rtruediv__(self, other):
        return ops.Div.apply(self._lift(other), self)

    def __pow__(self, exponent):
        return ops.Pow.apply(self, self._lift(exponent))

    def __rpow__(self, base):
        return ops.Pow.apply(self._lift(base), self)

    def __matmul__(self, other):
        return ops.MatMul.apply(self, self._lift(other))

    def __rmatmul__(self, other):
        return ops.MatMul.apply(self._lift(other), self)

    def __neg__(self):
        return ops.Neg.apply(self)

    def __getitem__(self, key):
        return ops.Index.apply(self, key=_index_key(key))

    # comparisons give boolean tensors that carry no gradient
    def __lt__(self, other):
        return Tensor._make(self.data < _raw(other), None)

    def __le__(self, other):
        return Tensor._make(self.data <= _raw(other), None)

    def __gt__(self, other):
        return Tensor._make(self.data > _raw(other), None)

    def __ge__(self, other):
        return Tensor._make(self.data >= _raw(other), None)

    def __eq__(self, other):
        return Tensor._make(self.data == _raw(other), None)

    def __ne__(self, other):
        return Tensor._make(self.data != _raw(other), None)

    # ----- elementwise math -----

    def exp(self):
        return ops.Exp.apply(self)

    def log(self):
        return ops.Log.apply(self)

    def sqrt(self):
        return ops.Sqrt.apply(self)

    def tanh(self):
        return ops.Tanh.apply(self)

    def sigmoid(self):
        return ops.Sigmoid.apply(self)

    def relu(self):
        return ops.ReLUFn.apply(self)

    def gelu(self, approximate="none"):
        """x Phi(x), exact (erf) by default as in PyTorch; approximate="tanh" for the tanh form."""
        return ops.GELUFn.apply(self, approximate=approximate)

    def silu(self):
        """x sigmoid(x) (PyTorch's F.silu; Llama's SwiGLU gate)."""
        return ops.SiLU.apply(self)

    # ----- reductions -----

    def sum(self, dim=None, keepdim=False):
        return ops.Sum.apply(self, dim=dim, keepdim=keepdim)

    def mean(self, dim=None, keepdim=False):
        return ops.Mean.apply(self, dim=dim, keepdim=keepdim)

    def max(self, dim=None, keepdim=False):
        """Maximum values (not PyTorch's (values, indices) pair); ties share the gradient."""
        return ops.Max.apply(self, dim=dim, keepdim=keepdim)

    def softmax(self, dim):
        return ops.Softmax.apply(self, dim=normalize_axis_index(dim, self.data.ndim, "softmax"))

    def log_softmax(self, dim):
        return ops.LogSoftmax.apply(self, dim=normalize_axis_index(dim, self.data.ndim, "log_softmax"))

    def logsumexp(self, dim, keepdim=False):
        return ops.LogSumExp.apply(self, dim=normalize_axis_index(dim, self.data.ndim, "logsumexp"), keepdim=keepdim)

    # ----- shape -----

    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return ops.Reshape.apply(self, shape=tuple(shape))

    view = reshape

    def transpose(self, dim0, dim1):
        return ops.Transpose.apply(self, dim0=dim0, dim1=dim1)

    @property
    def T(self):
        """The transpose of a 2-D tensor (the last two dims swapped)."""
        return ops.Transpose.apply(self, dim0=-2, dim1=-1)

    def permute(self, *dims):
        dims = dims[0] if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        return ops.Permute.apply(self, dims=tuple(dims))

    def unsqueeze(self, dim):
        dim = ops.normalize_dim(dim, self.ndim + 1, "unsqueeze")
        return ops.Reshape.apply(self, shape=self.shape[:dim] + (1,) + self.shape[dim:])

    def squeeze(self, dim=None):
        if dim is None:
            shape = tuple(n for n in self.shape if n != 1)
        else:
            dim = ops.normalize_dim(dim, self.ndim, "squeeze")
            shape = self.shape[:dim] + self.shape[dim + 1:] if self.shape[dim] == 1 else self.shape
        return ops.Reshape.apply(self, shape=shape)

    def split(self, split_size_or_sections, dim=0):
        """Pieces along dim: of split_size each (the last may be smaller), or of the sizes
        listed (they must add up to the dim's size).  One node with several outputs."""
        n = self.shape[ops.normalize_dim(dim, self.ndim, "split")]
        if isinstance(split_size_or_sections, (int, np.integer)):
            if split_size_or_sections <= 0:
                raise ValueError(f"split: split_size must be positive, got {split_size_or_sections}")
            sizes = [min(split_size_or_sections, n - start) for start in range(0, n, split_size_or_sections)] or [0]
        else:
            sizes = [int(size) for size in split_size_or_sections]
        return ops.Split.apply(self, sizes=sizes, dim=dim)

    def chunk(self, chunks, dim=0):
        """`chunks` pieces along dim (fewer if the dim is too short), each of ceil(n / chunks)."""
        if chunks <= 0:
            raise ValueError(f"chunk: chunks must be positive, got {chunks}")
        n = self.shape[ops.normalize_dim(dim, self.ndim, "chunk")]
        return self.split(max(-(-n // chunks), 1), dim)

    def unbind(self, dim=0):
        """The slices along dim, each without that dim."""
        return ops.Unbind.apply(self, dim=dim)

    def expand(self, *shape):
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        return ops.Expand.apply(self, shape=tuple(shape))

    def masked_fill(self, mask, value):
        """Where mask is True, the result is `value`; elsewhere it is self (gradient flows there)."""
        return ops.MaskedFill.apply(self, mask=_raw(mask), value=value)


class RemovableHandle:
    """Returned by register_hook and register_forward_hook; .remove() unregisters."""

    _next_id = 0

    def __init__(self, hooks, hook):
        self.hooks, self.id = hooks, RemovableHandle._next_id
        RemovableHandle._next_id += 1
        hooks[self.id] = hook

    def remove(self):
        self.hooks.pop(self.id, None)


def _raw(x):
    return x.data if isinstance(x, Tensor) else x


def _index_key(key):
    """Tensors inside an index become their arrays (integer or boolean index arrays)."""
    if isinstance(key, tuple):
        return tuple(_raw(k) for k in key)
    return _raw(key)


def as_tensor(array):
    """A constant Tensor that shares `array` (no copy) and needs no gradient: how code
    outside the engine puts a mask, a table or an input into a graph (torch.as_tensor)."""
    return Tensor._make(np.asarray(array), None)
