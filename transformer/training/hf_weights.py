"""A Hugging Face folder's weights, opened without reading them, and a model filled from them.

`save_pretrained` writes a model's weights as one model.safetensors, or, past its
max_shard_size, as several files with an index beside them:

    model.safetensors.index.json   {"metadata": {...}, "weight_map": {tensor name: file name}}
    model-00001-of-00002.safetensors, model-00002-of-00002.safetensors

`open_weights` reads only the headers (safetensors.py's open_safetensors: each file
memory-mapped, checked, nothing copied) and gives every tensor by name; `decoder_reading`
builds the model and reads each tensor straight into its parameter, float32 (BF16 widened
there, once), so that loading holds one copy of the weights, not two.  The index is
untrusted input like the files: a shard must be a plain file name in the folder, every
tensor must be where the index says and nowhere else.
"""

import dataclasses
import os

import numpy as np

import nn
from transformer.families.decoder_only import DecoderOnly
from transformer.training.hf_tokenizer import read_json
from transformer.training.safetensors import StoredTensor, open_safetensors

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"


def open_weights(folder, reader="from_hf"):
    """({tensor name: StoredTensor}, the path errors should name) of the folder's
    model.safetensors, or of the shards its model.safetensors.index.json lists;
    FileNotFoundError naming what is missing, ValueError naming the file that is wrong."""
    single, index = os.path.join(folder, WEIGHTS), os.path.join(folder, INDEX)
    if os.path.isfile(single):
        return open_safetensors(single)[0], single
    if not os.path.isfile(index):
        raise FileNotFoundError(f"{reader}: no {WEIGHTS} nor {INDEX} in {os.fspath(folder)!r} "
                                "(pickled weights, pytorch_model.bin, are not read: they could run code)")
    weight_map = read_json(index, reader).get("weight_map")
    if not isinstance(weight_map, dict) or not weight_map:
        raise ValueError(f"{reader}: {index!r} has no weight_map object of tensor names to file names")
    shards = {}
    for name, shard in weight_map.items():
        if not isinstance(shard, str) or os.path.basename(shard) != shard or shard in ("", ".", ".."):
            raise ValueError(f"{reader}: {index!r} maps {name!r} to {shard!r}, not a file name in the folder")
        shards.setdefault(shard, set()).add(name)
    tensors = {}
    for shard, names in sorted(shards.items()):
        path = os.path.join(folder, shard)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{reader}: {index!r} lists {shard!r}, which is not in the folder")
        held, _ = open_safetensors(path)
        if held.keys() != names:
            wrong = sorted(names ^ held.keys())
            raise ValueError(f"{reader}: {path!r} holds other tensors than {INDEX} says, e.g. {wrong[0]!r}")
        tensors |= held
    return tensors, index


def decoder_reading(config, weights):
    """A float32 DecoderOnly of `config` in eval mode, each parameter read from weights
    ({our name: StoredTensor or array}; a tied model's out_proj.weight left out).  The model
    is built under nn.init.skip_init (its memory uninitialised), every name and shape is
    checked, and each parameter is written in place, tensor by tensor: no second copy of the
    weights is made."""
    with nn.init.skip_init():                             # every value is read below: nothing drawn
        model = DecoderOnly(dataclasses.replace(config, dtype="float32"))
    own = dict(model.named_parameters())                  # a tied out_proj.weight appears once, as embed.weight
    missing, unexpected = sorted(own.keys() - weights.keys()), sorted(weights.keys() - own.keys())
    mismatched = [f"{name} {tuple(weights[name].shape)}, the model's {own[name].shape}"
                  for name in sorted(own.keys() & weights.keys()) if tuple(weights[name].shape) != own[name].shape]
    for problem, names in [("missing", missing), ("unexpected", unexpected), ("shaped otherwise", mismatched)]:
        if names:
            raise ValueError(f"{len(names)} weights {problem}: {'; '.join(names[:3])}")
    for name, parameter in own.items():
        source = weights[name]
        if isinstance(source, StoredTensor):
            source.read_into(parameter.data)
        else:
            parameter.data[...] = source
        if not np.isfinite(parameter.data).all():
            raise ValueError(f"{name} holds NaN or infinite values")
    return model.eval()
