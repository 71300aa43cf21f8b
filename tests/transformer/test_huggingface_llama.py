"""Llama-style models as Hugging Face's LlamaForCausalLM folders, without PyTorch: written and
read back to the same function for both RoPE pairings, tied and untied; Llama's names,
layout and config.json; what Llama cannot express refused in one line; every malformed or
unsupported Llama config.json one error naming the file."""
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.transformer.hf_helpers import BPE, CHARS, CORPUS, tiny_gpt
from tests.transformer.test_huggingface import JSON_VALUES, read_with_changed_config
from transformer.data.bpe import END_OF_TEXT
from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig, llama_config
from transformer.training.hf_llama import half_from_interleaved
from transformer.training.huggingface import from_hf, save_hf
from transformer.training.safetensors import read_safetensors, write_safetensors

TOKENS = np.random.default_rng(6).integers(0, len(CHARS), (2, 12))


def tiny_llama(vocab, seed=0, max_len=32, **changes):
    """A tiny Llama-style model (2 layers, 2 heads of 8), every weight moved off its init so
    that unit gains or a symmetric layout would not hide a mapping mistake."""
    config = llama_config(vocab, block_size=max_len, n_layer=2, n_head=2, n_embd=16, d_ff=40, rope_base=500.0)
    model = DecoderOnly(DecoderOnlyConfig(**{**config.__dict__, **changes}))
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data = (p.data + 0.1 * rng.standard_normal(p.shape)).astype(p.data.dtype)
    return model.eval()


@pytest.mark.parametrize("vocab", [BPE, CHARS], ids=["bpe", "char"])
@pytest.mark.parametrize("changes", [{}, {"tie_weights": True}, {"rope_pairing": "interleaved"},
                                     {"rope_pairing": "interleaved", "tie_weights": True, "dtype": "float64"}], ids=str)
def test_written_and_read_back_is_the_same_function(tmp_path, vocab, changes):
    model = tiny_llama(len(vocab), seed=len(str(changes)), **changes)
    assert save_hf(model, vocab, tmp_path) == "LlamaForCausalLM"
    back, tokenizer = from_hf(tmp_path)
    assert not back.training and back.config.rope_pairing == "half" and back.config.rope_base == 500.0
    assert back.config.tie_weights == model.config.tie_weights and (back.config.norm, back.config.feed_forward) == (
        "rms_norm", "swiglu")
    np.testing.assert_allclose(back(TOKENS).data, model(TOKENS).data, rtol=1e-5, atol=1e-6)
    prompt = TOKENS[:, :4]
    np.testing.assert_array_equal(back.generate(prompt, 20), model.generate(prompt, 20))
    text = CORPUS[:300] + (END_OF_TEXT if vocab is BPE else "")
    np.testing.assert_array_equal(tokenizer.encode(text), vocab.encode(text))


def test_llama_names_layout_and_config(tmp_path):
    model = tiny_llama(len(BPE), rope_pairing="interleaved")
    save_hf(model, BPE, tmp_path)
    tensors, _ = read_safetensors(tmp_path / "model.safetensors")
    layer = model.blocks.layers[1]
    rows = half_from_interleaved(16, 2)
    np.testing.assert_array_equal(rows, [0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15])
    expected = {"self_attn.q_proj": layer.self_attn.q_proj.weight.data[rows],
                "self_attn.k_proj": layer.self_attn.k_proj.weight.data[rows],
                "self_attn.v_proj": layer.self_attn.v_proj.weight.data, "self_attn.o_proj": layer.self_attn.out_proj.weight.data,
                "mlp.gate_proj": layer.feed_forward.w1.weight.data, "mlp.up_proj": layer.feed_forward.w3.weight.data,
                "mlp.down_proj": layer.feed_forward.w2.weight.data, "input_layernorm": layer.sublayer1.norm.weight.data,
                "post_attention_layernorm": layer.sublayer2.norm.weight.data}
    for name, weight in expected.items():
        np.testing.assert_array_equal(tensors[f"model.layers.1.{name}.weight"], weight, err_msg=name)
    np.testing.assert_array_equal(tensors["model.norm.weight"], model.blocks.norm.weight.data)
    np.testing.assert_array_equal(tensors["lm_head.weight"], model.out_proj.weight.data)
    assert len(tensors) == 2 * 9 + 3 and all(a.dtype == np.float32 for a in tensors.values())
    config = json.loads((tmp_path / "config.json").read_text())
    assert {key: config[key] for key in ("model_type", "hidden_size", "intermediate_size", "num_attention_heads",
                                         "num_key_value_heads", "num_hidden_layers", "rms_norm_eps", "rope_theta",
                                         "tie_word_embeddings", "vocab_size", "max_position_embeddings", "hidden_act",
                                         "attention_bias", "mlp_bias")} == {
        "model_type": "llama", "hidden_size": 16, "intermediate_size": 40, "num_attention_heads": 2,
        "num_key_value_heads": 2, "num_hidden_layers": 2, "rms_norm_eps": 1e-5, "rope_theta": 500.0,
        "tie_word_embeddings": False, "vocab_size": len(BPE), "max_position_embeddings": 32, "hidden_act": "silu",
        "attention_bias": False, "mlp_bias": False}
    assert config["architectures"] == ["LlamaForCausalLM"] and config["eos_token_id"] == BPE.special[END_OF_TEXT]
    generation = json.loads((tmp_path / "generation_config.json").read_text())
    assert generation == {"bos_token_id": BPE.special[END_OF_TEXT], "eos_token_id": BPE.special[END_OF_TEXT]}


