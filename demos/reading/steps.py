"""The calls a reading edition traces: one training step of nanoGPT's small GPT, one of the
main demo's encoder-decoder (demos.train --task reverse), the scalar engine's backward
through a neuron, and the loops tier's kernels in a small GPT step.

The tensor steps run on the numpy tier of the kernels (AUTOGRAD_KERNELS=numpy): each kernel is
its one-line numpy definition (autograd/kernels/reference.py), which is what a reader
wants on one page, and the full-size step takes seconds.  The loops tier would run its
kernels as Python with NUMBA_DISABLE_JIT=1, about 4 GFLOP through Python loops: an hour
for one step of this size (its page traces them in a small step).  Attention is composed (matmul, masked_fill, softmax, matmul),
the ops a learner steps through, not the fused op.

A traced step is an early one (the second), so its model is untrained and attends almost
evenly; the heatmaps a page draws are the same model's after TRAINED_STEPS steps of the same
seeded run instead, trained on the kernels the process chose (seconds on the engine room's).
"""

import collections
import dataclasses
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

from autograd import kernels
from demos.reading.listing import definition, is_part
from demos.reading.trace import PROJECT, Trace

DEFAULT_TIER = kernels.tier()                # the kernels this process chose, before a page chooses numpy's

ALPHABET = "\n" + "".join(map(chr, range(32, 127)))     # the GPT's characters: a newline and printable ASCII
ATTENTION = ("transformer/attention.py", "scaled_dot_product_attention", "weights")
LOOPS = "autograd/kernels/loops.py"
SMALL_GPT = "--layers 1 --heads 2 --d-model 16 --block-size 8 --batch-size 2"     # demos/bench/lines.py's GPT
SCRATCH = "--out runs/scratch"    # every command a page prints writes there, never over a run of the learner's
GPT_QUICK = "--max-iters 1 --eval-iters 1 --sample-tokens 1"     # demos.gpt ends seconds after its one step
TRAIN_QUICK = "--steps 1 --beam-examples 1"                       # demos.train likewise
HEATMAP_POSITIONS = 24     # the GPT's heatmaps: the first positions of 64, each wide enough to name its character
TRAINED_STEPS = 300          # the heatmaps' models: this many seeded steps, enough for their heads to specialise
Code = collections.namedtuple("Code", "co_name co_firstlineno co_qualname")      # a code object, as JSON brings it
TIERS_NOTE = ("Attention is composed (matmul, masked_fill, softmax, matmul: the ops to step through), not the one "
              "fused op `demos.gpt` runs by default, and each kernel is its numpy definition "
              "(`AUTOGRAD_KERNELS=numpy`, autograd/kernels/reference.py): the loops tier, which a debugger steps "
              "into, computes the same in plain loops, too slowly at this size to trace; "
              "[its own page](loops_tier.md) shows its kernels in a small step")
TRAINING_PHASES = ("config", "model", "forward", "plumbing", "step", "backward", "optimizer")   # a page's order
TRAINING_PINS = (("nn/recipe.py", "optimize", "step"), ("nn/optim.py", "Optimizer.zero_grad", "optimizer"),
                 ("nn/optim.py", "Optimizer._params", "optimizer"), ("nn/module.py", "Module.__call__", "forward"),
                 ("transformer/training/lm.py", "LMTrainConfig.lr_at", "step"),
                 ("nn/schedule.py", "warmup_cosine", "step"), ("nn/schedule.py", "warmup_cosine.<locals>.f", "step"))


@dataclasses.dataclass
class Step:
    """A traced call and what the page says of it."""
    name: str                # the page's file name
    title: str
    intro: str               # Markdown: what ran, in two or three sentences
    about: str               # Markdown: how it was traced (the kernels, the data), for the page's end
    phases: tuple            # the reading order's phases
    trace: Trace
    debug: str               # the demo (and its arguments) demos.debug runs to stop in these functions
    environment: str         # the environment the debugger command needs to run what the page shows
    heatmap_labels: tuple = ()     # what each watched call of the attention is (a layer, a kind)
    heatmaps: dict = None          # {watched key: [weights, ...]} to draw (None: the trace's own, trace.watched)
    heatmap_note: str = ""         # what the heatmaps show, when not the traced step's own weights
    heatmap_axes: list = None      # each watched call's (query tokens, key tokens) to name the heatmaps' axes
    graph: object = None           # the scalar page's output Value, whose graph is drawn


