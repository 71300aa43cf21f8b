"""Milliseconds per training step (forward, backward, optimizer), ours against PyTorch.

    python -m demos.bench.train [--size S|M|L] [--threads 1] [--steps 60] [--profile] [--json out.json]
    python -m demos.bench.train --model gpt [--threads 1] [--recipe]
    python -m demos.bench.train --model llama [--kv-heads 2] [--threads 1] [--recipe]
    either with --attention fused [composed]: our attention (two kinds: both timed, interleaved)
    either with --cpu NAME: the kernels compiled for another CPU's tuning and features (demos/bench/cpu.py)
    either with --clock cpu: steps timed in this thread's CPU time, not wall time (demos/bench/_clock.py)

--model transformer (the default): the encoder-decoder on the reverse task, post-norm,
dropout 0, Adam, at one of three sizes (d_model, heads, d_ff, layers per side, batch, length):
S (the reference) 64, 4, 128, 2, 64, 10;  M 128, 4, 512, 3, 32, 32;  L 256, 8, 1024, 4, 32, 64.
Ours runs the composed attention (the main demo's; at these short sequences it is faster
than our fused one) unless --attention fused; PyTorch's nn.Transformer calls its fused
scaled_dot_product_attention.  It also counts the step's matmul FLOPs (attention's
products included, as the composed attention runs them) and prints the time numpy's BLAS
would need for them at its large-matrix rate (measured in the same run): the "BLAS limit".
--model gpt: nanoGPT's CPU recipe size (4 layers, 4 heads, 128 wide, context 64, batch 12,
exact GELU, no biases, tied embeddings), AdamW with clipping, both engines starting from
the same weights, ours with the fused attention (as PyTorch's nanoGPT) unless --attention
composed, in 9 short interleaved
rounds; it also prints the largest logit difference between them.  --recipe
then trains both for the whole recipe (2000 iterations) on the same corpus, batches and
seed, and compares validation losses and wall times.
--model llama: the same, with llama_config's GPT (RMSNorm, SwiGLU, RoPE, untied output; with
--kv-heads K, grouped-query attention of K key/value heads) against transformers'
LlamaForCausalLM holding the same weights (the optional extra's transformers), its attention
PyTorch's scaled_dot_product_attention.

Where PyTorch is installed (the optional `bench` extra) the same model in PyTorch is timed
in the same run, rounds of ours and theirs interleaved.  --profile prints where our step
spends its time.
"""

import os

from demos._flags import a_file_to_write, a_path, command_line, counted, integer_at_least
from demos._results import write_json
from demos.bench import _clock, cut_from_this_copy, need_engine_room
from demos.bench._threads import use_threads
from demos.bench.cpu import TARGETS, machine_record, ran_in_child

TORCH_GPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_gpt.py")


def parse_args(argv=None):
    parser = command_line("demos.bench.train", __doc__)
    parser.add_argument("--model", choices=["transformer", "gpt", "llama"], default="transformer",
                        help="(default: transformer)")
    parser.add_argument("--kv-heads", type=integer_at_least(1),
                        help="--model llama: key/value heads of grouped-query attention (default: 4, the heads)")
    parser.add_argument("--recipe", action="store_true",
                        help="--model gpt or llama: also train both engines for the whole recipe")
    parser.add_argument("--data", type=a_path,
                        help="--recipe: a UTF-8 text file (default: the standard library's docstrings)")
    parser.add_argument("--attention", choices=["fused", "composed"], nargs="+",
                        help="our attention (default: fused for the GPT, composed for the transformer; PyTorch's is "
                             "its fused scaled_dot_product_attention); two kinds time our step with each, "
                             "interleaved, the first for --recipe")
    parser.add_argument("--size", choices=sorted(SIZES), help="--model transformer: the model's size (default: S)")
    parser.add_argument("--threads", type=integer_at_least(1), default=1, help="(default: 1)")
    parser.add_argument("--steps", type=integer_at_least(3), default=60,
                        help="how many steps to time (default: 60): the transformer's N in 3 interleaved rounds "
                             "of N / 3 each; the GPT's 9 rounds of N / 3 (3N in all)")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--json", type=a_file_to_write)
    parser.add_argument("--cpu", choices=sorted(TARGETS), help="compile the kernels for this CPU's tuning and features")
    parser.add_argument("--clock", choices=sorted(_clock.CLOCKS), default="wall",
                        help="time steps in wall time or in this thread's CPU time (demos/bench/_clock.py; "
                             "default: wall)")
    args = parser.parse_args(argv)
    refuse_misplaced_flags(parser, args)
    args.size = args.size or "S"
    args.attention = args.attention or [DEFAULT_ATTENTION[args.model]]
    return args


