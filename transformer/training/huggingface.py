"""Our GPT as a Hugging Face model folder, and such a folder as our GPT, without PyTorch.

A folder that `transformers` loads (`AutoModelForCausalLM.from_pretrained(DIR)`) holds

    model.safetensors        the weights under the architecture's names (safetensors.py)
    config.json              the architecture and its sizes, in its own names
    generation_config.json   the token ids generation starts and stops at
    tokenizer.json           the tokenizer (hf_tokenizer.py), with tokenizer_config.json

Each architecture is one entry of ARCHITECTURES: what of our DecoderOnlyConfig it cannot
express (a model is written as the first that can express it, else refused in one line),
how the config is written as its config.json and read back, and how the weights are
renamed each way.  Weights are written in float32 (a float64 model's too: the precision
GPUs train in).

- GPT-2 (`GPT2LMHeadModel`, learned positions, LayerNorm, an MLP): its names are
  nanoGPT's (nanogpt.py holds that mapping), except that GPT-2's `Conv1D` stores a weight
  as (in, out), the transpose of a Linear's.  GPT-2 always has biases: a model trained
  without them is written with zero biases, the same function.  One dropout probability
  stands for GPT-2's three (embeddings, attention, residuals).
- The Llama family (`LlamaForCausalLM`, `Qwen2ForCausalLM`, and `MistralForCausalLM`
  without a sliding window, read and written as Llama): llama_config's model with the
  numbers config.json gives (grouped-query attention, RMSNorm eps, RoPE theta and
  scaling, biases); hf_llama.py holds the mapping.
- Refused in one line naming the feature: architectures with a mixture of experts and
  others we do not have (NOT_READ), or a setting of a known one we cannot follow.

A folder written by `save_pretrained` holds weights only (no tokenizer.json): from_hf reads
it with no tokenizer.  The weights, one file or shards, are opened by hf_weights.py and read
straight into the model's parameters.
"""

import json
import os

import numpy as np

from transformer.data.bpe import END_OF_TEXT
from transformer.families.decoder_only import DecoderOnlyConfig
from transformer.training.hf_architecture import Architecture, check_sizes, drop_tied_head, tie_word_embeddings
from transformer.training.hf_llama import LLAMA, MISTRAL, QWEN2
from transformer.training.hf_tokenizer import read_json, read_tokenizer_json, special_ids, to_tokenizer_json
from transformer.training.hf_weights import decoder_reading, open_weights
from transformer.training.nanogpt import nanogpt_parameter_order, rename_from_nanogpt, rename_to_nanogpt
from transformer.training.safetensors import StoredTensor, write_safetensors

GPT2_LAYER_NORM_EPS = 1e-5                             # GPT2Config's layer_norm_epsilon when config.json is silent
GPT2_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new"}
ACTIVATIONS_FROM_GPT2 = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
GPT2_BUFFERS = {".attn.bias": 4, ".attn.masked_bias": 0}   # older files' causal mask (1, 1, T, T), fill value (0-d)


def gpt2_cannot(config):
    """What of our config GPT-2 cannot express."""
    return [reason for broken, reason in [
        (config.positional != "learned", f"positions must be learned (GPT-2's wpe), not {config.positional!r}"),
        (config.score != "scaled_dot", f"attention scores must be scaled_dot, not {config.score!r}"),
        (config.norm != "layer_norm", f"its norms are LayerNorm, not {config.norm!r}"),
        (config.feed_forward != "mlp", f"its feed-forward is an MLP, not {config.feed_forward!r}"),
        (config.head_bias, "its lm_head has no bias (the model has head_bias=True)"),
        (config.pad_id is not None, f"it masks no padding token (the model has pad_id={config.pad_id})"),
        (config.activation not in GPT2_ACTIVATIONS, f"it has no {config.activation!r} activation")] if broken]


def gpt2_config_json(config, special_ids):
    """config.json of GPT2LMHeadModel for our config."""
    end = special_ids.get(END_OF_TEXT)
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": config.vocab,
            "n_positions": config.max_len, "n_embd": config.d_model, "n_layer": config.num_layers,
            "n_head": config.num_heads, "n_inner": config.d_ff,
            "activation_function": GPT2_ACTIVATIONS[config.activation], "resid_pdrop": config.dropout,
            "embd_pdrop": config.dropout, "attn_pdrop": config.dropout, "layer_norm_epsilon": config.norm_eps,
            "initializer_range": 0.02, "scale_attn_weights": True, "tie_word_embeddings": config.tie_weights,
            "bos_token_id": end, "eos_token_id": end, "dtype": "float32", "use_cache": True}


