"""Our GPT as a Hugging Face model folder, and such a folder as our GPT, without PyTorch.

A folder that `transformers` loads (`AutoModelForCausalLM.from_pretrained(DIR)`) holds

    model.safetensors        the weights under the architecture's names (safetensors.py)
    config.json              the architecture and its sizes, in its own names
    generation_config.json   the token ids generation starts and stops at
    tokenizer.json           the tokenizer (hf_tokenizer.py), with tokenizer_config.json

Each architecture is one entry of ARCHITECTURES: how our DecoderOnlyConfig is written as
its config.json (refusing in one line what it cannot express), how its config.json is
read back, and how the weights are renamed each way.  GPT-2 (`GPT2LMHeadModel`) is the
first: its names are nanoGPT's (nanogpt.py holds that mapping), except that GPT-2's
`Conv1D` stores a weight as (in, out), the transpose of a Linear's.  GPT-2 always has
biases: a model trained without them is written with zero biases, the same function.
Weights are written in float32 (a float64 model's too: the precision GPUs train in), and
one dropout probability stands for GPT-2's three (embeddings, attention, residuals).
A Llama-style entry (rotary positions, RMSNorm, SwiGLU) is one more Architecture.
"""

import dataclasses
import json
import os
import re

import numpy as np

from transformer.data.bpe import END_OF_TEXT
from transformer.families.decoder_only import DecoderOnlyConfig
from transformer.training.hf_tokenizer import read_json, read_tokenizer_json, special_ids, to_tokenizer_json
from transformer.training.nanogpt import (decoder_holding, nanogpt_parameter_order, rename_from_nanogpt,
                                          rename_to_nanogpt)
from transformer.training.safetensors import read_safetensors, write_safetensors

LAYER_NORM_EPS = 1e-5                                  # nn.LayerNorm's, which our models do not change
GPT2_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new"}
ACTIVATIONS_FROM_GPT2 = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
GPT2_BUFFERS = (".attn.bias", ".attn.masked_bias")    # causal masks some older files hold


@dataclasses.dataclass(frozen=True)
class Architecture:
    """One Hugging Face architecture: its names and the four translations."""
    name: str                      # config.json's "architectures" entry, e.g. "GPT2LMHeadModel"
    model_type: str                # config.json's "model_type", e.g. "gpt2"
    write_config: callable         # (our config, special ids) -> config.json's dict; ValueError if inexpressible
    read_config: callable          # (config.json's dict) -> our DecoderOnlyConfig; ValueError if unsupported
    to_theirs: callable            # (our state dict, our config) -> {their name: array}
    from_theirs: callable          # ({their name: array}, our config) -> our state dict


def gpt2_config_json(config, special_ids):
    """config.json of GPT2LMHeadModel for our config; ValueError naming what GPT-2 cannot be."""
    cannot = [reason for broken, reason in [
        (config.positional != "learned", f"positions must be learned (GPT-2's wpe), not {config.positional!r}"),
        (config.score != "scaled_dot", f"attention scores must be scaled_dot, not {config.score!r}"),
        (config.head_bias, "its lm_head has no bias (the model has head_bias=True)"),
        (config.pad_id is not None, f"it masks no padding token (the model has pad_id={config.pad_id})"),
        (config.activation not in GPT2_ACTIVATIONS, f"it has no {config.activation!r} activation")] if broken]
    if cannot:
        raise ValueError("this model cannot be written as GPT-2: " + "; ".join(cannot))
    end = special_ids.get(END_OF_TEXT)
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": config.vocab,
            "n_positions": config.max_len, "n_embd": config.d_model, "n_layer": config.num_layers,
            "n_head": config.num_heads, "n_inner": config.d_ff,
            "activation_function": GPT2_ACTIVATIONS[config.activation], "resid_pdrop": config.dropout,
            "embd_pdrop": config.dropout, "attn_pdrop": config.dropout, "layer_norm_epsilon": LAYER_NORM_EPS,
            "initializer_range": 0.02, "scale_attn_weights": True, "tie_word_embeddings": config.tie_weights,
            "bos_token_id": end, "eos_token_id": end, "dtype": "float32", "use_cache": True}


