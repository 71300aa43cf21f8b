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

`read_torch_file` reads a checkpoint that `torch.save` wrote (nanoGPT's ckpt.pt) without
PyTorch: the file is a zip of one pickle plus one raw little-endian buffer per storage,
and a restricted unpickler rebuilds each tensor as a numpy array, refusing anything else.
"""

import collections
import dataclasses
import os
import pickle
import re
import zipfile

import numpy as np

from transformer.families.decoder_only import DecoderOnly, gpt_config

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
    Every key must be used and every parameter filled, or nothing is built.  Weights in
    float64 give a float64 model; any other float dtype a float32 one."""
    state = {k: np.asarray(v) for k, v in _strip_prefix(state).items()
             if not k.endswith(".attn.bias") or np.ndim(v) != 4}   # drop the causal-mask buffer
    config = config_from_nanogpt(state, num_heads, dropout)
    ours = rename_from_nanogpt(state, config.num_layers, config.d_model, "nanoGPT state dict")
    return decoder_holding(config, ours)


def decoder_holding(config, weights):
    """A DecoderOnly of `config` in eval mode holding `weights` (under our names; a tied
    model's out_proj.weight may be left out).  Every parameter must be filled and every
    shape match, or nothing is built.  Weights in float64 give a float64 model; any other
    float dtype a float32 one."""
    weights = dict(weights)
    weights.setdefault("out_proj.weight", weights["embed.weight"])          # tied: lm_head is wte
    dtype = "float64" if np.result_type(*weights.values()) == np.float64 else "float32"
    model = DecoderOnly(dataclasses.replace(config, dtype=dtype))
    model.load_state_dict(weights)                       # every key, every shape checked, cast to the model's dtype
    return model.eval()


def rename_from_nanogpt(state, num_layers, d_model, source):
    """Arrays under nanoGPT's names (its layout: Linear weights (out, in)) -> the same arrays
    under ours, c_attn cut into q, k and v.  A key the mapping does not know (unexpected, not
    missing), or a c_attn of the wrong size, is a ValueError naming `source`."""
    ours = {}
    renames = _top_names()
    for i in range(num_layers):
        renames.update(_our_block_names(i))
        for kind in ("weight", "bias"):
            c_attn = state.get(f"transformer.h.{i}.attn.c_attn.{kind}")
            if c_attn is None:
                continue
            if c_attn.shape[0] != 3 * d_model:
                raise ValueError(f"{source}: transformer.h.{i}.attn.c_attn.{kind} has shape {c_attn.shape}, "
                                 f"expected first dim 3 x {d_model}")
            for part, name in zip(np.split(c_attn, 3, axis=0), ("q_proj", "k_proj", "v_proj")):
                ours[f"blocks.layers.{i}.self_attn.{name}.{kind}"] = part
    unknown = [k for k in state if k not in renames and ".attn.c_attn." not in k]
    if unknown:
        raise ValueError(f"{source}: unexpected keys, which this mapping does not know: {unknown[:3]}")
    ours.update({renames[k]: v for k, v in state.items() if k in renames})
    return ours


def to_nanogpt(model):
    """The state dict of our GPT-configured DecoderOnly under nanoGPT's names (numpy arrays):
    what nanoGPT's GPT.load_state_dict takes.  q, k and v are stacked back into c_attn."""
    return rename_to_nanogpt(model.state_dict(), model.config.num_layers)


def rename_to_nanogpt(own, num_layers):
    """Arrays under our parameter names (weights, or an optimizer's moments of them) ->
    the same arrays under nanoGPT's names, q, k and v stacked into c_attn."""
    theirs = {}
    renames = _top_names()
    for i in range(num_layers):
        renames.update(_our_block_names(i))
        for kind in ("weight", "bias"):
            parts = [own.get(f"blocks.layers.{i}.self_attn.{name}.{kind}") for name in ("q_proj", "k_proj", "v_proj")]
            if parts[0] is not None:
                theirs[f"transformer.h.{i}.attn.c_attn.{kind}"] = np.concatenate(parts, axis=0)
    theirs.update({k: own[v] for k, v in renames.items() if v in own})
    return theirs


def nanogpt_model_args(config):
    """nanoGPT's model_args for our config, or ValueError naming what nanoGPT's GPT cannot be
    (its architecture is fixed: the config must be gpt_config's)."""
    args = {"n_layer": config.num_layers, "n_head": config.num_heads, "n_embd": config.d_model,
            "block_size": config.max_len, "bias": config.bias, "vocab_size": config.vocab, "dropout": config.dropout}
    expected = gpt_config(config.vocab, config.max_len, config.num_layers, config.num_heads, config.d_model,
                          config.dropout, config.bias, config.attention)
    differ = [f"{f.name}={getattr(config, f.name)!r} (nanoGPT: {getattr(expected, f.name)!r})"
              for f in dataclasses.fields(config) if f.name != "dtype" and getattr(config, f.name) != getattr(expected, f.name)]
    if differ:
        raise ValueError("this model is not nanoGPT's GPT: " + ", ".join(differ))
    return args


def nanogpt_parameter_order(num_layers, bias):
    """nanoGPT's GPT.named_parameters() order (lm_head.weight is wte's, so not listed): the
    order its AdamW numbers the parameters in, weight matrices first (configure_optimizers)."""
    block = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
             "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight",
             "mlp.c_proj.bias"]
    names = ["transformer.wte.weight", "transformer.wpe.weight"]
    names += [f"transformer.h.{i}.{name}" for i in range(num_layers) for name in block]
    names += ["transformer.ln_f.weight", "transformer.ln_f.bias"]
    return [name for name in names if bias or not name.endswith(".bias")]


