"""A reverse-mode autograd engine in two sizes.

- `Value` (autograd/scalar.py): one number per node, the whole idea in ~150 lines.
- `Tensor` (autograd/tensor.py): numpy arrays per node, broadcasting, matmul, softmax...;
  every op is a `Function` subclass in autograd/ops/, with forward and backward side by side.

    from autograd import Tensor, Value, no_grad, gradcheck
"""

from autograd.scalar import Value
from autograd.tensor import Tensor, as_tensor
from autograd.function import Function
from autograd.grad_mode import no_grad, enable_grad, is_grad_enabled
from autograd.combine import cat, stack, where
from autograd.gradcheck import gradcheck, GradcheckError
from autograd.random import manual_seed, default_generator
from autograd.graph import print_graph, draw_graph
from autograd.anomaly import detect_anomaly, AnomalyError

__all__ = ["Value", "Tensor", "as_tensor", "Function", "no_grad", "enable_grad", "is_grad_enabled", "cat", "stack",
           "where", "gradcheck", "GradcheckError", "manual_seed", "default_generator", "print_graph",
           "draw_graph", "detect_anomaly", "AnomalyError"]
