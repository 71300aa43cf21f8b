"""The Llama family on Hugging Face: LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM,
read into llama_config's model and written back.

The three share one block (RMSNorm, RoPE inside attention, a SwiGLU feed-forward) and one
set of names; they differ in what their config.json may say:

- Llama: biases nowhere, or (attention_bias and mlp_bias) everywhere; RoPE scaled or not
  (rope_scaling "linear", or "llama3" as in Llama 3.1 and 3.2); grouped-query attention
  (num_key_value_heads below num_attention_heads; 1: multi-query).
- Mistral: Llama's block, with a sliding window over the last `sliding_window` keys;
  read only without one (null, or no shorter than the context), as our attention sees
  every earlier key.
- Qwen2: biases on the query, key and value projections only (our qkv_bias).

Every number is read from config.json, none assumed: the norms' eps (rms_norm_eps,
transformers' default 1e-6 when absent), RoPE's theta and scaling in either layout
transformers writes (rope_theta and rope_scaling at the top level, before transformers 5;
rope_parameters holding rope_type, rope_theta and the scaling's numbers, from 5 on), the
key/value heads, the biases, tied or untied embeddings, the vocabulary (padded or not).  A
feature our model does not have (a sliding window, a mixture of experts, another RoPE
scaling, another activation) is refused in one line naming it.

gate_proj is SwiGLU's W1, up_proj W3, down_proj W2.  Hugging Face's Llama rotates the
half-split pairs (i, i + d_head/2); a model trained here with interleaved pairs (2i, 2i + 1)
has the rows of its q and k projections reordered within each head on export (even rows,
then odd), which rotates the same pairs by the same angles: q.k, and so the function, is
unchanged.  A folder always reads back as rope_pairing="half".  Llama has no residual
dropout: dropout is not written, and reads back as 0.
"""

import dataclasses

import numpy as np

from transformer.data.bpe import END_OF_TEXT
from transformer.families.decoder_only import llama_config
from transformer.relative_position import ROPE_SCALINGS
from transformer.training.hf_architecture import Architecture, check_sizes, drop_tied_head, tie_word_embeddings

HF_RMS_NORM_EPS = 1e-6                                  # transformers' rms_norm_eps when config.json is silent
LLAMA_TOP = {"embed.weight": "model.embed_tokens.weight", "blocks.norm.weight": "model.norm.weight",
             "out_proj.weight": "lm_head.weight"}
LLAMA_BLOCK = {"self_attn.q_proj": "self_attn.q_proj", "self_attn.k_proj": "self_attn.k_proj",
               "self_attn.v_proj": "self_attn.v_proj", "self_attn.out_proj": "self_attn.o_proj",
               "feed_forward.w1": "mlp.gate_proj", "feed_forward.w3": "mlp.up_proj", "feed_forward.w2": "mlp.down_proj",
               "sublayer1.norm": "input_layernorm", "sublayer2.norm": "post_attention_layernorm"}
LLAMA_BUFFERS = ("rotary_emb.inv_freq",)              # RoPE's frequencies, which some older files hold
EXPERTS = ("num_experts", "num_local_experts", "n_routed_experts")


def llama_names(num_layers):
    """{our parameter name: the Llama family's}, weights and biases."""
    return LLAMA_TOP | {f"blocks.layers.{i}.{ours}.{kind}": f"model.layers.{i}.{theirs}.{kind}"
                        for i in range(num_layers) for ours, theirs in LLAMA_BLOCK.items() for kind in ("weight", "bias")}


def llama_block_cannot(config):
    """What of our config the Llama family's block cannot express."""
    return [reason for broken, reason in [
        (config.positional != "rope", f"positions must be rotary (RoPE), not {config.positional!r}"),
        (config.norm != "rms_norm", f"its norms are RMSNorm, not {config.norm!r}"),
        (config.feed_forward != "swiglu", f"its feed-forward is SwiGLU, not {config.feed_forward!r}"),
        (config.head_bias, "its lm_head has no bias (the model has head_bias=True)"),
        (config.pad_id is not None, f"it masks no padding token (the model has pad_id={config.pad_id})")] if broken]


def llama_cannot(config):
    """What of our config LlamaForCausalLM cannot express."""
    return llama_block_cannot(config) + (["it has no biases on q, k, v alone (the model has qkv_bias)"]
                                         if config.qkv_bias and not config.bias else [])


def qwen2_cannot(config):
    """What of our config Qwen2ForCausalLM cannot express."""
    return llama_block_cannot(config) + [reason for broken, reason in [
        (not config.qkv_bias, "its q, k and v projections have biases (the model has qkv_bias=False)"),
        (config.bias, "only its q, k and v projections have biases (the model has bias=True)")] if broken]