def refuse_misplaced_flags(parser, args):
    """One line and exit status 2, before anything is timed, for a flag the chosen model
    does not read, a --data file that is not there, or more threads than cores."""
    gpt = args.model in ("gpt", "llama")
    for flag, given, read, owner in (("--size", args.size is not None, not gpt, "--model transformer"),
                                     ("--recipe", args.recipe, gpt, "--model gpt or llama"),
                                     ("--data", args.data is not None, gpt and args.recipe, "--model gpt --recipe"),
                                     ("--kv-heads", args.kv_heads is not None, args.model == "llama", "--model llama")):
        if given and not read:
            parser.error(f"{flag} is for {owner}")
    if args.data is not None and not os.path.isfile(args.data):
        parser.error(f"--data {args.data}: no such file")
    if args.threads > (os.cpu_count() or 1):
        parser.error(f"--threads {args.threads}: this machine has {os.cpu_count()} cores (more threads would time "
                     "the engines fighting over them)")


DEFAULT_ATTENTION = {"gpt": "fused", "llama": "fused", "transformer": "composed"}  # as demos.gpt and demos.train train them


SIZES = {   # name: (model, batch, length)
    "S": (dict(d_model=64, num_heads=4, d_ff=128, num_encoder_layers=2, num_decoder_layers=2), 64, 10),
    "M": (dict(d_model=128, num_heads=4, d_ff=512, num_encoder_layers=3, num_decoder_layers=3), 32, 32),
    "L": (dict(d_model=256, num_heads=8, d_ff=1024, num_encoder_layers=4, num_decoder_layers=4), 32, 64),
}
SYMBOLS = 10


def ours(size, attention="composed"):
    """One training step of our Transformer at `size`, its attention run as `attention`
    ("fused" or "composed"), as a function (its loss as a float)."""
    from autograd import manual_seed
    from nn import functional as F
    from nn.optim import Adam
    from transformer.data import tasks
    from transformer.encoder_decoder import Transformer, TransformerConfig

    config, batch_size, length = SIZES[size]
    manual_seed(0)
    vocab = tasks.vocab_size(SYMBOLS)
    model = Transformer(TransformerConfig(src_vocab=vocab, tgt_vocab=vocab, max_len=length + 2, dropout=0.0,
                                        attention=attention, **config))
    optimizer = Adam(model.parameters(), lr=1e-3)
    batch = tasks.heldout_set("reverse", batch_size, length, SYMBOLS, seed=0)

    def step():
        logits = model(batch.src, batch.tgt_in)
        loss = F.cross_entropy(logits, batch.tgt_out, ignore_index=tasks.PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def pytorch(size):
    """The same model, data and optimizer in PyTorch, as a step function; None without PyTorch."""
    try:
        import torch
    except ImportError:
        return None
    import numpy as np

    from transformer.data import tasks
    from transformer.masks import causal_mask

    config, batch_size, length = SIZES[size]
    torch.manual_seed(0)
    vocab = tasks.vocab_size(SYMBOLS)
    d = config["d_model"]

    class TorchModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.src_embed = torch.nn.Embedding(vocab, d)
            self.tgt_embed = torch.nn.Embedding(vocab, d)
            self.core = torch.nn.Transformer(d, config["num_heads"], config["num_encoder_layers"],
                                             config["num_decoder_layers"], config["d_ff"], dropout=0.0,
                                             batch_first=True)
            self.out = torch.nn.Linear(d, vocab)
            self.register_buffer("pe", torch.zeros(length + 2, d))

        def forward(self, src, tgt_in):
            causal = torch.from_numpy(~causal_mask(tgt_in.shape[1]))   # torch's True means masked: ours negated
            h = self.core(self.src_embed(src) * d ** 0.5 + self.pe[: src.shape[1]],
                          self.tgt_embed(tgt_in) * d ** 0.5 + self.pe[: tgt_in.shape[1]],
                          tgt_mask=causal, src_key_padding_mask=src == 0, tgt_key_padding_mask=tgt_in == 0,
                          memory_key_padding_mask=src == 0)
            return self.out(h)

    model = TorchModel()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batch = tasks.heldout_set("reverse", batch_size, length, SYMBOLS, seed=0)
    src, tgt_in, tgt_out = (torch.from_numpy(np.asarray(a)) for a in (batch.src, batch.tgt_in, batch.tgt_out))

    def step():
        logits = model(src, tgt_in)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), tgt_out.reshape(-1), ignore_index=0)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.item()
    return step


