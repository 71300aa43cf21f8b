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
- Llama (`LlamaForCausalLM`, llama_config's model: RoPE, RMSNorm, SwiGLU, no biases):
  gate_proj is SwiGLU's W1, up_proj W3, down_proj W2.  Hugging Face's Llama rotates the
  half-split pairs (i, i + d_head/2); a model trained with interleaved pairs (2i, 2i + 1)
  has the rows of its q and k projections reordered within each head on export (even
  rows, then odd), which rotates the same pairs by the same angles: q.k, and so the
  function, is unchanged.  A Llama folder always reads back as rope_pairing="half".
  Llama has no residual dropout: dropout is not written, and reads back as 0.
  Grouped-query attention (fewer key/value heads), RoPE scaling and an RMSNorm eps other
  than ours are refused on import: our Llama has none of them.
"""

import dataclasses
import json
import os
import re

import numpy as np

from transformer.data.bpe import END_OF_TEXT
from transformer.families.decoder_only import DecoderOnlyConfig, llama_config
from transformer.layers import make_norm
from transformer.training.hf_tokenizer import read_json, read_tokenizer_json, special_ids, to_tokenizer_json
from transformer.training.nanogpt import (decoder_holding, nanogpt_parameter_order, rename_from_nanogpt,
                                          rename_to_nanogpt)
from transformer.training.safetensors import read_safetensors, write_safetensors

LAYER_NORM_EPS = 1e-5                                  # nn.LayerNorm's, which our models do not change
RMS_NORM_EPS = make_norm("rms_norm", 1).eps            # our Llama's RMSNorm's
GPT2_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new"}
ACTIVATIONS_FROM_GPT2 = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")
GPT2_BUFFERS = {".attn.bias": 4, ".attn.masked_bias": 0}   # older files' causal mask (1, 1, T, T), fill value (0-d)


@dataclasses.dataclass(frozen=True)
class Architecture:
    """One Hugging Face architecture: its names and the four translations."""
    name: str                      # config.json's "architectures" entry, e.g. "GPT2LMHeadModel"
    model_type: str                # config.json's "model_type", e.g. "gpt2"
    label: str                     # its name in messages, e.g. "GPT-2"
    cannot: callable               # (our config) -> [what of it this architecture cannot express]
    write_config: callable         # (our config, special ids) -> config.json's dict
    read_config: callable          # (config.json's dict) -> our DecoderOnlyConfig; ValueError if unsupported
    to_theirs: callable            # (our state dict, our config) -> {their name: array}
    from_theirs: callable          # ({their name: array}, our config) -> our state dict


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
                             tie_weights=tie_word_embeddings(spec, True), init="gpt2", attention="fused")


def tie_word_embeddings(spec, default):
    """config.json's tie_word_embeddings (default when absent): a bool, or a ValueError (a
    string such as "yes" or "false" would read as true)."""
    tied = spec.get("tie_word_embeddings", default)
    if not isinstance(tied, bool):
        raise ValueError(f"tie_word_embeddings must be true or false, got {tied!r}")
    return tied


def _drop_tied_head(theirs, config, embedding):
    """Leave lm_head.weight out of `theirs` when config.json ties it to `embedding` (our
    tied model reads the embedding).  A file whose lm_head.weight differs from the embedding
    contradicts its config.json and is refused (tying would drop trained weights silently);
    an untied config needs an lm_head.weight."""
    if not config.tie_weights:
        if "lm_head.weight" not in theirs:
            raise KeyError("lm_head.weight (tie_word_embeddings is false)")
        return
    head = theirs.pop("lm_head.weight", None)
    if head is not None and embedding in theirs and not np.array_equal(head, theirs[embedding]):
        raise ValueError(f"config.json ties lm_head to {embedding} (tie_word_embeddings is true), but the file's "
                         "lm_head.weight differs from it; set tie_word_embeddings to false to read it untied")


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
    for name, array in tensors.items():
        if _gpt2_buffer(name, array):
            continue
        name = name if name.startswith(("transformer.", "lm_head.")) else "transformer." + name
        theirs[name] = array.T if _conv1d(name) else array
    _drop_tied_head(theirs, config, "transformer.wte.weight")
    _check_sizes(theirs, config, "transformer.h.", {
        "transformer.wte.weight": (config.vocab, config.d_model), "transformer.wpe.weight": (config.max_len, config.d_model),
        "transformer.h.{i}.mlp.c_fc.weight": (config.d_ff, config.d_model)})
    return rename_from_nanogpt(theirs, config.num_layers, config.d_model, "model.safetensors")


def _check_sizes(theirs, config, block_prefix, expected):
    """The sizes config.json gives must be the weights' before a model of that size is
    built: a config.json claiming a billion positions or layers is refused, not allocated.
    block_prefix: the blocks' names before their number; expected: {name: shape}, "{i}"
    in a name standing for every block."""
    layers = {int(m.group(1)) for name in theirs if (m := re.match(re.escape(block_prefix) + r"(\d+)\.", name))}
    if len(layers) != config.num_layers or sorted(layers) != list(range(len(layers))):
        raise ValueError(f"config.json gives {config.num_layers} layers, the weights hold blocks {sorted(layers)[:8]}")
    expected = {name.format(i=i): shape for name, shape in expected.items() for i in sorted(layers)}
    wrong = [f"{name} {theirs[name].shape if name in theirs else 'missing'}, config.json: {shape}"
             for name, shape in expected.items() if name not in theirs or theirs[name].shape != shape]
    if wrong:
        raise ValueError("the weights disagree with config.json: " + "; ".join(wrong[:3]))


GPT2 = Architecture("GPT2LMHeadModel", "gpt2", "GPT-2", gpt2_cannot, gpt2_config_json, gpt2_our_config,
                    gpt2_to_theirs, gpt2_from_theirs)

LLAMA_TOP = {"embed.weight": "model.embed_tokens.weight", "blocks.norm.weight": "model.norm.weight",
             "out_proj.weight": "lm_head.weight"}
LLAMA_BLOCK = {"self_attn.q_proj.weight": "self_attn.q_proj.weight", "self_attn.k_proj.weight": "self_attn.k_proj.weight",
               "self_attn.v_proj.weight": "self_attn.v_proj.weight", "self_attn.out_proj.weight": "self_attn.o_proj.weight",
               "feed_forward.w1.weight": "mlp.gate_proj.weight", "feed_forward.w3.weight": "mlp.up_proj.weight",
               "feed_forward.w2.weight": "mlp.down_proj.weight", "sublayer1.norm.weight": "input_layernorm.weight",
               "sublayer2.norm.weight": "post_attention_layernorm.weight"}
LLAMA_BUFFERS = ("rotary_emb.inv_freq",)              # RoPE's frequencies, which some older files hold


def llama_names(num_layers):
    """{our parameter name: LlamaForCausalLM's}."""
    return LLAMA_TOP | {f"blocks.layers.{i}.{ours}": f"model.layers.{i}.{theirs}"
                        for i in range(num_layers) for ours, theirs in LLAMA_BLOCK.items()}


def llama_cannot(config):
    """What of our config Llama cannot express."""
    return [reason for broken, reason in [
        (config.positional != "rope", f"positions must be rotary (RoPE), not {config.positional!r}"),
        (config.norm != "rms_norm", f"its norms are RMSNorm, not {config.norm!r}"),
        (config.feed_forward != "swiglu", f"its feed-forward is SwiGLU, not {config.feed_forward!r}"),
        (config.bias or config.head_bias, "it has no biases (the model has bias or head_bias)"),
        (config.pad_id is not None, f"it masks no padding token (the model has pad_id={config.pad_id})")] if broken]


def llama_config_json(config, special_ids):
    """config.json of LlamaForCausalLM for our config (rope_theta both where transformers
    before 5 and from 5 on read it)."""
    end = special_ids.get(END_OF_TEXT)
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": config.vocab,
            "hidden_size": config.d_model, "intermediate_size": config.d_ff, "num_hidden_layers": config.num_layers,
            "num_attention_heads": config.num_heads, "num_key_value_heads": config.num_heads,
            "head_dim": config.d_model // config.num_heads, "max_position_embeddings": config.max_len,
            "hidden_act": "silu", "rms_norm_eps": RMS_NORM_EPS, "rope_theta": float(config.rope_base),
            "rope_parameters": {"rope_type": "default", "rope_theta": float(config.rope_base)},
            "attention_bias": False, "attention_dropout": 0.0, "mlp_bias": False,
            "tie_word_embeddings": config.tie_weights, "initializer_range": 0.02, "pretraining_tp": 1,
            "bos_token_id": end, "eos_token_id": end, "dtype": "float32", "use_cache": True}


