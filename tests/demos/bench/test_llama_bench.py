"""demos.bench.llama's attribution of a step's time to the ops only one architecture has."""

import numpy as np

from autograd import Tensor
from demos.bench.llama import op_seconds
from nn import functional as F


def test_op_seconds_counts_the_forward_and_backward_of_the_ops_that_ran_and_only_those():
    x = Tensor(np.random.default_rng(0).standard_normal((8, 16)), requires_grad=True)

    def step():
        F.rms_norm(x, 16).silu().sum().backward()

    ms = op_seconds(step, 3)
    assert set(ms) == {"RMSNormFn", "SiLU"} and all(value > 0 for value in ms.values())
