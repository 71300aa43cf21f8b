"""Train a small MLP made only of scalar `Value`s on the two-moons data set.

    python -m demos.scalar_mlp [--steps 60] [--out runs/scalar_mlp]

Every weight is one `Value`, so each step builds a graph of thousands of scalar nodes and
backpropagates through it: slow, but nothing is hidden.  Writes the decision boundary.
"""

import random

import numpy as np

from autograd import Value
from demos._plotting import output_dir, plt, save
from demos._flags import command_line, integer_at_least


def two_moons(n, noise, seed):
    """n points on two interleaving half circles, labels -1 and +1."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0, np.pi, n)
    upper = rng.random(n) < 0.5
    x = np.where(upper, np.cos(t), 1 - np.cos(t))
    y = np.where(upper, np.sin(t), 0.5 - np.sin(t))
    points = np.stack([x, y], axis=1) + noise * rng.standard_normal((n, 2))
    return points, np.where(upper, 1, -1)


class Neuron:
    def __init__(self, n_in, rng, linear=False):
        self.w = [Value(rng.uniform(-1, 1)) for _ in range(n_in)]
        self.b = Value(0.0)
        self.linear = linear

    def __call__(self, x):
        act = sum((wi * xi for wi, xi in zip(self.w, x)), self.b)
        return act if self.linear else act.tanh()

    def parameters(self):
        return self.w + [self.b]


class MLP:
    def __init__(self, sizes, seed):
        rng = random.Random(seed)
        self.layers = [[Neuron(n_in, rng, linear=(i == len(sizes) - 2)) for _ in range(n_out)]
                       for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]))]

    def __call__(self, x):
        for layer in self.layers:
            x = [neuron(x) for neuron in layer]
        return x[0]

    def parameters(self):
        return [p for layer in self.layers for neuron in layer for p in neuron.parameters()]


def hinge_loss(model, points, labels, alpha=1e-4):
    """Mean max(0, 1 - y * score) plus L2 regularisation; also returns the accuracy."""
    scores = [model(list(map(Value, p))) for p in points]
    losses = [(1 - int(y) * s).relu() for y, s in zip(labels, scores)]
    data_loss = sum(losses) * (1.0 / len(losses))
    reg_loss = alpha * sum(p * p for p in model.parameters())
    accuracy = np.mean([(s.data > 0) == (y > 0) for y, s in zip(labels, scores)])
    return data_loss + reg_loss, accuracy


def main(argv=None):
    parser = command_line("demos.scalar_mlp", __doc__)
    parser.add_argument("--steps", type=integer_at_least(1), default=60)
    parser.add_argument("--points", type=integer_at_least(1), default=60)
    parser.add_argument("--seed", type=integer_at_least(0), default=0)
    parser.add_argument("--out", default="runs/scalar_mlp")
    args = parser.parse_args(argv)
    out_dir = output_dir(args.out)
    points, labels = two_moons(args.points, 0.1, args.seed)
    model = MLP([2, 12, 12, 1], args.seed)
    print(f"MLP 2-12-12-1 of Values: {len(model.parameters())} parameters")
    for step in range(args.steps):
        loss, accuracy = hinge_loss(model, points, labels)
        for p in model.parameters():
            p.grad = 0.0               # gradients accumulate: zero them every step
        loss.backward()
        learning_rate = 1.0 - 0.9 * step / args.steps
        for p in model.parameters():
            p.data -= learning_rate * p.grad
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step:3d}  loss {loss.data:.4f}  accuracy {accuracy:.0%}")

    xs, ys = np.meshgrid(np.linspace(-1.5, 2.5, 30), np.linspace(-1.0, 1.5, 30))
    grid = [model([Value(a), Value(b)]).data for a, b in zip(xs.ravel(), ys.ravel())]
    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.contourf(xs, ys, np.reshape(grid, xs.shape) > 0, cmap="coolwarm", alpha=0.4)
    ax.scatter(points[:, 0], points[:, 1], c=labels, cmap="coolwarm", edgecolors="k", s=20)
    ax.set(xlabel="x1", ylabel="x2", title=f"MLP of scalar Values: decision boundary (train accuracy {accuracy:.0%})")
    save(fig, f"{out_dir}/decision_boundary.png")
    return accuracy


if __name__ == "__main__":
    main()