@pytest.mark.parametrize("changes, says", [
    ({"positional": "learned"}, "positions must be rotary (RoPE), not 'learned'"),
    ({"head_bias": True}, "its lm_head has no bias (the model has head_bias=True)"),
    ({"norm": "layer_norm"}, "its norms are RMSNorm, not 'layer_norm'"),
    ({"feed_forward": "mlp", "activation": "gelu"}, "its feed-forward is SwiGLU, not 'mlp'"),
    ({"pad_id": 0}, "it masks no padding token (the model has pad_id=0)")])
def test_what_no_architecture_can_express_is_refused_before_writing(tmp_path, changes, says):
    with pytest.raises(ValueError) as err:
        save_hf(tiny_llama(len(BPE), **changes), BPE, tmp_path / "out")
    message = str(err.value)
    assert message.startswith("this model cannot be written as GPT-2: ") and "\n" not in message, message
    llama, qwen2 = message.split(", nor as Llama: ")[1].split(", nor as Qwen2: ")
    assert says in llama and says in qwen2, message
    assert not (tmp_path / "out").exists()


BAD_CONFIGS = [
    (lambda c: {**c, "architectures": 7}, "describes [7]; this reads GPT2LMHeadModel, LlamaForCausalLM"),
    (lambda c: {**c, "architectures": ["MixtralForCausalLM"]}, "which has a mixture of experts: not supported"),
    (lambda c: {**c, "num_local_experts": 8}, "a mixture of experts (num_local_experts=8) is not supported"),
    (lambda c: {**c, "sliding_window": 8}, "a sliding window (sliding_window=8) is not supported"),
    (lambda c: {**c, "layer_types": ["sliding_attention"] * 2}, "layer_types ['sliding_attention'] are not supported"),
    (lambda c: {k: v for k, v in c.items() if k != "hidden_size"}, "missing 'hidden_size'"),
    (lambda c: {**c, "rms_norm_eps": 2.0}, "norm_eps must be a number in (0, 1), got 2.0"),
    (lambda c: {**c, "num_key_value_heads": 1}, "k_proj.weight (16, 16), config.json: (8, 16)"),
    (lambda c: {**c, "num_key_value_heads": 3}, "num_heads=2 is not a multiple of num_kv_heads=3"),
    (lambda c: {**c, "hidden_act": "gelu"}, "cannot follow: hidden_act='gelu'"),
    (lambda c: {**c, "attention_bias": True, "mlp_bias": False}, "cannot follow: attention_bias=True"),
    (lambda c: {**c, "attention_bias": True, "mlp_bias": True}, "weights missing: blocks.layers.0.feed_forward.w1.bias"),
    (lambda c: {**c, "rope_scaling": {"rope_type": "yarn", "factor": 2.0}}, "RoPE scaling 'yarn' is not supported"),
    (lambda c: {**c, "rope_scaling": {"rope_type": "linear"}}, "missing 'factor'"),
    (lambda c: {**c, "rope_scaling": {"type": "linear", "factor": -2}}, "takes exactly factor (numbers > 0)"),
    (lambda c: {**c, "rope_parameters": {"rope_type": "llama3", "rope_theta": 500.0}}, "missing 'factor'"),
    (lambda c: {**c, "rope_parameters": {"rope_theta": 9.0}}, "rope_parameters.rope_theta=9.0"),
    (lambda c: {**c, "rope_parameters": "default"}, "rope_parameters and rope_scaling must be objects"),
    (lambda c: {**c, "rope_theta": 1, "rope_parameters": None}, "rope_base must be a number > 1, got 1"),
    (lambda c: {**c, "head_dim": 4}, "cannot follow: head_dim=4"),
    (lambda c: {**c, "num_attention_heads": 3, "num_key_value_heads": 3, "head_dim": None},
     "d_model=16 is not divisible by num_heads=3"),
    (lambda c: {**c, "intermediate_size": 48}, "model.safetensors': the weights disagree with config.json: "
                                               "model.layers.0.mlp.gate_proj.weight (40, 16), config.json: (48, 16)"),
    (lambda c: {**c, "vocab_size": 10**9}, "model.embed_tokens.weight (307, 16), config.json: (1000000000, 16)"),
    (lambda c: {**c, "num_hidden_layers": 10**7}, "config.json gives 10000000 layers, the weights hold blocks [0, 1]"),
    (lambda c: {**c, "num_hidden_layers": 1}, "config.json gives 1 layers, the weights hold blocks [0, 1]"),
    (lambda c: {**c, "tie_word_embeddings": False}, "missing 'lm_head.weight (tie_word_embeddings is false)'"),
    (lambda c: {**c, "tie_word_embeddings": "yes"}, "config.json': tie_word_embeddings must be true or false, got 'yes'")]