def llama_our_config(spec):
    """Our llama_config for LlamaForCausalLM's config.json (its defaults where it is silent);
    ValueError naming the settings our Llama cannot follow."""
    heads, rope = spec["num_attention_heads"], spec.get("rope_parameters") or {}
    if not isinstance(rope, dict):
        raise ValueError(f"rope_parameters must be an object, got {rope!r}")
    theta = spec.get("rope_theta", rope.get("rope_theta", 10000.0))
    unsupported = [f"{key}={value!r}" for key, value, ours in [
        ("hidden_act", spec.get("hidden_act", "silu"), "silu"), ("rms_norm_eps", spec.get("rms_norm_eps", 1e-6), RMS_NORM_EPS),
        ("num_key_value_heads", spec.get("num_key_value_heads") or heads, heads),
        ("attention_bias", spec.get("attention_bias", False), False), ("mlp_bias", spec.get("mlp_bias", False), False),
        ("rope_scaling", spec.get("rope_scaling"), None), ("rope_type", rope.get("rope_type", "default"), "default"),
        ("rope_parameters.rope_theta", rope.get("rope_theta", theta), theta)] if value != ours]
    if unsupported:
        raise ValueError(f"Llama settings this model cannot follow: {', '.join(unsupported)} (ours: SiLU, RMSNorm eps "
                         f"{RMS_NORM_EPS}, a key/value head per head, no biases, RoPE unscaled)")
    config = llama_config(spec["vocab_size"], block_size=spec["max_position_embeddings"], n_layer=spec["num_hidden_layers"],
                          n_head=heads, n_embd=spec["hidden_size"], tie_weights=tie_word_embeddings(spec, False),
                          rope_base=theta, d_ff=spec["intermediate_size"])
    if spec.get("head_dim") not in (None, config.d_model // config.num_heads):
        raise ValueError(f"head_dim={spec['head_dim']!r}: ours is hidden_size / num_attention_heads")
    return config


def half_from_interleaved(d_model, num_heads):
    """The row order that makes a q or k projection written for interleaved RoPE pairs
    (2i, 2i + 1) one for half-split pairs (i, i + d_head/2): in each head, the even rows
    then the odd ones, so that pair i lands on rows i and i + d_head/2."""
    d_head = d_model // num_heads
    within = np.concatenate([np.arange(0, d_head, 2), np.arange(1, d_head, 2)])     # (d_head,)
    return (d_head * np.arange(num_heads)[:, None] + within).reshape(-1)             # (d_model,)


def llama_to_theirs(state, config):
    """Our state dict -> LlamaForCausalLM's tensors: renamed, q and k rows reordered to the
    half-split pairing if the model used interleaved pairs, lm_head left out when tied."""
    names = llama_names(config.num_layers)
    theirs = {names[name]: np.asarray(array, np.float32) for name, array in state.items()}
    if config.rope_pairing == "interleaved":
        rows = half_from_interleaved(config.d_model, config.num_heads)
        theirs |= {name: a[rows] for name, a in theirs.items() if name.endswith(("q_proj.weight", "k_proj.weight"))}
    if config.tie_weights:
        theirs.pop("lm_head.weight")
    return theirs


def llama_from_theirs(tensors, config):
    """LlamaForCausalLM's tensors -> our state dict (for the half-split pairing)."""
    theirs = {name: array for name, array in tensors.items() if not name.endswith(LLAMA_BUFFERS)}
    _drop_tied_head(theirs, config, "model.embed_tokens.weight")
    width = config.d_model
    _check_sizes(theirs, config, "model.layers.", {
        "model.embed_tokens.weight": (config.vocab, width), "model.layers.{i}.mlp.gate_proj.weight": (config.d_ff, width),
        **{f"model.layers.{{i}}.self_attn.{x}_proj.weight": (width, width) for x in "qkv"}})
    ours = {theirs: ours for ours, theirs in llama_names(config.num_layers).items()}
    unknown = sorted(theirs.keys() - ours.keys())
    if unknown:
        raise ValueError(f"tensors LlamaForCausalLM does not have: {unknown[:3]}")
    return {ours[name]: array for name, array in theirs.items()}


LLAMA = Architecture("LlamaForCausalLM", "llama", "Llama", llama_cannot, llama_config_json, llama_our_config,
                     llama_to_theirs, llama_from_theirs)
ARCHITECTURES = {architecture.name: architecture for architecture in [GPT2, LLAMA]}


def architecture_for(config):
    """The first architecture of ARCHITECTURES that expresses our config; ValueError naming,
    for each, what it cannot express."""
    refusals = {architecture.label: architecture.cannot(config) for architecture in ARCHITECTURES.values()}
    for architecture in ARCHITECTURES.values():
        if not refusals[architecture.label]:
            return architecture
    raise ValueError("this model cannot be written as " + ", nor as ".join(
        f"{name}: {'; '.join(reasons)}" for name, reasons in refusals.items()))


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
