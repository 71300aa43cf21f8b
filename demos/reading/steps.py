"""The calls a reading edition traces: one training step of nanoGPT's small GPT.

The step runs on the numpy tier of the kernels (AUTOGRAD_KERNELS=numpy): each kernel is
its one-line numpy definition (autograd/kernels/reference.py), which is what a reader
wants on one page, and the full-size step takes seconds.  The loops tier would run its
kernels as Python with NUMBA_DISABLE_JIT=1, about 4 GFLOP through Python loops: an hour
for one step of this size.  Attention is composed (matmul, masked_fill, softmax, matmul),
the ops a learner steps through, not the fused op.
"""

import dataclasses

import numpy as np

from demos.reading.trace import Trace

VOCAB = 65                   # nanoGPT's Shakespeare characters
ATTENTION = ("transformer/attention.py", "scaled_dot_product_attention", "weights")


@dataclasses.dataclass
class Step:
    """A traced call and what the page says of it."""
    name: str                # the page's file name
    title: str
    intro: str               # Markdown: what ran, and how to run it
    phases: tuple            # the reading order's phases
    trace: Trace
    debug: str               # the demo (and its arguments) demos.debug runs to stop in these functions
    environment: str         # the environment the debugger command needs to run what the page shows


def gpt_step():
    """Trace the configuration and the second training step (the first is a warm-up: what
    only a first step does is not the step) of gpt_config's model, composed attention."""
    from autograd import kernels, manual_seed
    from transformer.families.decoder_only import DecoderOnly, gpt_config
    from transformer.training.lm import LMTrainConfig, step_functions

    kernels.use_tier("numpy")
    trace = Trace(phases=(("transformer/families/decoder_only.py", "DecoderOnly.forward", "forward"),
                          ("autograd/tensor.py", "Tensor.backward", "backward"),
                          ("nn/optim.py", "clip_grad_norm_", "optimizer")),
                  pinned=(("nn/recipe.py", "optimize", "step"), ("nn/optim.py", "Optimizer.zero_grad", "optimizer"),
                          ("nn/optim.py", "Optimizer._params", "optimizer"),
                          ("nn/module.py", "Module.__call__", "forward")),
                  watch=(ATTENTION,))
    cfg, config = trace.record("config", lambda: (LMTrainConfig(), gpt_config(VOCAB, attention="composed")))
    manual_seed(cfg.seed)
    model = DecoderOnly(config)
    step = step_functions(model, cfg)[0]
    rng = np.random.default_rng(cfg.seed)
    x, y = (rng.integers(0, VOCAB, (cfg.batch_size, cfg.block_size)) for _ in range(2))
    step(x, y, cfg.lr_at(0))
    trace.watched.clear()
    trace.record("step", lambda: step(x, y, cfg.lr_at(1)))
    intro = (f"One training step of the GPT `python -m demos.gpt` trains (nanoGPT's CPU recipe: "
             f"{config.num_layers} layers, {config.num_heads} heads, {config.d_model} wide, context "
             f"{cfg.block_size}, batch {cfg.batch_size}), on a batch of random tokens of a {VOCAB}-character "
             "vocabulary: the forward pass, the loss, the backward pass and AdamW's update.")
    return Step("gpt_step", "One GPT training step", intro, ("config", "step", "forward", "backward", "optimizer"),
                trace, "demos.gpt --attention composed --max-iters 1", "AUTOGRAD_KERNELS=numpy")