def rope_json(config):
    """RoPE's settings in both of transformers' layouts: rope_theta and rope_scaling at the
    top level (before 5), rope_parameters (from 5 on)."""
    theta, scaling = float(config.rope_base), config.rope_scaling
    return {"rope_theta": theta, "rope_scaling": scaling,
            "rope_parameters": {"rope_type": "default", "rope_theta": theta, **(scaling or {})}}


def llama_family_json(config, special_ids, architecture, model_type):
    """config.json of a Llama-family architecture for our config."""
    end = special_ids.get(END_OF_TEXT)
    return {"architectures": [architecture], "model_type": model_type, "vocab_size": config.vocab,
            "hidden_size": config.d_model, "intermediate_size": config.d_ff, "num_hidden_layers": config.num_layers,
            "num_attention_heads": config.num_heads, "num_key_value_heads": config.num_kv_heads or config.num_heads,
            "head_dim": config.d_model // config.num_heads, "max_position_embeddings": config.max_len,
            "hidden_act": "silu", "rms_norm_eps": config.norm_eps, **rope_json(config), "attention_dropout": 0.0,
            "tie_word_embeddings": config.tie_weights, "initializer_range": 0.02,
            "bos_token_id": end, "eos_token_id": end, "dtype": "float32", "use_cache": True}


def llama_config_json(config, special_ids):
    return {**llama_family_json(config, special_ids, "LlamaForCausalLM", "llama"), "attention_bias": config.bias,
            "mlp_bias": config.bias, "pretraining_tp": 1}


def qwen2_config_json(config, special_ids):
    return {**llama_family_json(config, special_ids, "Qwen2ForCausalLM", "qwen2"), "use_sliding_window": False,
            "sliding_window": None, "max_window_layers": config.num_layers,
            "layer_types": ["full_attention"] * config.num_layers}


def rope_settings(spec):
    """(theta, scaling or None) from config.json in either layout; ValueError naming a
    scaling we do not have, or two thetas that disagree."""
    parameters = spec.get("rope_parameters") or {}
    legacy = spec.get("rope_scaling") or {}
    if not isinstance(parameters, dict) or not isinstance(legacy, dict):
        raise ValueError(f"rope_parameters and rope_scaling must be objects, got {parameters!r} and {legacy!r}")
    theta = spec.get("rope_theta", parameters.get("rope_theta", 10000.0))
    if parameters.get("rope_theta", theta) != theta:
        raise ValueError(f"rope_theta={theta!r} but rope_parameters.rope_theta={parameters['rope_theta']!r}")
    source = legacy or parameters
    kind = source.get("rope_type", source.get("type", "default"))
    if kind == "default":
        return theta, None
    if kind not in ROPE_SCALINGS:
        raise ValueError(f"RoPE scaling {kind!r} is not supported (ours: {', '.join(ROPE_SCALINGS)})")
    return theta, {"rope_type": kind, **{key: source[key] for key in ROPE_SCALINGS[kind]}}


def refuse_features(spec):
    """ValueError naming the first feature of config.json our model does not have."""
    window = spec.get("sliding_window")
    if spec.get("use_sliding_window", window is not None) and window is not None and (
            not isinstance(window, int) or window < spec.get("max_position_embeddings", 0)):
        raise ValueError(f"a sliding window (sliding_window={window!r}) is not supported: our attention sees every "
                         "earlier key (set sliding_window to null to read it so)")
    if any(kind != "full_attention" for kind in spec.get("layer_types") or []):
        raise ValueError(f"layer_types {sorted(set(spec['layer_types']))} are not supported: only full_attention")
    experts = [key for key in EXPERTS if spec.get(key)]
    if experts:
        raise ValueError(f"a mixture of experts ({experts[0]}={spec[experts[0]]!r}) is not supported")