@pytest.mark.parametrize("change, says", BAD_CONFIGS, ids=[says[:40] for _, says in BAD_CONFIGS])
def test_a_malformed_or_unsupported_llama_config_json_is_one_error_naming_the_file(tmp_path, change, says):
    save_hf(tiny_llama(len(BPE), tie_weights=True), BPE, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(change(config)))
    with pytest.raises(ValueError) as err:
        from_hf(tmp_path)
    message = str(err.value)
    assert message.startswith("from_hf: ") and says in message, message
    assert "\n" not in message and str(tmp_path) in message, message


def test_a_weight_llama_does_not_have_is_named(tmp_path):
    save_hf(tiny_llama(len(CHARS)), CHARS, tmp_path)
    tensors, _ = read_safetensors(tmp_path / "model.safetensors")
    tensors["model.layers.0.self_attn.q_proj.bias"] = np.zeros(16, np.float32)
    tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = np.ones(4, np.float32)     # an old file's buffer: fine
    write_safetensors(tmp_path / "model.safetensors", tensors)
    with pytest.raises(ValueError, match=r"1 weights unexpected: blocks.layers.0.self_attn.q_proj.bias$") as err:
        from_hf(tmp_path)
    assert str(tmp_path / "model.safetensors") in str(err.value)


EMBEDDINGS = {"GPT-2": (tiny_gpt, "transformer.wte.weight"), "Llama": (tiny_llama, "model.embed_tokens.weight")}


@pytest.mark.parametrize("family", EMBEDDINGS)
@pytest.mark.parametrize("seed", [0, 1])
def test_a_tied_config_reads_an_lm_head_equal_to_the_embedding_and_refuses_one_that_differs(tmp_path, family, seed):
    """tie_word_embeddings true beside a file's own lm_head.weight: tied when they are equal,
    refused (not the file's lm_head dropped silently) when they differ."""
    make, embedding = EMBEDDINGS[family]
    model = make(len(CHARS), seed=seed, tie_weights=False)
    save_hf(model, CHARS, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    with pytest.raises(ValueError) as err:
        from_hf(tmp_path)
    assert str(err.value) == (f"from_hf: {str(tmp_path / 'model.safetensors')!r}: config.json ties lm_head to "
                              f"{embedding} (tie_word_embeddings is true), but the file's lm_head.weight differs from "
                              "it; set tie_word_embeddings to false to read it untied"), err.value
    tensors, _ = read_safetensors(tmp_path / "model.safetensors")
    write_safetensors(tmp_path / "model.safetensors", {**tensors, "lm_head.weight": tensors[embedding]})
    back, _ = from_hf(tmp_path)
    model.out_proj.weight.data = model.embed.weight.data.copy()
    assert back.config.tie_weights
    np.testing.assert_allclose(back(TOKENS).data, model(TOKENS).data, rtol=1e-6, atol=1e-6)


LLAMA_KEYS = ["vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
              "num_hidden_layers", "rms_norm_eps", "rope_theta", "rope_parameters", "rope_scaling", "head_dim",
              "tie_word_embeddings", "max_position_embeddings", "hidden_act", "attention_bias", "architectures",
              "model_type"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(LLAMA_KEYS), JSON_VALUES), max_size=3))
def test_fuzzed_llama_config_json_loads_or_is_one_valueerror_naming_a_file(tmp_path, changes):
    model = read_with_changed_config(tmp_path, lambda: tiny_llama(len(CHARS)), changes)
    if model is not None:
        logits = model(TOKENS[:, :model.config.max_len]).data                 # (2, T, vocab)
        assert model.config.vocab == len(CHARS) and logits.shape[-1] == len(CHARS) and np.isfinite(logits).all()


@pytest.mark.parametrize("heads", [False, 0, -2, 2.5, "4"])
def test_a_head_count_that_is_no_positive_integer_is_one_valueerror(tmp_path, heads):
    """hypothesis found num_attention_heads = false dividing hidden_size by zero."""
    assert read_with_changed_config(tmp_path, lambda: tiny_llama(len(CHARS)), [("num_attention_heads", heads)]) is None
