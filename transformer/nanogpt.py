"""nanoGPT's weights in our model, and ours in nanoGPT's names: the one place the mapping lives.

nanoGPT (Karpathy's minimal GPT in PyTorch) names its parameters

    transformer.wte.weight (vocab, C)            token embedding, tied to lm_head.weight
    transformer.wpe.weight (block_size, C)       learned positions
    transformer.h.{i}.ln_1.{weight,bias}         LayerNorm before attention
    transformer.h.{i}.attn.c_attn.{weight,bias}  (3C, C): the q, k and v projections stacked
    transformer.h.{i}.attn.c_proj.{weight,bias}  attention's output projection
    transformer.h.{i}.ln_2.{weight,bias}         LayerNorm before the MLP
    transformer.h.{i}.mlp.c_fc.{weight,bias}     (4C, C)
    transformer.h.{i}.mlp.c_proj.{weight,bias}   (C, 4C)
    transformer.ln_f.{weight,bias}               final LayerNorm
    lm_head.weight (vocab, C)

(biases only when trained with bias=True; a checkpoint of a compiled model prefixes every
key with `_orig_mod.`).  Its Linear weights are (out, in) like ours, and its heads split C
the same way (C = num_heads x d_head, head-major), so the mapping is renaming plus
cutting c_attn into three.  The number of heads is the one thing the shapes do not tell.
"""

import re

import numpy as np

from transformer.decoder_only import DecoderOnly, gpt_config

COMPILED_PREFIX = "_orig_mod."
_BLOCK = re.compile(r"transformer\.h\.(\d+)\.")


def _our_block_names(i):
    """nanoGPT's name within block i -> ours (c_attn is handled apart: it splits into three)."""
    ours = f"blocks.layers.{i}."
    pairs = {"ln_1": "sublayer1.norm", "attn.c_proj": "self_attn.out_proj", "ln_2": "sublayer2.norm",
             "mlp.c_fc": "feed_forward.linear1", "mlp.c_proj": "feed_forward.linear2"}
    return {f"transformer.h.{i}.{theirs}.{kind}": f"{ours}{mine}.{kind}"
            for theirs, mine in pairs.items() for kind in ("weight", "bias")}


def _top_names():
    return {"transformer.wte.weight": "embed.weight", "transformer.wpe.weight": "positional.weight",
            "transformer.ln_f.weight": "blocks.norm.weight", "transformer.ln_f.bias": "blocks.norm.bias",
            "lm_head.weight": "out_proj.weight"}


def config_from_nanogpt(state, num_heads, dropout=0.0):
    """Our DecoderOnlyConfig for a nanoGPT state dict (numpy arrays under nanoGPT's names):
    vocabulary and width from wte, context length from wpe, depth from the block indices,
    biases from whether ln_f has one.  num_heads must be given (no shape records it)."""
    state = _strip_prefix(state)
    for key in ("transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight"):
        if key not in state:
            raise KeyError(f"nanoGPT state dict: missing {key!r}; is this a nanoGPT GPT checkpoint? "
                           f"(keys seen: {sorted(state)[:5]} ...)")
    vocab, width = state["transformer.wte.weight"].shape
    block_size = state["transformer.wpe.weight"].shape[0]
    layers = {int(m.group(1)) for key in state if (m := _BLOCK.match(key))}
    if layers != set(range(len(layers))):
        raise KeyError(f"nanoGPT state dict: blocks {sorted(layers)} are not numbered 0..{len(layers) - 1}")
    if num_heads < 1 or width % num_heads:
        raise ValueError(f"nanoGPT state dict: width {width} is not divisible by num_heads={num_heads}")
    config = gpt_config(vocab, block_size, len(layers), num_heads, width, dropout,
                        bias="transformer.ln_f.bias" in state)
    lm_head = state.get("lm_head.weight")
    config.tie_weights = lm_head is None or np.array_equal(lm_head, state["transformer.wte.weight"])
    return config


def from_nanogpt(state, num_heads, dropout=0.0):
    """Our DecoderOnly holding the weights of a nanoGPT state dict (numpy arrays), in eval mode.
    Every key must be used and every parameter filled, or nothing is built."""
    state = {k: np.asarray(v) for k, v in _strip_prefix(state).items()
             if not k.endswith(".attn.bias") or np.ndim(v) != 4}   # drop the causal-mask buffer
    config = config_from_nanogpt(state, num_heads, dropout)
    ours = {}
    renames = _top_names()
    for i in range(config.num_layers):
        renames.update(_our_block_names(i))
        for kind in ("weight", "bias"):
            c_attn = state.get(f"transformer.h.{i}.attn.c_attn.{kind}")
            if c_attn is None:
                continue
            if c_attn.shape[0] != 3 * config.d_model:
                raise ValueError(f"nanoGPT state dict: transformer.h.{i}.attn.c_attn.{kind} has shape "
                                 f"{c_attn.shape}, expected first dim 3 x {config.d_model}")
            for part, name in zip(np.split(c_attn, 3, axis=0), ("q_proj", "k_proj", "v_proj")):
                ours[f"blocks.layers.{i}.self_attn.{name}.{kind}"] = part
    unknown = [k for k in state if k not in renames and ".attn.c_attn." not in k]
    if unknown:
        raise KeyError(f"nanoGPT state dict: keys this mapping does not know: {unknown}")
    ours.update({renames[k]: v for k, v in state.items() if k in renames})
    ours.setdefault("out_proj.weight", ours["embed.weight"])          # tied: lm_head is wte
    model = DecoderOnly(config)
    model.load_state_dict({k: v.astype(np.float32) for k, v in ours.items()})   # every key, every shape checked
    return model.eval()


def to_nanogpt(model):
    """The state dict of our GPT-configured DecoderOnly under nanoGPT's names (numpy arrays):
    what nanoGPT's GPT.load_state_dict takes.  q, k and v are stacked back into c_attn."""
    own = model.state_dict()
    theirs = {}
    renames = _top_names()
    for i in range(model.config.num_layers):
        renames.update(_our_block_names(i))
        for kind in ("weight", "bias"):
            parts = [own.get(f"blocks.layers.{i}.self_attn.{name}.{kind}") for name in ("q_proj", "k_proj", "v_proj")]
            if parts[0] is not None:
                theirs[f"transformer.h.{i}.attn.c_attn.{kind}"] = np.concatenate(parts, axis=0)
    theirs.update({k: own[v] for k, v in renames.items() if v in own})
    return theirs


def _strip_prefix(state):
    return {k[len(COMPILED_PREFIX):] if k.startswith(COMPILED_PREFIX) else k: v for k, v in state.items()}