def gpt2_our_config(spec):
    """Our DecoderOnlyConfig for GPT2LMHeadModel's config.json (its defaults where it is silent)."""
    unsupported = [f"{key}={spec[key]!r}" for key, ours in [
        ("scale_attn_weights", True), ("scale_attn_by_inverse_layer_idx", False),
        ("add_cross_attention", False)] if key in spec and spec[key] != ours]
    activation = spec.get("activation_function", "gelu_new")
    if activation not in ACTIVATIONS_FROM_GPT2:
        unsupported.append(f"activation_function={activation!r}")
    if unsupported:
        raise ValueError(f"GPT-2 settings this model cannot follow: {', '.join(unsupported)} (ours: "
                         f"attention scaled by 1/sqrt(d_head), activations {sorted(ACTIVATIONS_FROM_GPT2)})")
    width = spec["n_embd"]
    return DecoderOnlyConfig(vocab=spec["vocab_size"], d_model=width, num_heads=spec["n_head"],
                             d_ff=spec.get("n_inner") or 4 * width, num_layers=spec["n_layer"],
                             max_len=spec["n_positions"], dropout=spec.get("resid_pdrop", 0.1), pad_id=None,
                             activation=ACTIVATIONS_FROM_GPT2[activation], bias=True, head_bias=False,
                             tie_weights=tie_word_embeddings(spec, True), init="gpt2", attention="fused",
                             norm_eps=spec.get("layer_norm_epsilon", GPT2_LAYER_NORM_EPS))


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


def _gpt2_buffer(name, array):
    """Whether (name, array) is one of GPT2_BUFFERS, which older transformers wrote beside
    the weights: a buffer's name with its shape (a weight so named but shaped otherwise is
    not skipped, and is refused as a key the mapping does not know)."""
    return any(name.endswith(suffix) and np.ndim(array) == ndim for suffix, ndim in GPT2_BUFFERS.items())


def gpt2_from_theirs(tensors, config):
    """GPT2LMHeadModel's tensors (with or without the `transformer.` prefix that a bare
    GPT2Model's file lacks) -> our state dict."""
    theirs = {}
    for name, tensor in tensors.items():
        array = tensor.read() if isinstance(tensor, StoredTensor) else tensor
        if _gpt2_buffer(name, array):
            continue
        name = name if name.startswith(("transformer.", "lm_head.")) else "transformer." + name
        theirs[name] = array.T if _conv1d(name) else array
    drop_tied_head(theirs, config, "transformer.wte.weight")
    check_sizes(theirs, config, "transformer.h.", {
        "transformer.wte.weight": (config.vocab, config.d_model), "transformer.wpe.weight": (config.max_len, config.d_model),
        "transformer.h.{i}.mlp.c_fc.weight": (config.d_ff, config.d_model)})
    return rename_from_nanogpt(theirs, config.num_layers, config.d_model, "model.safetensors")


GPT2 = Architecture("GPT2LMHeadModel", "gpt2", "GPT-2", gpt2_cannot, gpt2_config_json, gpt2_our_config,
                    gpt2_to_theirs, gpt2_from_theirs)
WRITTEN = [GPT2, LLAMA, QWEN2]                       # a model is written as the first that expresses it
ARCHITECTURES = {architecture.name: architecture for architecture in [*WRITTEN, MISTRAL]}
NOT_READ = {"Mixtral": "a mixture of experts", "Moe": "a mixture of experts", "Qwen3": "Qwen3's norms of q and k",
            "Gemma": "Gemma's norms and embedding scale", "Phi": "Phi's partial rotary embedding"}



def architecture_for(config):
    """The first architecture of WRITTEN that expresses our config; ValueError naming,
    for each, what it cannot express."""
    refusals = {architecture.label: architecture.cannot(config) for architecture in WRITTEN}
    for architecture in WRITTEN:
        if not refusals[architecture.label]:
            return architecture
    raise ValueError("this model cannot be written as " + ", nor as ".join(
        f"{name}: {'; '.join(reasons)}" for name, reasons in refusals.items()))


