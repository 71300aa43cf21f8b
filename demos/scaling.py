"""Why attention divides by sqrt(d_k): the lectures' exercise, run.

    python -m demos.scaling [--out runs/scaling]

For random queries and keys with unit-variance entries, q . k has variance d_k, so the
scores grow with the head size and the softmax saturates: the weights collapse towards a
one-hot choice and gradients through the softmax vanish.  Dividing by sqrt(d_k) keeps the
scores' variance at 1 whatever d_k.  Writes scaling.png.
"""


import numpy as np

from autograd.kernels import reference
from demos._plotting import output_dir, plt, save
from demos._flags import command_line, integer_at_least


def weight_statistics(d_k, keys=32, trials=200, scale=True, seed=0):
    """Mean largest softmax weight and mean entropy over random (q, K) draws."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((trials, 1, d_k))
    k = rng.standard_normal((trials, keys, d_k))
    scores = (q @ k.transpose(0, 2, 1))[:, 0]                     # (trials, keys)
    if scale:
        scores = scores / np.sqrt(d_k)
    w = reference.softmax(scores)
    entropy = -(w * np.log(np.maximum(w, 1e-300))).sum(-1)
    return w.max(-1).mean(), entropy.mean(), scores.std()


def main(argv=None):
    parser = command_line("demos.scaling", __doc__)
    parser.add_argument("--keys", type=integer_at_least(1), default=32)
    parser.add_argument("--out", default="runs/scaling")
    args = parser.parse_args(argv)
    out = output_dir(args.out)
    dims = [8, 16, 32, 64, 128, 256, 512]
    rows = {scale: [weight_statistics(d, args.keys, scale=scale) for d in dims] for scale in (False, True)}
    print(f"{'d_k':>5} | {'max weight':>22} | {'entropy (max ' + format(np.log(args.keys), '.2f') + ')':>22} | score std")
    print(f"{'':>5} | {'unscaled':>10} {'scaled':>11} | {'unscaled':>10} {'scaled':>11} |")
    for d, (mu, hu, su), (ms, hs, ss) in zip(dims, rows[False], rows[True]):
        print(f"{d:5d} | {mu:10.3f} {ms:11.3f} | {hu:10.3f} {hs:11.3f} | {su:6.1f} vs {ss:4.2f}")

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for scale, style in ((False, "o-"), (True, "s-")):
        label = "softmax(q.k / sqrt(d_k))" if scale else "softmax(q.k)"
        axes[0].semilogx(dims, [r[0] for r in rows[scale]], style, base=2, label=label)
        axes[1].semilogx(dims, [r[1] for r in rows[scale]], style, base=2, label=label)
    axes[0].set(xlabel="d_k", ylabel="mean largest weight", title=f"weights collapse to one-hot without scaling ({args.keys} keys)")
    axes[1].axhline(np.log(args.keys), color="gray", ls=":", label="uniform")
    axes[1].set(xlabel="d_k", ylabel="entropy of the weights", title="entropy of the attention weights")
    for ax in axes:
        ax.legend()
    return save(fig, f"{out}/scaling.png")


if __name__ == "__main__":
    main()