def adam_moments_to_nanogpt(model, optimizer_state, parameters):
    """({nanoGPT name: (exp_avg, exp_avg_sq)}, step) from the state_dict of our AdamW over
    model's `parameters`, in the optimizer's order (its groups one after the other)."""
    names = {id(p): name for name, p in model.named_parameters()}
    order = [names[id(p)] for p in parameters]                    # the optimizer's indices
    moments = {kind: {order[int(i)]: s[kind] for i, s in optimizer_state["state"].items()}
               for kind in ("exp_avg", "exp_avg_sq")}
    if not moments["exp_avg"]:
        raise ValueError("the optimizer has taken no step: there are no moments to export")
    steps = {int(s["step"]) for s in optimizer_state["state"].values()}
    if len(steps) != 1:
        raise ValueError(f"the parameters were updated different numbers of times ({sorted(steps)})")
    averages, squares = (rename_to_nanogpt(m, model.config.num_layers) for m in moments.values())
    return {name: (averages[name], squares[name]) for name in averages}, steps.pop()


def _strip_prefix(state):
    return {k[len(COMPILED_PREFIX):] if k.startswith(COMPILED_PREFIX) else k: v for k, v in state.items()}



# ----- reading nanoGPT's files without PyTorch -----

_STORAGE_DTYPES = {"FloatStorage": np.float32, "DoubleStorage": np.float64, "HalfStorage": np.float16,
                   "BFloat16Storage": "bfloat16", "LongStorage": np.int64, "IntStorage": np.int32,
                   "ShortStorage": np.int16, "CharStorage": np.int8, "ByteStorage": np.uint8,
                   "BoolStorage": np.bool_}


def _rebuild_tensor(storage, offset, size, stride, *unused):
    """torch._utils._rebuild_tensor_v2: a view of `storage` (strides in elements), copied."""
    itemsize = storage.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=tuple(size),
                                           strides=tuple(s * itemsize for s in stride))
    return np.array(view)


def _rebuild_parameter(data, *unused):
    return data


class _TorchUnpickler(pickle.Unpickler):
    """Builds only dicts, lists, numbers, strings and tensors (as numpy arrays): any other
    global in the file is refused, so reading never runs code from it."""

    ALLOWED = {("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
               ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
               ("collections", "OrderedDict"): collections.OrderedDict}

    def __init__(self, file, read_storage):
        super().__init__(file)
        self.read_storage = read_storage

    def find_class(self, module, name):
        if (module, name) in self.ALLOWED:
            return self.ALLOWED[(module, name)]
        if module == "torch" and name in _STORAGE_DTYPES:
            return name                                    # a storage type: kept as its name
        raise pickle.UnpicklingError(f"read_torch_file: refusing to load {module}.{name} (only tensors, "
                                     "dicts, lists, numbers and strings are read)")

    def persistent_load(self, pid):
        kind, storage_type, key, _location, count = pid
        if kind != "storage":
            raise pickle.UnpicklingError(f"read_torch_file: unknown persistent record {kind!r}")
        return self.read_storage(key, _STORAGE_DTYPES[storage_type], count)


def read_torch_file(path):
    """The object a `torch.save` zip file holds, with every tensor as a numpy array
    (bfloat16 widened to float32).  Needs no PyTorch."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"read_torch_file: no file at {path!r}")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"read_torch_file: {path!r} is not a zip-format torch.save file (PyTorch >= 1.6 writes those)")
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl")]
        if len(pickles) != 1:
            raise ValueError(f"read_torch_file: {path!r} holds {len(pickles)} data.pkl records, expected 1")
        prefix = pickles[0][:-len("data.pkl")]

        def read_storage(key, dtype, count):
            raw = archive.read(f"{prefix}data/{key}")
            if dtype == "bfloat16":                        # the top 16 bits of a float32
                return (np.frombuffer(raw, "<u2", count).astype(np.uint32) << 16).view(np.float32)
            return np.frombuffer(raw, np.dtype(dtype).newbyteorder("<"), count)

        with archive.open(pickles[0]) as f:
            return _unpickle(f, read_storage, path, "read_torch_file")


def _unpickle(file, read_storage, path, reader):
    """The restricted unpickler's object from file; bytes that are not such a pickle (a file
    of another kind, truncated or corrupt) raise ValueError naming the file, whatever the
    unpickler tripped on."""
    try:
        return _TorchUnpickler(file, read_storage).load()
    except Exception as err:                               # noqa: BLE001  any byte string can be fed to it
        raise ValueError(f"{reader}: {path!r} is not a pickle nanoGPT wrote ({type(err).__name__}: {err})") from err


def read_meta(path):
    """nanoGPT's meta.pkl for a character model: {'vocab_size', 'itos', 'stoi'} (plain
    dicts, read with the same restricted unpickler)."""
    with open(path, "rb") as f:
        meta = _unpickle(f, None, path, "read_meta")
    if not isinstance(meta, dict) or "itos" not in meta:
        raise ValueError(f"read_meta: {path!r} has no 'itos' table; expected nanoGPT's meta.pkl")
    return meta


def load_nanogpt_checkpoint(path):
    """Our model from nanoGPT's ckpt.pt: the weights of its 'model' entry and the number of
    heads from its 'model_args'."""
    checkpoint = read_torch_file(path)
    if not isinstance(checkpoint, dict) or "model" not in checkpoint or "model_args" not in checkpoint:
        raise ValueError(f"load_nanogpt_checkpoint: {path!r} has no 'model' and 'model_args' entries; "
                         "expected a checkpoint written by nanoGPT's train.py")
    return from_nanogpt(checkpoint["model"], int(checkpoint["model_args"]["n_head"]))