def interleaved_medians(steps_by_engine, steps, rounds=3):
    """Median seconds per step of each engine, rounds of each engine interleaved (so that a
    change in the machine's load falls on all of them); each round's median is kept."""
    for step in steps_by_engine.values():
        for _ in range(5):    # warm-up: compilation, caches, allocator
            step()
    by_round = {name: [] for name in steps_by_engine}
    for _ in range(rounds):
        for name, step in steps_by_engine.items():
            by_round[name].append(_median(step, steps // rounds))
    return {name: sorted(times)[len(times) // 2] for name, times in by_round.items()}, by_round


def ratio_of_rounds(result, engine="ours"):
    """engine / PyTorch as the median of the interleaved rounds' ratios: a load that falls
    on one round then moves neither engine's figure alone."""
    ratios = sorted(o / p for o, p in zip(result[f"{engine}_rounds_ms"], result["pytorch_rounds_ms"]))
    return ratios[len(ratios) // 2]


def unsteady(rounds_ms):
    """A warning when some engine's slowest round took over 1.5 times its fastest (the
    machine's load moved during the run: its ratios are not to be trusted), else None."""
    spread = {name: max(times) / min(times) for name, times in rounds_ms.items() if min(times) > 0}
    worst = max(spread, key=spread.get)
    if spread[worst] > 1.5:
        return (f"warning: {worst}'s rounds differ {spread[worst]:.1f}-fold: the machine's load moved during the "
                "run; run again on a quiet machine, or time CPU time with --clock cpu")
    return None


def _median(step, steps):
    """Median seconds of step() over `steps` calls, on the benchmark's clock (_clock.py)."""
    times = []
    for _ in range(steps):
        start = _clock.now()
        step()
        times.append(_clock.now() - start)
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
    need_engine_room("demos.bench.train")
    if args.model == "gpt" and (cut := cut_from_this_copy(TORCH_GPT)):
        raise SystemExit(f"bench_train --model gpt compares with a PyTorch GPT (demos/bench/torch_gpt.py), which needs "
                         f"the teacher's project: this student copy cuts it, as it answers exercises {', '.join(cut)}")
    if ran_in_child(args.cpu, "demos.bench.train", argv):
        return None
    _clock.use(args.clock, args.threads)
    torch = use_threads(args.threads)
    from autograd import kernels
    from autograd.engine_room.warmup import warmup
    kernels.prepare()                   # as in training: the kernels ready, freed memory kept
    warmup()
    if args.model in ("gpt", "llama"):
        if torch is None:
            raise SystemExit(f"bench_train --model {args.model} compares with PyTorch: pip install -e '.[bench]'")
        return gpt(args)
    from demos.bench.gemm_calls import blas_rate, record_matmuls
    kinds = tuple(dict.fromkeys(args.attention))
    engines = {"ours": ours(args.size, kinds[0])} | {kind: ours(args.size, kind) for kind in kinds[1:]}
    torch_step = pytorch(args.size)
    if torch_step is not None:
        engines["pytorch"] = torch_step
    medians, rounds = interleaved_medians(engines, args.steps)
    calls = record_matmuls(ours(args.size))     # the composed attention: its products are matmuls
    gflop = sum(call["flops"] * call["count"] for call in calls) / 1e9
    rate = blas_rate()
    config, batch_size, length = SIZES[args.size]
    result = {"machine": machine_record(), "size": args.size, "threads": args.threads, "clock": args.clock,
              "attention": kinds[0], "matmul_gflop": gflop, "blas_gflops": rate, "blas_limit_ms": gflop / rate * 1e3}
    for engine, seconds in rounds.items():
        result[f"{engine}_ms"], result[f"{engine}_rounds_ms"] = medians[engine] * 1e3, [t * 1e3 for t in seconds]
    print(f"machine: {result['machine']}")
    print(f"size {args.size} ({', '.join(f'{k} {v}' for k, v in config.items())}, batch {batch_size}, length "
          f"{length}), {args.threads} thread(s), median of {args.steps} steps in 3 interleaved rounds, {args.clock} time")
    print(f"  matmul work: {gflop:.2f} GFLOP per step; at numpy's large-matrix rate ({rate:.0f} GFLOP/s) "
          f"that is {result['blas_limit_ms']:.1f} ms (the BLAS limit)")
    for engine, kind in [("ours", kinds[0]), *((kind, kind) for kind in kinds[1:])]:
        print(f"  ours, {kind + ' attention:':<19} {result[f'{engine}_ms']:7.2f} ms/step", end="")
        if "pytorch" in medians:
            result[f"{kind}_ratio_vs_pytorch"] = ratio = ratio_of_rounds(result, engine)
            print(f"   ours / PyTorch = {ratio:.2f}x (median of the rounds' ratios)", end="")
        print()
    if "pytorch" in medians:
        result["ratio_vs_pytorch"] = result[f"{kinds[0]}_ratio_vs_pytorch"]
        print(f"  PyTorch CPU:               {result['pytorch_ms']:7.2f} ms/step (its scaled_dot_product_attention)")
    if warning := unsteady({engine: result[f"{engine}_rounds_ms"] for engine in rounds}):
        print(warning)
    if args.profile:
        profile(engines["ours"])
    if args.json:
        write_json(args.json, result)
    return result


def gpt(args):
    from demos.bench import gpt as bench_gpt
    arch = "llama" if args.model == "llama" else "gpt2"
    result = bench_gpt.step_times(args.steps, profile=args.profile, attention=tuple(dict.fromkeys(args.attention)),
                                  arch=arch, kv_heads=args.kv_heads)
    result["threads"], result["machine"], result["clock"] = args.threads, machine_record(), args.clock
    result["model"], result["kv_heads"] = args.model, args.kv_heads
    print(f"machine: {result['machine']}")
    model = {"gpt2": "GPT", "llama": f"Llama-style GPT ({counted(args.kv_heads or 4, 'key/value head')})"}[arch]
    theirs = {"gpt2": "PyTorch's", "llama": "transformers' LlamaForCausalLM's"}[arch]
    print(f"{model} at nanoGPT's CPU recipe size (4 layers, 4 heads, 128 wide, context 64, batch 12), "
          f"{args.threads} thread(s), 9 interleaved rounds of {max(args.steps // 3, 1)} steps (medians, {args.clock} "
          f"time); {theirs} attention is PyTorch's fused scaled_dot_product_attention")
    print(f"  largest logit difference between the engines (same weights): {result['logits_max_abs_diff']:.1e}")
    engines = [("ours", f"ours, {result['attention']} attention")]
    engines += [(kind, f"ours, {kind} attention") for kind in args.attention[1:] if kind != result["attention"]]
    for engine, label in engines + [("pytorch", {"gpt2": "PyTorch CPU", "llama": "transformers CPU"}[arch])]:
        rounds = ", ".join(f"{ms:.1f}" for ms in result[f"{engine}_ms"])
        print(f"  {label:<25} {result[f'{engine}_median_ms']:7.2f} ms/step ({rounds}), "
              f"{result[f'{engine}_tokens_per_s']:8.0f} tokens/s")
    print(f"  ours / PyTorch = {result['ratio_vs_pytorch']:.2f}x (median of the rounds' ratios)")
    for kind, _ in engines[1:]:
        print(f"  ours with {kind} attention / PyTorch = {result[f'{kind}_ratio_vs_pytorch']:.2f}x;  "
              f"{result['attention']} / {kind} = {result[f'ours_vs_{kind}']:.2f}x")
    if warning := unsteady({engine: result[f"{engine}_ms"] for engine, _ in engines + [("pytorch", "")]}):
        print(warning)
    if args.recipe:
        result["recipe"] = runs = bench_gpt.recipe(args.data, attention=result["attention"], arch=arch,
                                                   kv_heads=args.kv_heads)
        print(f"\nafter the recipe: validation loss ours {runs['ours']['val_loss']:.4f} in {runs['ours']['seconds']:.0f} s, "
              f"PyTorch {runs['pytorch']['val_loss']:.4f} in {runs['pytorch']['seconds']:.0f} s "
              f"(difference {runs['val_loss_difference']:+.4f})")
    if args.json:
        write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
