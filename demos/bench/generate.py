"""Greedy generation of a model the size of SmolLM2-135M, ours against transformers, on this CPU.

    python -m demos.bench.generate [--threads 1] [--rounds 3] [--prompt 32] [--new 128] [--clock cpu] [--cpu NAME]
                                   [--json out.json]

Builds, with transformers and random weights (nothing is downloaded), a Llama of
SmolLM2-135M's shape: 30 layers, width 576, 9 query heads sharing 3 key/value heads,
vocabulary 49,152, tied embeddings, SwiGLU of 1,536; saves it weights-only in bfloat16, as
SmolLM2 ships, into a temporary folder (or --dir, kept); then

1. loads it with from_hf in a fresh process and reports the peak memory of the load
   over the float32 weights' bytes (on Linux the peak resident set, VmHWM, reset just
   before the load, minus what was resident then; elsewhere ru_maxrss's growth, after a
   tiny model's load has imported every module): the bf16 file is widened once, straight
   into the model;
2. times greedy generation with the key/value cache, `--new` tokens after a `--prompt`
   token prompt, ours (DecoderOnly.generate) and transformers' (LlamaForCausalLM.generate
   from the same folder, float32), interleaved in rounds in one process: the ratio is the
   median of the rounds' ratios of tokens per second;
3. says where our time goes per token: the vocabulary projection (out_proj: 576 x 49,152
   per token, timed), every Linear (its share of a profile), and the per-token Python
   overhead (the ops' Python, the cache, the decoding loop), measured as the time per token
   of the same number of layers at width 12, where the arithmetic is next to nothing.

Both sides produce the same tokens (checked).  --threads sets BLAS's, Numba's and PyTorch's
threads before they start; run it once per count.  --clock cpu (with --threads 1) times
this thread's CPU time, leaving out the time it waited for a core on a shared machine
(demos/bench/_clock.py).  --cpu NAME runs it all again in a child whose kernels are compiled
for another CPU's tuning and features, the baselines held to that CPU's instructions as
cpu.TARGETS says (demos/bench/cpu.py); the record's machine says what it compiled for.
"""

import cProfile
import json
import os
import pstats
import subprocess
import sys
import tempfile

from demos._flags import a_file_to_write, command_line, integer_at_least
from demos._results import write_json
from demos.bench import _clock, need_engine_room
from demos.bench._threads import use_threads
from demos.bench.cpu import TARGETS, machine_record, ran_in_child

PROG = "demos.bench.generate"
SMOLLM2_135M = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
                    num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192, rms_norm_eps=1e-5,
                    rope_theta=100000.0, tie_word_embeddings=True, bos_token_id=0, eos_token_id=0)
LOAD_PEAK = """
import json, os, resource, sys, tempfile
from transformer.families.decoder_only import DecoderOnly, llama_config
from transformer.training.huggingface import from_hf, save_hf
warm = tempfile.mkdtemp()
save_hf(DecoderOnly(llama_config(40, 16, 1, 4, 16, n_kv_head=2)), None, warm)
from_hf(warm)                               # every module a load imports, imported before the baseline

def kib(field):                             # a line of /proc/self/status, as 'VmHWM:  1234 kB'
    with open('/proc/self/status') as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ':'))

if os.path.exists('/proc/self/clear_refs'):  # Linux: the peak (VmHWM) reset to what is resident now
    with open('/proc/self/clear_refs', 'w') as refs:
        refs.write('5')
    before, peak = kib('VmRSS'), lambda: kib('VmHWM')
else:                                       # elsewhere the process's peak so far, which the load must exceed
    before, peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
model, _ = from_hf(sys.argv[1])
print(json.dumps({"peak_bytes": (peak() - before) * 1024, "weights_bytes": sum(p.data.nbytes for p in model.parameters())}))
"""

def build(folder, layers, seed=0):
    """SmolLM2-135M's shape (layers of it) with random weights, saved weights-only in bf16."""
    import torch
    import transformers
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(**{**SMOLLM2_135M, "num_hidden_layers": layers})
    transformers.LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(folder)


