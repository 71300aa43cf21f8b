"""`Value`: a scalar reverse-mode autograd engine, small enough to read in one sitting.

Every `Value` holds a number (`data`), the gradient of the final output with respect to
that number (`grad`), the `Value`s it was computed from (`parents`) and a function that
pushes its own gradient to those parents (`_backward`).  Calling `out.backward()` orders
the graph topologically and runs those functions from the output back to the inputs:
that is reverse-mode automatic differentiation (backpropagation).

Gradients accumulate in leaves, as in PyTorch: calling `backward()` twice adds the second
gradient to the first.  Set `v.grad = 0.0` on every leaf before each training step.
The tensor engine (`autograd.Tensor`) is the same idea with arrays instead of numbers.
"""

import math


class Value:
    """One scalar node of a computation graph."""

    def __init__(self, data, parents=(), op=""):
        self.data = float(data)
        self.grad = 0.0
        self.parents = parents   # the Values this one was computed from
        self.op = op             # the operation that made it ("" for a leaf)
        self._backward = lambda: None  # adds self.grad's contribution to parents' grads

    def __repr__(self):
        made_by = f", op={self.op!r}" if self.op else ""
        return f"Value(data={self.data:.6g}, grad={self.grad:.6g}{made_by})"

    # ----- arithmetic: each result remembers how to send its gradient back -----

    def __add__(self, other):
        other = _as_value(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward():  # d(a+b)/da = 1, d(a+b)/db = 1
            self.grad += out.grad
            other.grad += out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        other = _as_value(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward():  # d(ab)/da = b, d(ab)/db = a
            # BEGIN EXERCISE value_mul
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
            # END EXERCISE
        out._backward = _backward
        return out

    def __pow__(self, exponent):
        if not isinstance(exponent, (int, float)):
            raise TypeError(f"Value ** exponent: exponent must be an int or float, got {type(exponent).__name__}")
        out = Value(self.data ** exponent, (self,), f"**{exponent}")

        def _backward():  # d(a^n)/da = n a^(n-1)
            self.grad += exponent * self.data ** (exponent - 1) * out.grad
        out._backward = _backward
        return out

    def exp(self):
        out = Value(math.exp(self.data), (self,), "exp")

        def _backward():  # d(e^a)/da = e^a
            self.grad += out.data * out.grad
        out._backward = _backward
        return out

    def log(self):
        if self.data <= 0:
            raise ValueError(f"Value.log: input must be positive, got {self.data}")
        out = Value(math.log(self.data), (self,), "log")

        def _backward():  # d(log a)/da = 1/a
            self.grad += out.grad / self.data
        out._backward = _backward
        return out

    def tanh(self):
        out = Value(math.tanh(self.data), (self,), "tanh")

        def _backward():  # d(tanh a)/da = 1 - tanh(a)^2
            self.grad += (1.0 - out.data ** 2) * out.grad
        out._backward = _backward
        return out

    def sigmoid(self):
        s = 1.0 / (1.0 + math.exp(-self.data)) if self.data >= 0 else math.exp(self.data) / (1.0 + math.exp(self.data))
        out = Value(s, (self,), "sigmoid")

        def _backward():  # d(sigma a)/da = sigma(a) (1 - sigma(a))
            self.grad += out.data * (1.0 - out.data) * out.grad
        out._backward = _backward
        return out

    def relu(self):
        out = Value(self.data if self.data > 0 else 0.0, (self,), "relu")

        def _backward():  # d(relu a)/da = 1 if a > 0 else 0
            self.grad += (self.data > 0) * out.grad
        out._backward = _backward
        return out

    # ----- everything else is written with the operations above -----

    def __neg__(self):
        return self * -1.0

    def __sub__(self, other):
        return self + (-_as_value(other))

    def __truediv__(self, other):
        return self * _as_value(other) ** -1

    def __radd__(self, other):
        return self + other

    def __rsub__(self, other):
        return _as_value(other) - self

    def __rmul__(self, other):
        return self * other

    def __rtruediv__(self, other):
        return _as_value(other) / self

    # ----- backpropagation -----

    def backward(self):
        """Set self.grad = 1 and propagate gradients to every Value this one depends on.

        The topological order is built with an explicit stack (no recursion), so a chain
        of any length works.
        """
        order = topological_order(self)
        for node in order:
            if node.parents:           # intermediate results start each pass at zero;
                node.grad = 0.0        # only leaves accumulate across passes
        self.grad += 1.0
        for node in reversed(order):   # outputs first, inputs last
            node._backward()


def topological_order(root):
    """Values reachable from `root`, each listed after all of its parents."""
    # BEGIN EXERCISE topological_sort
    order, visited = [], set()
    stack = [(root, False)]
    while stack:
        node, parents_done = stack.pop()
        if parents_done:
            order.append(node)
        elif id(node) not in visited:
            visited.add(id(node))
            stack.append((node, True))
            stack.extend((p, False) for p in node.parents if id(p) not in visited)
    return order
    # END EXERCISE


def _as_value(x):
    return x if isinstance(x, Value) else Value(x)