def llama_family_config(spec, label, qkv_bias):
    """Our llama_config for a Llama-family config.json (transformers' defaults where it is
    silent); qkv_bias: the architecture's q, k, v always biased (Qwen2).  ValueError naming
    the settings or features our model cannot follow."""
    refuse_features(spec)
    heads = spec["num_attention_heads"]
    if isinstance(heads, bool) or not isinstance(heads, int) or heads < 1:       # before hidden_size // heads
        raise ValueError(f"{label}: num_attention_heads must be a positive integer, got {heads!r}")
    theta, scaling = rope_settings(spec)
    attention_bias, mlp_bias = spec.get("attention_bias", False), spec.get("mlp_bias", False)
    unsupported = [f"{key}={value!r}" for key, value, ok in [
        ("hidden_act", spec.get("hidden_act", "silu"), spec.get("hidden_act", "silu") == "silu"),
        ("attention_bias", attention_bias, attention_bias == mlp_bias or qkv_bias),
        ("head_dim", spec.get("head_dim"), spec.get("head_dim") in (None, spec["hidden_size"] // heads))] if not ok]
    if unsupported:
        raise ValueError(f"{label} settings this model cannot follow: {', '.join(unsupported)} (ours: SiLU, biases "
                         "in attention and MLP alike, head_dim = hidden_size / num_attention_heads)")
    config = llama_config(spec["vocab_size"], block_size=spec["max_position_embeddings"], n_layer=spec["num_hidden_layers"],
                          n_head=heads, n_embd=spec["hidden_size"], tie_weights=tie_word_embeddings(spec, False),
                          rope_base=theta, d_ff=spec["intermediate_size"],
                          n_kv_head=spec.get("num_key_value_heads") or heads)
    return dataclasses.replace(config, rope_scaling=scaling, norm_eps=spec.get("rms_norm_eps", HF_RMS_NORM_EPS),
                               bias=bool(attention_bias and not qkv_bias), qkv_bias=qkv_bias)


def half_from_interleaved(width, num_heads):
    """The row order that makes a q or k projection (width = num_heads * d_head rows)
    written for interleaved RoPE pairs (2i, 2i + 1) one for half-split pairs
    (i, i + d_head/2): in each head, the even rows then the odd ones, so that pair i lands
    on rows i and i + d_head/2."""
    d_head = width // num_heads
    within = np.concatenate([np.arange(0, d_head, 2), np.arange(1, d_head, 2)])     # (d_head,)
    return (d_head * np.arange(num_heads)[:, None] + within).reshape(-1)             # (num_heads * d_head,)


def llama_to_theirs(state, config):
    """Our state dict -> the Llama family's tensors: renamed, q and k rows (and biases)
    reordered to the half-split pairing if the model used interleaved pairs, lm_head left
    out when tied."""
    names = llama_names(config.num_layers)
    theirs = {names[name]: np.asarray(array, np.float32) for name, array in state.items()}
    if config.rope_pairing == "interleaved":
        d_head = config.d_model // config.num_heads
        for proj, heads in (("q_proj", config.num_heads), ("k_proj", config.num_kv_heads or config.num_heads)):
            rows = half_from_interleaved(heads * d_head, heads)
            theirs |= {name: a[rows] for name, a in theirs.items() if f".{proj}." in name}
    if config.tie_weights:
        theirs.pop("lm_head.weight")
    return theirs


def llama_from_theirs(tensors, config):
    """The Llama family's tensors -> ours (for the half-split pairing), unread; sizes checked."""
    theirs = {name: tensor for name, tensor in tensors.items() if not name.endswith(LLAMA_BUFFERS)}
    drop_tied_head(theirs, config, "model.embed_tokens.weight")
    width, kv_width = config.d_model, (config.num_kv_heads or config.num_heads) * (config.d_model // config.num_heads)
    check_sizes(theirs, config, "model.layers.", {
        "model.embed_tokens.weight": (config.vocab, width), "model.layers.{i}.mlp.gate_proj.weight": (config.d_ff, width),
        "model.layers.{i}.self_attn.q_proj.weight": (width, width),
        **{f"model.layers.{{i}}.self_attn.{x}_proj.weight": (kv_width, width) for x in "kv"}})
    ours = {theirs: ours for ours, theirs in llama_names(config.num_layers).items()}
    unknown = sorted(theirs.keys() - ours.keys())
    if unknown:
        raise ValueError(f"tensors this architecture does not have: {unknown[:3]}")
    return {ours[name]: tensor for name, tensor in theirs.items()}


LLAMA = Architecture("LlamaForCausalLM", "llama", "Llama", llama_cannot, llama_config_json,
                     lambda spec: llama_family_config(spec, "Llama", False), llama_to_theirs, llama_from_theirs)
QWEN2 = Architecture("Qwen2ForCausalLM", "qwen2", "Qwen2", qwen2_cannot, qwen2_config_json,
                     lambda spec: llama_family_config(spec, "Qwen2", True), llama_to_theirs, llama_from_theirs)
MISTRAL = Architecture("MistralForCausalLM", "mistral", "Mistral", llama_cannot, None,      # read only: Llama writes it
                       lambda spec: llama_family_config(spec, "Mistral", False), llama_to_theirs, llama_from_theirs)