def gpt_step():
    """Trace the configuration and the second training step (the first is a warm-up: what
    only a first step does is not the step) of gpt_config's model, composed attention, on a
    batch of the text; its heatmaps are those of the same GPT trained TRAINED_STEPS steps."""
    from autograd import manual_seed
    from transformer.families.decoder_only import DecoderOnly, gpt_config
    from transformer.training.lm import LMJob, LMTrainConfig, decay_groups, step_functions

    data = text_data(LMTrainConfig.block_size)
    tokens, heatmaps = trained_attention(LMTrainConfig(), data)
    kernels.use_tier("numpy")
    trace = Trace(phases=(("transformer/families/decoder_only.py", "DecoderOnly.forward", "forward"),
                          ("autograd/tensor.py", "Tensor.backward", "backward"),
                          ("nn/optim.py", "clip_grad_norm_", "optimizer")),
                  pinned=TRAINING_PINS,
                  watch=(ATTENTION,))
    cfg, config = trace.record("config", lambda: (LMTrainConfig(), gpt_config(len(ALPHABET), attention="composed")))
    manual_seed(cfg.seed)
    model = built(trace, DecoderOnly, config)
    job = LMJob(data, *step_functions(model, cfg)[:2], cfg)
    trace.record("step", decay_groups, model, cfg.weight_decay)    # AdamW's groups, as step_functions made them
    job.step(1)
    trace.watched.clear()
    trace.record("step", job.step, 2)
    trace.record("step", cfg.lr_at, cfg.max_iters // 2)      # the schedule past its warm-up: both its branches run
    trace.record("step", job.evaluate, 2)
    intro = (f"One training step of the GPT that `python -m demos.gpt` trains (nanoGPT's CPU recipe: "
             f"{config.num_layers} layers, {config.num_heads} heads, {config.d_model} wide, context {cfg.block_size}, "
             f"batch {cfg.batch_size}), as the code ran it: its configuration, the model (embeddings, blocks, "
             "attention, MLP), the step (a batch, the learning rate's schedule, the evaluation), the loss, the "
             "backward pass and AdamW's update, in that order ([notebook 5](../../notebooks/05_gpt_on_text.py) "
             "writes the same loop out on one page, nanoGPT's way, and checks it gives these functions' losses bit "
             f"for bit).\n\n{TIERS_NOTE}. Its text is kept to "
             f"{len(ALPHABET)} characters (printable ASCII and a newline), so that every Python gives the same shapes: "
             f"a shape ending in {len(ALPHABET)} is the vocabulary (`demos.gpt` keeps every character of its text, so "
             "its vocabulary is a few larger).")
    about = ("The step is the second of a seeded run (the first is a warm-up) on the standard library's docstrings, "
             f"and its evaluation the recipe's: {cfg.eval_iters} batches of each split. The learning rate's schedule "
             f"is also traced at iteration {cfg.max_iters // 2}, past its warm-up, so that its cosine decay shows as run, "
             "and `decay_groups`, with which `step_functions` gave AdamW its parameter groups before the first step.")
    note = (f"The heatmaps are the weights of the same GPT after {TRAINED_STEPS} steps of the same seeded run (on "
            "the default kernels), not of the step traced here: at its second step the model is untrained and "
            f"attends almost evenly. They are for the first {HEATMAP_POSITIONS} positions of one sequence of the "
            f"validation text (of {cfg.block_size}: under the causal mask no query attends past them, so their rows "
            "are whole); ⏎ is a newline, ␣ a space.")
    return Step("gpt_step", "One GPT training step", intro, about, TRAINING_PHASES + ("checks",), trace,
                f"demos.gpt --attention composed {GPT_QUICK} {SCRATCH}", "AUTOGRAD_KERNELS=numpy",
                tuple(f"layer {n}" for n in range(config.num_layers)), heatmaps={ATTENTION: heatmaps},
                heatmap_note=note, heatmap_axes=[(tokens, tokens)] * config.num_layers)


def built(trace, make, config):
    """make(config), the model, its construction traced apart: the constructors it ran (is_part)
    are added to `trace` in phase "model", with their lines and shapes, and nothing else of the
    construction is (nn.Module's bookkeeping, which the step's own forward pass enters too)."""
    construction = Trace()
    model = construction.record("model", make, config)
    for code, (path, _) in construction.functions.items():
        if is_part(path, code.co_name):
            first, last = code.co_firstlineno, definition(path, code.co_firstlineno).end_lineno
            trace.functions[code] = (path, "model")
            trace.lines.setdefault(path, set()).update(n for n in construction.lines.get(path, ()) if first <= n <= last)
            trace.shapes.update({(where, start): seen for (where, start), seen in construction.shapes.items()
                                 if where == path and first <= start <= last})
    return model


def text_data(block_size):
    """The standard library's docstrings (demos.gpt's default text) kept to ALPHABET, as a
    TextDataset of that fixed vocabulary: the same shapes on every Python."""
    from transformer.data.text import CharVocab, TextDataset, stdlib_docstrings
    allowed = set(ALPHABET)
    return TextDataset("".join(c for c in stdlib_docstrings() if c in allowed), block_size, vocab=CharVocab(ALPHABET))


def trained_attention(cfg, data):
    """(the characters of the first HEATMAP_POSITIONS positions of a validation sequence, as
    shown (⏎ a newline, ␣ a space), [each layer's attention weights on them]) of gpt_config's
    GPT after TRAINED_STEPS seeded steps of nanoGPT's recipe on `data`."""
    from autograd import manual_seed
    from transformer.families.decoder_only import DecoderOnly, gpt_config
    from transformer.training.lm import step_functions

    manual_seed(cfg.seed)
    model = DecoderOnly(gpt_config(len(ALPHABET), attention="composed"))
    step = step_functions(model, cfg)[0]
    rng = np.random.default_rng(cfg.seed)
    tokens = data.batch("val", 1, np.random.default_rng(cfg.seed))[0]
    weights = attention_after_training(model, lambda n: step(*data.batch("train", cfg.batch_size, rng), cfg.lr_at(n)),
                                       lambda: model(tokens))
    first = tokens[:, :HEATMAP_POSITIONS]                             # causal: their queries see no later key
    return ([{"\n": "⏎", " ": "␣"}.get(ALPHABET[t], ALPHABET[t]) for t in first[0]],
            [np.asarray(getattr(w, "data", w))[..., :HEATMAP_POSITIONS, :HEATMAP_POSITIONS] for w in weights])


def attention_after_training(model, train, forward):
    """[the weights of each attention call forward() makes] after train(n) for n < TRAINED_STEPS,
    on the kernels the process chose at the start (the engine room's, unless told otherwise);
    forward runs in eval mode, without gradients."""
    from autograd import no_grad

    chosen = kernels.tier()
    kernels.use_tier(DEFAULT_TIER)
    try:
        for number in range(TRAINED_STEPS):
            train(number)
        watcher = Trace(watch=(ATTENTION,))
        model.eval()
        with no_grad():
            watcher.record("forward", forward)
    finally:
        kernels.use_tier(chosen)
    return watcher.watched[ATTENTION]


def loops_tier():
    """Trace the loops tier's kernels as they run, with the JIT off, in a small GPT step
    (demos/bench/lines.py's), in a subprocess (the JIT is off from before Numba's import): their
    functions, their lines, no shapes (the small step's are not the GPT page's)."""
    trace = Trace()
    with tempfile.TemporaryDirectory() as folder:
        found = os.path.join(folder, "loops.json")
        result = subprocess.run([sys.executable, "-c", "import sys; from demos.reading.steps import trace_loops_tier; "
                                 "trace_loops_tier(sys.argv[1])", found], cwd=PROJECT, capture_output=True, text=True,
                                env=dict(os.environ, NUMBA_DISABLE_JIT="1", AUTOGRAD_KERNELS="loops"), timeout=600)
        if result.returncode:
            raise RuntimeError(f"tracing the loops tier failed: {result.stderr.strip().splitlines()[-1]}")
        with open(found) as f:
            functions, lines = json.load(f)
    for name, first, qualname in functions:
        trace.functions[Code(name, first, qualname)] = (LOOPS, "loops")
    trace.lines[LOOPS] = set(lines)
    intro = ("The kernels of the loops tier (autograd/kernels/loops.py) as one step of a small GPT runs them (1 layer, "
             "2 heads, 16 wide, context 8, batch 2): each op's kernel (matmul, softmax, log-softmax and their "
             "backwards) as plain loops, one multiply-add or exponential at a time, the same mathematics as the "
             "numpy definitions that [one GPT training step](gpt_step.md) was traced on. Numba compiles these loops; "
             "under a debugger they run as Python instead, so that `s` from an op lands here.")
    about = "The step is the second of a seeded run, traced with the JIT off (`NUMBA_DISABLE_JIT=1`)."
    return Step("loops_tier", "The loops tier, where a debugger steps in", intro, about, ("loops",), trace,
                f"demos.gpt --attention composed {GPT_QUICK} {SMALL_GPT} {SCRATCH}", "NUMBA_DISABLE_JIT=1")


def trace_loops_tier(path):
    """Write to `path` ([[name, first line, qualified name], ...], [lines run]) of loops.py in a
    small GPT step's second step (run with NUMBA_DISABLE_JIT=1)."""
    from demos.bench.lines import gpt_step, parse_args
    step = gpt_step(parse_args([]))
    step()
    trace = Trace()
    trace.record("loops", step)
    functions = [[code.co_name, code.co_firstlineno, code.co_qualname] for code, (where, _) in trace.functions.items()
                 if where == LOOPS]
    with open(path, "w") as f:
        json.dump([functions, sorted(trace.lines.get(LOOPS, ()))], f)


def seq2seq_step():
    """Trace the configuration and the second training step of the main demo's encoder-decoder
    (demos.train --task reverse: 2 + 2 layers, d_model 64, 4 heads, batch 64)."""
    from autograd import manual_seed
    from transformer.data import tasks
    from transformer.data.registry import make_task
    from transformer.encoder_decoder import Transformer, TransformerConfig
    from transformer.training.seq2seq import ToyTaskJob, TrainConfig

    kernels.use_tier("numpy")
    trace = Trace(phases=(("transformer/encoder_decoder.py", "Transformer.forward", "forward"),
                          ("autograd/tensor.py", "Tensor.backward", "backward"),
                          ("nn/optim.py", "clip_grad_norm_", "optimizer")),
                  pinned=TRAINING_PINS + (("transformer/training/seq2seq.py", "ToyTaskJob.step", "step"),),
                  watch=(ATTENTION,))
    cfg = trace.record("config", TrainConfig)
    data = make_task(cfg)
    config = trace.record("config", TransformerConfig, src_vocab=data.src_vocab, tgt_vocab=data.tgt_vocab,
                          max_len=data.max_output_len + 2, pad_id=tasks.PAD)
    manual_seed(cfg.seed)
    trained = Transformer(config)
    job = ToyTaskJob(trained, data, cfg)
    example = next(b for b in data.stream(1, seed=cfg.seed + 1) if (b.src != tasks.PAD).sum() == cfg.max_len)
    heatmaps = attention_after_training(trained, lambda n: job.step(n + 1),
                                        lambda: trained(example.src, example.tgt_in))
    manual_seed(cfg.seed)
    model = built(trace, Transformer, config)
    job = ToyTaskJob(model, data, cfg)
    job.step(0)
    trace.watched.clear()
    trace.record("step", job.step, 1)
    layers = range(config.num_encoder_layers)
    labels = ([f"encoder {n} self" for n in layers]
              + [f"decoder {n} {kind}" for n in range(config.num_decoder_layers) for kind in ("self", "cross")])
    source, target = ([tasks.symbol_label(t) for t in row[0]] for row in (example.src, example.tgt_in))
    axes = [(source, source)] * len(layers) + [(target, target), (target, source)] * config.num_decoder_layers
    intro = (f"One training step of the main demo's encoder-decoder Transformer (`python -m demos.train --task "
             f"reverse`: {config.num_encoder_layers} + {config.num_decoder_layers} layers, d_model {config.d_model}, "
             f"{config.num_heads} heads, batch {cfg.batch_size} of sequences of {cfg.min_len} to {cfg.max_len} "
             "symbols to reverse), as the code ran it: the encoder, the decoder with its masked self-attention and "
             "its cross-attention, the loss, the backward pass and Adam's update with its learning-rate schedule.")
    about = "The step is the second of a seeded run (the first is a warm-up). " + TIERS_NOTE + "."
    note = (f"The heatmaps are the weights of the same model after {TRAINED_STEPS} steps of the same seeded run (on "
            "the default kernels), not of the step traced here, whose untrained model attends almost evenly; for "
            f"one sequence of {cfg.max_len} symbols to reverse. In cross-attention row t is output position t and "
            "column n source position n: a trained model looks at n = length - 1 - t, the anti-diagonal.")
    return Step("seq2seq_step", "One encoder-decoder training step", intro, about, TRAINING_PHASES + ("checks",), trace,
                f"demos.train --task reverse {TRAIN_QUICK} {SCRATCH}", "AUTOGRAD_KERNELS=numpy", tuple(labels),
                heatmaps={ATTENTION: heatmaps}, heatmap_note=note, heatmap_axes=axes)


def scalar_backward():
    """Trace the scalar engine (autograd/scalar.py) on micrograd's neuron, tanh(x1 w1 + x2 w2 + b),
    building its graph, then its backward pass."""
    from demos.neuron import neuron

    trace = Trace(phases=(("autograd/scalar.py", "Value.backward", "backward"),))
    inputs, out = trace.record("build", neuron)
    trace.record("build", out.backward)
    out.names = {id(value): name for name, value in inputs.items()}
    intro = ("The scalar engine's backward pass through one neuron, micrograd's example: "
             "`o = (x1*w1 + x2*w2 + b).tanh()` with x1 = 2, x2 = 0, w1 = -3, w2 = 1, b = 6.88, then `o.backward()`. "
             "Each operation makes a `Value` that remembers its parents and a `_backward` closure; `backward` "
             "orders the graph and runs the closures from the output back.")
    return Step("scalar_backward", "The scalar engine's backward", intro, "", ("build", "backward"), trace,
                f"demos.neuron {SCRATCH}", "", graph=out)
