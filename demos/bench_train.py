"""Milliseconds per training step (forward, backward, optimizer), ours against PyTorch.

    python -m demos.bench_train [--threads 1] [--steps 60] [--profile] [--json out.json]
    python -m demos.bench_train --model gpt [--threads 1] [--recipe]

--model transformer (the default): post-norm, d_model 64, 4 heads, d_ff 128, 2 encoder + 2
decoder layers, batch 64, length 10, dropout 0, Adam.
--model gpt: nanoGPT's CPU recipe size (4 layers, 4 heads, 128 wide, context 64, batch 12,
exact GELU, no biases, tied embeddings), AdamW with clipping, both engines starting from
the same weights; it also prints the largest logit difference between them.  --recipe
then trains both for the whole recipe (2000 iterations) on the same corpus, batches and
seed, and compares validation losses and wall times.

Where PyTorch is installed (the optional `bench` extra) the same model in PyTorch is timed
in the same run, rounds of ours and theirs interleaved.  --profile prints where our step
spends its time.
"""

import argparse
import json
import time

from demos._threads import use_threads


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["transformer", "gpt"], default="transformer")
    parser.add_argument("--recipe", action="store_true", help="--model gpt: also train both engines for the whole recipe")
    parser.add_argument("--data", help="--recipe: a UTF-8 text file (default: the standard library's docstrings)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json")
    return parser.parse_args(argv)


REFERENCE = dict(d_model=64, num_heads=4, d_ff=128, num_encoder_layers=2, num_decoder_layers=2, dropout=0.0)
BATCH, LENGTH, SYMBOLS = 64, 10, 10


def ours(steps):
    """Median seconds per training step of our Transformer, and a step function."""
    from autograd import manual_seed
    from nn import functional as F
    from nn.optim import Adam
    from transformer import tasks
    from transformer.model import Transformer, TransformerConfig

    manual_seed(0)
    vocab = tasks.vocab_size(SYMBOLS)
    model = Transformer(TransformerConfig(src_vocab=vocab, tgt_vocab=vocab, max_len=LENGTH + 2, **REFERENCE))
    optimizer = Adam(model.parameters(), lr=1e-3)
    batch = tasks.heldout_set("reverse", BATCH, LENGTH, SYMBOLS, seed=0)

    def step():
        logits = model(batch.src, batch.tgt_in)
        loss = F.cross_entropy(logits, batch.tgt_out, ignore_index=tasks.PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()
    return _median(step, steps), step


def pytorch(steps):
    """The same model, data and optimizer in PyTorch; None if PyTorch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    import numpy as np
    from transformer import tasks

    torch.manual_seed(0)
    vocab = tasks.vocab_size(SYMBOLS)
    d = REFERENCE["d_model"]

    class TorchModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.src_embed = torch.nn.Embedding(vocab, d)
            self.tgt_embed = torch.nn.Embedding(vocab, d)
            self.core = torch.nn.Transformer(d, REFERENCE["num_heads"], REFERENCE["num_encoder_layers"],
                                             REFERENCE["num_decoder_layers"], REFERENCE["d_ff"], dropout=0.0,
                                             batch_first=True)
            self.out = torch.nn.Linear(d, vocab)
            self.register_buffer("pe", torch.zeros(LENGTH + 2, d))

        def forward(self, src, tgt_in):
            causal = torch.nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])
            h = self.core(self.src_embed(src) * d ** 0.5 + self.pe[: src.shape[1]],
                          self.tgt_embed(tgt_in) * d ** 0.5 + self.pe[: tgt_in.shape[1]],
                          tgt_mask=causal, src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt_in == 0,
                          memory_key_padding_mask=src == 0)
            return self.out(h)

    model = TorchModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch = tasks.heldout_set("reverse", BATCH, LENGTH, SYMBOLS, seed=0)
    src, tgt_in, tgt_out = (torch.from_numpy(np.asarray(a)) for a in (batch.src, batch.tgt_in, batch.tgt_out))

    def step():
        logits = model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), tgt_out.reshape(-1), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()
    return _median(step, steps)


def _median(step, steps):
    for _ in range(5):   # warm-up: compilation, caches, allocator
        step()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]


def profile(step):
    import cProfile
    import pstats
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20):
        step()
    profiler.disable()
    print("where 20 steps spend their time (cumulative, top 25):")
    pstats.Stats(profiler).sort_stats("tottime").print_stats(25)


def main(argv=None):
    args = parse_args(argv)
    torch = use_threads(args.threads)
    from autograd import kernels
    from nn.allocator import keep_freed_memory
    keep_freed_memory()
    kernels.warmup()
    if args.model == "gpt":
        if torch is None:
            raise SystemExit("bench_train --model gpt compares with PyTorch: pip install -e '.[bench]'")
        return gpt(args)
    ours_s, step = ours(args.steps)
    result = {"threads": args.threads, "ours_ms": ours_s * 1e3}
    print(f"reference model, batch {BATCH}, length {LENGTH}, {args.threads} thread(s), median of {args.steps} steps")
    print(f"  ours (numba kernels): {ours_s * 1e3:7.2f} ms/step")
    torch_s = pytorch(args.steps)
    if torch_s is not None:
        result["pytorch_ms"] = torch_s * 1e3
        result["ratio_vs_pytorch"] = ours_s / torch_s
        print(f"  PyTorch CPU:          {torch_s * 1e3:7.2f} ms/step   ours / PyTorch = {ours_s / torch_s:.2f}x")
    if args.profile:
        profile(step)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


def gpt(args):
    from demos import bench_gpt
    result = bench_gpt.step_times(args.steps)
    result["threads"] = args.threads
    print(f"GPT at nanoGPT's CPU recipe size (4 layers, 4 heads, 128 wide, context 64, batch 12), "
          f"{args.threads} thread(s), median of {args.steps} steps, 3 interleaved rounds")
    print(f"  largest logit difference between the engines (same weights): {result['logits_max_abs_diff']:.1e}")
    for engine, label in (("ours", "ours (numba kernels)"), ("pytorch", "PyTorch CPU")):
        rounds = ", ".join(f"{ms:.1f}" for ms in result[f"{engine}_ms"])
        print(f"  {label:<21} {result[f'{engine}_median_ms']:7.2f} ms/step ({rounds}), "
              f"{result[f'{engine}_tokens_per_s']:8.0f} tokens/s")
    print(f"  ours / PyTorch = {result['ratio_vs_pytorch']:.2f}x")
    if args.recipe:
        result["recipe"] = runs = bench_gpt.recipe(args.data)
        print(f"\nafter the recipe: validation loss ours {runs['ours']['val_loss']:.4f} in {runs['ours']['seconds']:.0f} s, "
              f"PyTorch {runs['pytorch']['val_loss']:.4f} in {runs['pytorch']['seconds']:.0f} s "
              f"(difference {runs['val_loss_difference']:+.4f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