def architecture_of(spec, path):
    """The entry of ARCHITECTURES that config.json (spec, read from path) names; ValueError
    naming the feature of a known architecture we do not have, or what we read."""
    names = spec.get("architectures") or [a.name for a in ARCHITECTURES.values() if a.model_type == spec.get("model_type")]
    names = names if isinstance(names, list) else [names]               # a malformed file's 5 or "GPT2LMHeadModel"
    known = [ARCHITECTURES[name] for name in names if isinstance(name, str) and name in ARCHITECTURES]
    if known:
        return known[0]
    features = [feature for name in names if isinstance(name, str) for part, feature in NOT_READ.items() if part in name]
    raise ValueError(f"from_hf: {path!r} describes {names or spec.get('model_type')!r}"
                     + (f", which has {features[0]}: not supported" if features else "")
                     + f"; this reads {', '.join(ARCHITECTURES)}")


def hf_files(model, tokenizer):
    """{file name: its content (JSON objects, and the tensors)} of the Hugging Face folder
    of model and tokenizer (None: weights and config only, as save_pretrained writes a
    model); ValueError, before anything is written, for what the architecture or
    tokenizer.json cannot hold."""
    architecture = architecture_for(model.config)
    special = {} if tokenizer is None else special_ids(tokenizer)
    end = special.get(END_OF_TEXT)
    files = {"model.safetensors": architecture.to_theirs(model.state_dict(), model.config),
             "config.json": architecture.write_config(model.config, special),
             "generation_config.json": {"bos_token_id": end, "eos_token_id": end} if end is not None else {}}
    if tokenizer is None:
        return files
    tokens = to_tokenizer_json(tokenizer)
    if len(tokenizer) != model.config.vocab:
        raise ValueError(f"the tokenizer has {len(tokenizer)} tokens but the model {model.config.vocab}")
    ends = {} if end is None else {"bos_token": END_OF_TEXT, "eos_token": END_OF_TEXT}
    return files | {"tokenizer.json": tokens,
                    "tokenizer_config.json": {"tokenizer_class": "PreTrainedTokenizerFast",
                                              "clean_up_tokenization_spaces": False,
                                              "model_max_length": model.config.max_len, **ends}}


def save_hf(model, tokenizer, folder):
    """Write model (our DecoderOnly) and its tokenizer (or None) into folder (made if missing) as
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
    """(our DecoderOnly in eval mode, its tokenizer or None) from a Hugging Face model folder:
    config.json, the weights (model.safetensors, or the shards model.safetensors.index.json
    lists; F32, F16 or BF16, read as float32, see hf_weights.py) and tokenizer.json if there
    (None if not: a folder save_pretrained wrote holds weights only).  Needs no PyTorch and
    runs nothing from the files; a missing or malformed file is one error naming it first."""
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"from_hf: no folder at {os.fspath(folder)!r}")
    config_path, tokenizer_path = os.path.join(folder, "config.json"), os.path.join(folder, "tokenizer.json")
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"from_hf: no config.json in {os.fspath(folder)!r}")
    spec = read_json(config_path, "from_hf")
    architecture = architecture_of(spec, config_path)
    config = _translated(architecture.read_config, config_path, spec)
    tensors, weights_path = _translated(open_weights, folder, folder)
    weights = _translated(architecture.from_theirs, weights_path, tensors, config)
    model = _translated(decoder_reading, weights_path, config, weights)
    if not os.path.isfile(tokenizer_path):
        return model, None
    tokenizer = read_tokenizer_json(tokenizer_path)
    if len(tokenizer) > config.vocab:
        raise ValueError(f"from_hf: {tokenizer_path!r} has {len(tokenizer)} tokens, more than the model's "
                         f"{config.vocab}")
    return model, tokenizer


def _translated(translate, path, *args):
    """translate(*args), its KeyError, TypeError or ValueError one ValueError naming path."""
    try:
        return translate(*args)
    except (KeyError, TypeError, ValueError) as err:
        reason = f"missing {err}" if isinstance(err, KeyError) else str(err)
        reason = reason.removeprefix("from_hf: ")
        # the path once: a reason that names a file already (read_safetensors') is not prefixed with it
        raise ValueError(f"from_hf: {reason}" if repr(os.fspath(path)) in reason or os.fspath(path) in reason
                         else f"from_hf: {os.fspath(path)!r}: {reason}") from None
