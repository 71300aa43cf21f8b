"""The bottleneck, run: why attention was added to RNN translation, and why the Transformer
then dropped the recurrence.

    python -m demos.bottleneck [--steps 600] [--lengths 5 10 15 20] [--out runs/bottleneck]

Trains three models on the reverse task at each source length, with the same small budget
and fixed seeds: a GRU encoder-decoder whose decoder sees only the encoder's last state, the
same with additive (Bahdanau) attention over the encoder states, and the Transformer.
Writes bottleneck.png (held-out exact match against length, one line per model) and
rnn_attention.png (the RNN's attention weights for one example), plus results.json.
"""

import json
import os

import numpy as np

from autograd import manual_seed, no_grad
from demos._flags import command_line, integer_at_least
from demos._plotting import output_dir, plt, save
from transformer.data import tasks
from transformer.families.rnn import RNNConfig, RNNEncoderDecoder
from transformer.training.seq2seq import TrainConfig, build_model, train

MODELS = ("RNN", "RNN + attention", "Transformer")


def make_model(name, cfg):
    manual_seed(cfg.seed)
    vocab = tasks.vocab_size(cfg.num_symbols)
    if name == "Transformer":
        return build_model(cfg)
    attention = "additive" if name == "RNN + attention" else None
    return RNNEncoderDecoder(RNNConfig(vocab, vocab, embed_dim=32, hidden_size=64, attention=attention))


def main(argv=None):
    parser = command_line("demos.bottleneck", __doc__)
    parser.add_argument("--steps", type=integer_at_least(1), default=600)
    parser.add_argument("--lengths", type=integer_at_least(1), nargs="+", default=[5, 10, 15, 20])
    parser.add_argument("--seed", type=integer_at_least(0), default=0)
    parser.add_argument("--out", default="runs/bottleneck")
    args = parser.parse_args(argv)
    out = output_dir(args.out)
    results = {name: {} for name in MODELS}
    attention_model = None
    for length in args.lengths:
        for name in MODELS:
            cfg = TrainConfig(task="reverse", max_len=length, max_steps=args.steps, decay_steps=args.steps,
                              warmup=100, eval_every=args.steps, eval_size=500, seed=args.seed,
                              out_dir=os.path.join(out, f"{name.replace(' ', '').replace('+', '_')}_{length}"))
            model, metrics = train(cfg, model=make_model(name, cfg), log=lambda line: None)
            results[name][length] = {"exact_match": metrics["exact_match"],
                                     "token_accuracy": metrics["token_accuracy"], "seconds": metrics["seconds"]}
            print(f"length {length:2d}  {name:<16} exact match {metrics['exact_match']:6.1%}  "
                  f"tokens {metrics['token_accuracy']:6.1%}  ({metrics['seconds']:.0f} s)", flush=True)
            if name == "RNN + attention" and length == 10:
                attention_model = model
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"steps": args.steps, "results": results}, f, indent=1)

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name, marker in zip(MODELS, "osD"):
        lengths = sorted(results[name])
        ax.plot(lengths, [results[name][n]["exact_match"] for n in lengths], marker=marker, label=name)
    ax.set(xlabel="source length", ylabel="held-out exact match", ylim=(-0.02, 1.02),
           title=f"reverse task, {args.steps} training steps each")
    ax.legend()
    save(fig, f"{out}/bottleneck.png")
    if attention_model is not None:
        plot_rnn_attention(attention_model, f"{out}/rnn_attention.png")
    return results


def plot_rnn_attention(model, path):
    """The RNN decoder's attention over the source, one row per output step."""
    example = tasks.heldout_set("reverse", 1, 10, 10, seed=7)
    with no_grad():
        model(example.src, example.tgt_in)
    weights = model.attn_weights[0]                                # (T, S)
    fig, ax = plt.subplots(figsize=(5, 5))
    image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax, shrink=0.8, label="attention weight")
    ax.set_xticks(range(weights.shape[1]), [tasks.symbol_label(t) for t in example.src[0]])
    ax.set_yticks(range(weights.shape[0]), [tasks.symbol_label(t) for t in example.tgt_out[0]])
    ax.set(xlabel="source (keys: encoder states)", ylabel="the token being written (query: decoder state)",
           title="RNN with additive attention: reverse")
    save(fig, path)


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
