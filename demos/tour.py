"""A guided tour of the tensor engine: one small expression, forward then backward.

    python -m demos.tour [--out runs/tour]

Prints each node as it is built, then each backward step (which op, what gradient it
receives and what it sends to its inputs), checks the result with gradcheck, and saves
a drawing of the graph.  Put a breakpoint in `autograd/engine.py:run_backward` to step it.
"""


import os

import numpy as np

from autograd import Tensor, draw_graph, gradcheck, kernels, print_graph
from autograd.engine import graph_nodes
from demos._plotting import output_dir
from demos._flags import command_line


def expression(x, w, b):
    """loss = mean(tanh(x @ w + b)^2): a one-layer network and a squared output."""
    h = x @ w          # (2, 3) @ (3, 2) -> (2, 2)
    z = h + b          # (2, 2) + (2,)   -> (2, 2): b is broadcast over the rows
    a = z.tanh()
    return (a * a).mean()


def main(argv=None):
    parser = command_line("demos.tour", __doc__)
    parser.add_argument("--out", default="runs/tour")
    args = parser.parse_args(argv)
    out_dir = output_dir(args.out)
    if kernels.tier() == "fast" and "AUTOGRAD_KERNELS" not in os.environ:
        kernels.use_tier("numpy")     # a graph this small needs no compiled kernels: their numpy definitions, at once
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((2, 3)))                          # data: no gradient needed
    w = Tensor(rng.standard_normal((3, 2)), requires_grad=True)      # parameters
    b = Tensor(np.zeros(2), requires_grad=True)
    names = {"x": x, "w": w, "b": b}

    print("loss = mean(tanh(x @ w + b)^2): x (2, 3) data, w (3, 2) and b (2,) parameters\n")
    print("== forward: each op makes a node that remembers its inputs ==")
    loss = expression(x, w, b)
    loss.retain_grad()
    for node in graph_nodes(loss.grad_fn):
        for t in node.inputs:
            t.retain_grad()          # keep each inner tensor's gradient too, to show (leaves keep theirs anyway)
        inputs = ", ".join(str(t.shape) for t in node.inputs)
        print(f"  {node.name:<6} inputs {inputs:<18} -> output {node.out_shape}")
    print(f"  loss = {loss.item():.6f}")

    print("\n== backward, the plan: loss.backward() will call each op's backward(), from the loss to the leaves "
          "(a -: none sent, x is data) ==")
    for node in reversed(graph_nodes(loss.grad_fn)):       # the order run_backward calls them in
        sends = ", ".join(str(t.shape) if needs else "-" for t, needs in zip(node.inputs, node.needs_input_grad))
        print(f"  {node.name}.backward: receives dL/d(out) of shape {node.out_shape}, sends {sends}")
    loss.backward()                                         # now it runs: run_backward, in that order
    print(f"\n  ran loss.backward(): dL/dw =\n{np.array2string(w.grad, precision=4)}\n  dL/db = {np.array2string(b.grad, precision=4)}")

    print("\n== the graph, output first ==")
    print_graph(loss, names=names)
    print("\n== gradcheck: the backward pass against central finite differences ==")
    ok = gradcheck(lambda w, b: expression(x, w, b), [w, b])
    print(f"  gradcheck passed: {ok}")
    path = draw_graph(loss, f"{out_dir}/graph.png", title="loss = mean(tanh(x @ w + b)^2)", names=names)
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