def gpt2_our_config(spec):
    """Our DecoderOnlyConfig for GPT2LMHeadModel's config.json (its defaults where it is silent)."""
    unsupported = [f"{key}={spec[key]!r}" for key, ours in [
        ("layer_norm_epsilon", LAYER_NORM_EPS), ("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
        ("add_cross_attention", False)] if key in spec and spec[key] != ours]
    activation = spec.get("activation_function", "gelu_new")
    if activation not in ACTIVATIONS_FROM_GPT2:
        unsupported.append(f"activation_function={activation!r}")
    if unsupported:
        raise ValueError(f"GPT-2 settings this model cannot follow: {', '.join(unsupported)} (ours: layer norm eps "
                         f"{LAYER_NORM_EPS}, attention scaled by 1/sqrt(d_head), activations {sorted(ACTIVATIONS_FROM_GPT2)})")
    width = spec["n_embd"]
    return DecoderOnlyConfig(vocab=spec["vocab_size"], d_model=width, num_heads=spec["n_head"],
                             d_ff=spec.get("n_inner") or 4 * width, num_layers=spec["n_layer"],
                             max_len=spec["n_positions"], dropout=spec.get("resid_pdrop", 0.1), pad_id=None,
                             activation=ACTIVATIONS_FROM_GPT2[activation], bias=True, head_bias=False,
                             tie_weights=spec.get("tie_word_embeddings", True), init="gpt2", attention="fused")


def _conv1d(name):
    return name.endswith(CONV1D)


def gpt2_to_theirs(state, config):
    """Our state dict -> GPT2LMHeadModel's tensors: nanoGPT's names, Conv1D weights
    transposed, zero biases where the model has none, lm_head left out when tied."""
    theirs = rename_to_nanogpt(state, config.num_layers)
    for name in nanogpt_parameter_order(config.num_layers, bias=True):
        if name.endswith(".bias") and name not in theirs:               # trained without biases: zeros
            theirs[name] = np.zeros(theirs[name[:-len("bias")] + "weight"].shape[0], np.float32)
    if config.tie_weights:
        theirs.pop("lm_head.weight")
    return {name: np.asarray(a.T if _conv1d(name) else a, np.float32) for name, a in theirs.items()}


def gpt2_from_theirs(tensors, config):
    """GPT2LMHeadModel's tensors (with or without the `transformer.` prefix that a bare
    GPT2Model's file lacks) -> our state dict."""
    theirs = {}
    for name, array in tensors.items():
        if name.endswith(GPT2_BUFFERS) and array.ndim == 4:
            continue                                                    # an old file's causal mask
        name = name if name.startswith(("transformer.", "lm_head.")) else "transformer." + name
        theirs[name] = array.T if _conv1d(name) else array
    if config.tie_weights:
        theirs.pop("lm_head.weight", None)                              # the same array as wte
    elif "lm_head.weight" not in theirs:
        raise KeyError("lm_head.weight (tie_word_embeddings is false)")
    _check_sizes(theirs, config)
    return rename_from_nanogpt(theirs, config.num_layers, config.d_model, "model.safetensors")


def _check_sizes(theirs, config):
    """The sizes config.json gives must be the weights' before a model of that size is
    built: a config.json claiming a billion positions or layers is refused, not allocated."""
    layers = {int(m.group(1)) for name in theirs if (m := re.match(r"transformer\.h\.(\d+)\.", name))}
    if len(layers) != config.num_layers or sorted(layers) != list(range(len(layers))):
        raise ValueError(f"config.json gives {config.num_layers} layers, the weights hold blocks {sorted(layers)[:8]}")
    expected = {"transformer.wte.weight": (config.vocab, config.d_model),
                "transformer.wpe.weight": (config.max_len, config.d_model),
                **{f"transformer.h.{i}.mlp.c_fc.weight": (config.d_ff, config.d_model) for i in layers}}
    wrong = [f"{name} {theirs[name].shape if name in theirs else 'missing'}, config.json: {shape}"
             for name, shape in expected.items() if name not in theirs or theirs[name].shape != shape]
    if wrong:
        raise ValueError("the weights disagree with config.json: " + "; ".join(wrong[:3]))


GPT2 = Architecture("GPT2LMHeadModel", "gpt2", gpt2_config_json, gpt2_our_config, gpt2_to_theirs, gpt2_from_theirs)
ARCHITECTURES = {architecture.name: architecture for architecture in [GPT2]}


def architecture_for(config):
    """The architecture our config is written as (GPT-2; a Llama-style config: Llama's)."""
    return GPT2


def architecture_of(spec, path):
    """The entry of ARCHITECTURES that config.json (spec, read from path) names."""
    names = spec.get("architectures") or [a.name for a in ARCHITECTURES.values() if a.model_type == spec.get("model_type")]
    names = names if isinstance(names, list) else [names]               # a malformed file's 5 or "GPT2LMHeadModel"
    known = [ARCHITECTURES[name] for name in names if isinstance(name, str) and name in ARCHITECTURES]
    if not known:
        raise ValueError(f"from_hf: {path!r} describes {names or spec.get('model_type')!r}; this reads "
                         f"{', '.join(ARCHITECTURES)}")
    return known[0]


def hf_files(model, tokenizer):
    """{file name: its content (JSON objects, and the tensors)} of the Hugging Face folder
    of model and tokenizer; ValueError, before anything is written, for what the
    architecture or tokenizer.json cannot hold."""
    architecture = architecture_for(model.config)
    special = special_ids(tokenizer)
    end = special.get(END_OF_TEXT)
    config = architecture.write_config(model.config, special)
    tokens = to_tokenizer_json(tokenizer)
    if len(tokenizer) != model.config.vocab:
        raise ValueError(f"the tokenizer has {len(tokenizer)} tokens but the model {model.config.vocab}")
    ends = {} if end is None else {"bos_token": END_OF_TEXT, "eos_token": END_OF_TEXT}
    return {"model.safetensors": architecture.to_theirs(model.state_dict(), model.config), "config.json": config,
            "generation_config.json": {"bos_token_id": end, "eos_token_id": end} if end is not None else {},
            "tokenizer.json": tokens,
            "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces":
                                      False, "model_max_length": model.config.max_len, **ends}}