def load_peak(folder, threads):
    """{peak_bytes, weights_bytes} of from_hf(folder) in a fresh process."""
    env = {**os.environ, **{var: str(threads) for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                                          "NUMBA_NUM_THREADS")}}
    result = subprocess.run([sys.executable, "-c", LOAD_PEAK, folder], capture_output=True, text=True, env=env,
                            cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    if result.returncode:
        sys.exit(f"{PROG}: loading {folder} failed: {result.stderr.strip().splitlines()[-1]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def seconds(fn):
    start = _clock.now()
    out = fn()
    return _clock.now() - start, out


def where_time_goes(model, prompt, new, layers):
    """{part: ms per token} of our greedy generation: in total; in the vocabulary projection
    (model.out_proj, timed on its own); in every Linear (the share of LinearFn.forward in a
    profile, applied to the unprofiled total); and the per-token Python overhead, measured
    as the time per token of the same generation by a model of as many layers but width 12
    and 16 tokens, whose arithmetic is next to nothing."""
    from autograd import manual_seed
    from autograd.ops import LinearFn
    from transformer.families.decoder_only import DecoderOnly, llama_config
    spent = {"vocab": 0.0}
    projection = model.out_proj.forward

    def timed_projection(x):
        took, out = seconds(lambda: projection(x))
        spent["vocab"] += took
        return out
    model.out_proj.forward = timed_projection                     # an instance attribute, removed below
    total, _ = seconds(lambda: model.generate(prompt, new, temperature=0.0))
    del model.out_proj.forward
    profile = cProfile.Profile() if _clock.now is _clock.CLOCKS["wall"] else cProfile.Profile(_clock.now)  # (its clock)
    profiled, _ = seconds(lambda: profile.runcall(model.generate, prompt, new, temperature=0.0))
    code = LinearFn.forward.__code__
    linear = sum(cumulative for key, (_, _, _, cumulative, _) in pstats.Stats(profile).stats.items()
                 if key == (code.co_filename, code.co_firstlineno, code.co_name))
    manual_seed(0)
    tiny = DecoderOnly(llama_config(16, model.config.max_len, layers, 3, 12, n_kv_head=1, tie_weights=True)).eval()
    tiny.generate(prompt % 16, 2)                                  # warm-up
    overhead, _ = seconds(lambda: tiny.generate(prompt % 16, new, temperature=0.0))
    return {"total": total / new * 1e3, "vocabulary projection": spent["vocab"] / new * 1e3,
            "every Linear (the projection included)": linear / profiled * total / new * 1e3,
            "Python per token (the same layers at width 12)": overhead / new * 1e3}


def main(argv=None):
    parser = command_line(PROG, __doc__)
    parser.add_argument("--threads", type=integer_at_least(1), default=1)
    parser.add_argument("--rounds", type=integer_at_least(1), default=3)
    parser.add_argument("--prompt", type=integer_at_least(1), default=32, help="prompt tokens")
    parser.add_argument("--new", type=integer_at_least(1), default=128, help="tokens generated")
    parser.add_argument("--layers", type=integer_at_least(1), default=30, help="SmolLM2-135M has 30")
    parser.add_argument("--dir", help="a folder to build the model into (kept), or reuse if it holds one")
    parser.add_argument("--clock", choices=sorted(_clock.CLOCKS), default="wall",
                        help="time in wall time or in this thread's CPU time (demos/bench/_clock.py; --threads 1)")
    parser.add_argument("--cpu", choices=sorted(TARGETS), help="compile the kernels for this CPU's tuning and features")
    parser.add_argument("--json", type=a_file_to_write)
    args = parser.parse_args(argv)
    need_engine_room(PROG)
    if ran_in_child(args.cpu, PROG, argv):
        return None
    _clock.use(args.clock, args.threads)
    if args.threads > (os.cpu_count() or 1):
        sys.exit(f"{PROG}: --threads {args.threads} exceeds this machine's {os.cpu_count()} cores")
    torch = use_threads(args.threads)
    if torch is None:
        sys.exit(f"{PROG}: needs PyTorch and transformers (the bench extra) for the baseline and to build the model")
    import numpy as np
    import transformers

    from transformer.training.huggingface import from_hf
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()               # its "Loading weights" bar would cut our lines
    folder = args.dir or tempfile.mkdtemp(prefix="smollm2-shaped-")
    if not os.path.isfile(os.path.join(folder, "config.json")):
        build(folder, args.layers)
    memory = load_peak(folder, args.threads)
    ours, _ = from_hf(folder)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    prompt = np.random.default_rng(0).integers(0, SMOLLM2_135M["vocab_size"], (1, args.prompt))

    def ours_generate():
        return ours.generate(prompt, args.new, temperature=0.0)

    def theirs_generate():
        with torch.no_grad():
            return theirs.generate(torch.from_numpy(prompt), max_new_tokens=args.new, min_new_tokens=args.new,
                                   do_sample=False, use_cache=True, eos_token_id=None, pad_token_id=0).numpy()
    same = bool(np.array_equal(ours_generate(), theirs_generate()))            # and a warm-up of both
    rounds = {"ours": [], "transformers": []}
    for _ in range(args.rounds):
        for side, fn in (("ours", ours_generate), ("transformers", theirs_generate)):
            rounds[side].append(args.new / seconds(fn)[0])
    ratio = float(np.median([a / b for a, b in zip(rounds["ours"], rounds["transformers"])]))
    parts = where_time_goes(ours, prompt, args.new, args.layers)
    result = {"machine": machine_record(), "threads": args.threads, "clock": args.clock, "layers": args.layers, "prompt": args.prompt,
              "new": args.new,
              "load": memory | {"peak_over_float32_weights": memory["peak_bytes"] / memory["weights_bytes"]},
              "tokens_per_second_rounds": rounds,
              "median_tokens_per_second": {side: float(np.median(r)) for side, r in rounds.items()},
              "ours_over_transformers": ratio, "same_tokens": same, "ours_ms_per_token": parts}
    print(f"machine: {result['machine']}")
    print(f"model: SmolLM2-135M's shape, {args.layers} layers, {memory['weights_bytes'] / 2**20:.0f} MiB of float32 "
          f"weights (bf16 file); load peak {memory['peak_bytes'] / 2**20:.0f} MiB = "
          f"{result['load']['peak_over_float32_weights']:.2f}x the float32 weights")
    print(f"greedy, {args.prompt}-token prompt, {args.new} new tokens, {args.threads} thread(s), KV cache, "
          f"{args.clock} time: "
          + ", ".join(f"{side} {tps:.1f} tokens/s" for side, tps in result["median_tokens_per_second"].items())
          + f"; ours / transformers (median of {args.rounds} rounds' ratios): {ratio:.2f}; same tokens: {same}")
    print("ours, ms per token: " + "; ".join(f"{part} {ms:.1f}" for part, ms in result["ours_ms_per_token"].items()))
    if args.json:
        write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
