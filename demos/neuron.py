"""Micrograd's neuron on the scalar engine: o = tanh(x1 w1 + x2 w2 + b), then o.backward().

The example of the scalar engine's reading page (docs/reading/scalar_backward.html), as a
program, so that the page's "stop here" commands stop on the very values it shows:

    python -m demos.debug -b autograd/scalar.py:Value.backward demos.neuron --out runs/scratch

It prints o and the gradient of o with respect to each input, and writes the graph (each
Value's data and grad) to OUT/neuron.svg.
"""

import os

from autograd.scalar import Value
from demos._flags import command_line
from demos.reading.graph import svg

INPUTS = {"x1": 2.0, "x2": 0.0, "w1": -3.0, "w2": 1.0, "b": 6.8813735870195432}   # micrograd's numbers


def neuron():
    """({name: Value} of the inputs, o): the neuron's graph, built, not yet backpropagated."""
    inputs = {name: Value(x) for name, x in INPUTS.items()}
    x1, x2, w1, w2, b = inputs.values()
    return inputs, (x1 * w1 + x2 * w2 + b).tanh()


def main(argv=None):
    parser = command_line("demos.neuron", __doc__)
    parser.add_argument("--out", default="runs/neuron", help="the folder neuron.svg is written to")
    args = parser.parse_args(argv)
    inputs, o = neuron()
    o.backward()
    print(f"o = tanh(x1*w1 + x2*w2 + b) = {o.data:.4f}")
    for name, value in inputs.items():
        print(f"  do/d{name} = {value.grad:+.4f}   ({name} = {value.data:g})")
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "neuron.svg")
    with open(path, "w") as f:
        f.write(svg(o, {id(value): name for name, value in inputs.items()}))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