def save_hf(model, tokenizer, folder):
    """Write model (our DecoderOnly) and its tokenizer into folder (made if missing) as
    Hugging Face's files (hf_files); returns the architecture's name.  What cannot be
    written is refused before the folder is touched."""
    files = hf_files(model, tokenizer)
    os.makedirs(folder, exist_ok=True)
    for name, content in files.items():
        if name.endswith(".safetensors"):
            write_safetensors(os.path.join(folder, name), content, {"format": "pt"})
        else:
            with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
                json.dump(content, f, indent=2, ensure_ascii=False)
    return files["config.json"]["architectures"][0]


def from_hf(folder):
    """(our DecoderOnly in eval mode, its tokenizer) from a Hugging Face model folder:
    config.json, model.safetensors (F32, F16 or BF16, read as float32) and tokenizer.json.
    Needs no PyTorch and runs nothing from the files; a missing or malformed file is one
    error naming it."""
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"from_hf: no folder at {os.fspath(folder)!r}")
    paths = {name: os.path.join(folder, name) for name in ("config.json", "model.safetensors", "tokenizer.json")}
    for name, path in paths.items():
        if not os.path.isfile(path):
            raise FileNotFoundError(f"from_hf: no {name} in {os.fspath(folder)!r}"
                                    + (" (sharded or pickled weights are not read)" if name.endswith("tensors") else ""))
    spec = read_json(paths["config.json"], "from_hf")
    architecture = architecture_of(spec, paths["config.json"])
    config = _translated(architecture.read_config, paths["config.json"], spec)
    tensors, _ = read_safetensors(paths["model.safetensors"])
    weights = _translated(architecture.from_theirs, paths["model.safetensors"], tensors, config)
    model = _translated(decoder_holding, paths["model.safetensors"], config, weights)
    tokenizer = read_tokenizer_json(paths["tokenizer.json"])
    if len(tokenizer) > config.vocab:
        raise ValueError(f"from_hf: {paths['tokenizer.json']!r} has {len(tokenizer)} tokens, more than the model's "
                         f"{config.vocab}")
    return model, tokenizer


def _translated(translate, path, *args):
    """translate(*args), its KeyError, TypeError or ValueError one ValueError naming path."""
    try:
        return translate(*args)
    except (KeyError, TypeError, ValueError) as err:
        reason = f"missing {err}" if isinstance(err, KeyError) else str(err)
        raise ValueError(f"from_hf: {os.fspath(path)!r}: {reason}") from None
