"""Decoder-only (GPT-style): a causal language model learns to sort, and generates with
and without a key/value cache.

    python -m demos.decoder_only [--steps 800] [--out runs/decoder_only]

Each sequence is BOS, 6 digits from {0, 1, 2}, SEP, then the same digits sorted; the loss
counts only the sorted part.  Of the 729 possible inputs, 20% are held out.  After
training, the model generates the answers for the held-out prompts, and generation speed
is measured with the key/value cache (each step runs only the new token) and without it
(each step re-runs the whole prefix).
"""

import json
import os
import time

import numpy as np

from autograd import manual_seed
from demos._flags import command_line, integer_at_least
from demos._plotting import output_dir
from nn import functional as F
from nn.recipe import make_optimizer, optimize
from transformer.data.toy_data import DIGIT0, lm_batch, sort_accuracy, sort_dataset
from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig

LENGTH = 6


def tokens_per_second(model, prompts, steps, use_cache, repeats=3):
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        model.generate(prompts, steps, use_cache=use_cache)
        best = min(best, time.perf_counter() - start)
    return len(prompts) * steps / best


def main(argv=None):
    parser = command_line("demos.decoder_only", __doc__)
    parser.add_argument("--steps", type=integer_at_least(1), default=800)
    parser.add_argument("--seed", type=integer_at_least(0), default=0)
    parser.add_argument("--out", default="runs/decoder_only")
    args = parser.parse_args(argv)
    out = output_dir(args.out)
    manual_seed(args.seed)
    train_rows, heldout = sort_dataset(LENGTH, seed=args.seed)
    model = DecoderOnly(DecoderOnlyConfig(vocab=DIGIT0 + 3, max_len=2 * LENGTH + 2))
    optimizer, schedule = make_optimizer(model.parameters(), 3e-3, 100, args.steps)
    rng = np.random.default_rng(args.seed)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        inputs, targets = lm_batch(train_rows[rng.integers(0, len(train_rows), 64)], LENGTH)
        loss = optimize(F.cross_entropy(model(inputs), targets), optimizer, schedule, 1.0)
        if step % 100 == 0:
            model.eval()
            accuracy = sort_accuracy(model, heldout, LENGTH)
            model.train()
            print(f"step {step:4d}  loss {loss:.4f}  held-out exact {accuracy:.1%}  {time.perf_counter() - start:5.1f}s",
                  flush=True)
    model.eval()
    accuracy = sort_accuracy(model, heldout, LENGTH)
    prompts = heldout[:, :LENGTH + 2]
    for row in model.generate(prompts[:3], LENGTH):
        digits = row - DIGIT0
        print(f"  {' '.join(map(str, digits[1:LENGTH + 1]))}  ->  {' '.join(map(str, digits[LENGTH + 2:]))}")
    # longer generations show the cache's O(t) per step against the uncached O(t^2)
    long_model = DecoderOnly(DecoderOnlyConfig(vocab=DIGIT0 + 3, max_len=136))
    speeds = {}
    for name, m, steps in (("sort (6 tokens)", model, LENGTH), ("128 tokens", long_model, 128)):
        cached = tokens_per_second(m, prompts[:64], steps, True)
        uncached = tokens_per_second(m, prompts[:64], steps, False)
        speeds[name] = {"cached_tokens_per_s": cached, "uncached_tokens_per_s": uncached, "speedup": cached / uncached}
        print(f"generation, {name}, batch 64: {cached:8.0f} tokens/s with the key/value cache, "
              f"{uncached:8.0f} without ({cached / uncached:.1f}x)")
    print(f"held-out exact match: {accuracy:.1%} ({len(heldout)} sequences never seen in training)")
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump({"heldout_exact_match": accuracy, "steps": args.steps, "generation": speeds}, f, indent=1)
    return accuracy, speeds


if __name__ == "__main__":
    main()
