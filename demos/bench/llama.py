"""The Llama-style step against the GPT-2-style step of the same width.

    python -m demos.bench.llama [--threads 1] [--rounds 9] [--steps 6] [--json out.json]

Builds gpt_config's and llama_config's GPT at nanoGPT's CPU size (4 layers, 4 heads, 128
wide, context 64, batch 12; the Llama's d_ff by its 8/3 rule), and times one training step
(forward, backward, clipping, AdamW) of each on one fixed batch, interleaved in rounds in
one process: each round times `steps` steps of one, then of the other, and the ratio is the
median of the rounds' ratios (each round sees the load of a shared machine on both sides;
the medians of the rounds alone can move a good deal from one minute to the next).  Also
prints, per model, where a step spends its time that the other does not: the ops that
exist only in one of them (RMSNorm, SiLU, RoPE against LayerNorm, GELU), from a profile
of a few more steps.
"""

import cProfile
import pstats

from demos._flags import a_file_to_write, command_line, integer_at_least
from demos._results import write_json
from demos.bench.attention import median_ms
from demos.bench._threads import use_threads

VOCAB = 101                       # the default corpus's vocabulary size
ARCH_OPS = ("RMSNormFn", "SiLU", "RotaryEmbeddingFn", "LayerNormFn", "GELUFn", "Mul", "Split", "Cat")


def step_of(arch, cfg):
    """(one training step on a fixed batch, the model) for `arch` ("gpt2" or "llama")."""
    import numpy as np

    from autograd import manual_seed
    from transformer.families.decoder_only import DecoderOnly, gpt_config, llama_config
    from transformer.training.lm import step_functions

    manual_seed(cfg.seed)
    model = DecoderOnly({"gpt2": gpt_config, "llama": llama_config}[arch](VOCAB, cfg.block_size))
    step = step_functions(model, cfg)[0]
    rng = np.random.default_rng(0)
    x, y = (rng.integers(0, VOCAB, (cfg.batch_size, cfg.block_size)) for _ in range(2))
    return (lambda: step(x, y, cfg.lr)), model


def op_seconds(fn, steps):
    """{op name: ms per step in its forward and backward, with what they call} over `steps`
    profiled steps, for the ops of ARCH_OPS."""
    from autograd import ops
    where = {}                                                 # (file, line, name) of each method -> op
    for name in ARCH_OPS:
        for method in ("forward", "backward"):
            code = getattr(getattr(ops, name), method).__code__
            where[(code.co_filename, code.co_firstlineno, code.co_name)] = name
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(steps):
        fn()
    profile.disable()
    ms = {}
    for key, (_, _, _, cumulative, _) in pstats.Stats(profile).stats.items():
        if key in where:
            ms[where[key]] = ms.get(where[key], 0.0) + cumulative / steps * 1e3
    return ms


def main(argv=None):
    parser = command_line("demos.bench.llama", __doc__)
    parser.add_argument("--threads", type=integer_at_least(1), default=1)
    parser.add_argument("--rounds", type=integer_at_least(1), default=9)
    parser.add_argument("--steps", type=integer_at_least(1), default=6, help="steps of each model per round")
    parser.add_argument("--json", type=a_file_to_write)
    args = parser.parse_args(argv)
    use_threads(args.threads)
    import numpy as np

    from transformer.training.lm import LMTrainConfig

    cfg = LMTrainConfig()
    steps, params = {}, {}
    for arch in ("gpt2", "llama"):
        steps[arch], model = step_of(arch, cfg)
        params[arch] = sum(p.data.size for p in model.parameters())
        for _ in range(3):                                     # warm-up: compilation, caches
            steps[arch]()
    rounds = {arch: [] for arch in steps}
    for _ in range(args.rounds):
        for arch, step in steps.items():
            rounds[arch].append(median_ms(step, args.steps))
    ratio = float(np.median([a / b for a, b in zip(rounds["llama"], rounds["gpt2"])]))
    result = {"threads": args.threads, "parameters": params, "rounds_ms": rounds,
              "median_ms": {arch: float(np.median(times)) for arch, times in rounds.items()},
              "llama_over_gpt2": ratio,
              "op_ms_per_step": {arch: op_seconds(step, args.steps) for arch, step in steps.items()}}
    print(f"parameters: GPT-2-style {params['gpt2']:,}, Llama-style {params['llama']:,}")
    print(f"median step: GPT-2-style {result['median_ms']['gpt2']:.1f} ms, Llama-style "
          f"{result['median_ms']['llama']:.1f} ms; Llama / GPT-2 (median of {args.rounds} rounds' ratios): {ratio:.2f}")
    for arch, ops_ms in result["op_ms_per_step"].items():
        print(f"  {arch}: " + ", ".join(f"{name} {ms:.1f} ms" for name, ms in sorted(ops_ms.items())))
    if args.json:
        write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
