"""Today's small models as a learner brings them in: built locally by transformers from their
configs (random weights, nothing downloaded), saved weights-only by save_pretrained (no
tokenizer), imported here.  Logits equal transformers' within 1e-4 for grouped-query and
multi-query Llamas, a SmolLM2-shaped Llama, RoPE-scaled Llamas (Llama 3.2's "llama3" and
"linear"), a Qwen2, a Mistral without a sliding window and a GPT-2; 20 greedy tokens equal
transformers' cached generate; cached equal uncached; a bf16 checkpoint within 2e-2; a
sharded one equal; each written back by our exporter and read by transformers."""
import copy
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch (bench extra)")
transformers = pytest.importorskip("transformers", reason="transformers (bench extra)")

from transformer.training.huggingface import from_hf, save_hf  # noqa: E402

transformers.logging.set_verbosity_error()
VOCAB = 300
SMALL = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
             max_position_embeddings=128, rms_norm_eps=1e-6)
LLAMA3_SCALING = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 32}
CONFIGS = {
    "gqa-llama": lambda: transformers.LlamaConfig(**SMALL, num_key_value_heads=2, rope_theta=500.0),
    "mqa-llama": lambda: transformers.LlamaConfig(**SMALL, num_key_value_heads=1),
    "smollm2-shaped": lambda: transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=576, intermediate_size=1536, num_hidden_layers=2, num_attention_heads=9,
        num_key_value_heads=3, max_position_embeddings=8192, rms_norm_eps=1e-5, rope_theta=100000.0,
        tie_word_embeddings=True),
    "llama3.2-scaled": lambda: transformers.LlamaConfig(
        **{**SMALL, "max_position_embeddings": 256}, num_key_value_heads=2, tie_word_embeddings=True,
        rope_parameters={"rope_theta": 500000.0, **LLAMA3_SCALING}),
    "linear-scaled": lambda: transformers.LlamaConfig(**SMALL, rope_parameters={"rope_type": "linear", "factor": 4.0,
                                                                                "rope_theta": 10000.0}),
    "qwen2": lambda: transformers.Qwen2Config(**SMALL, num_key_value_heads=2, tie_word_embeddings=True),
    "mistral": lambda: transformers.MistralConfig(**SMALL, num_key_value_heads=2, sliding_window=None),
    "gpt2": lambda: transformers.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4, n_positions=128),
}


def built(folder, name, seed=0, dtype=torch.float32, **save):
    """transformers' model of CONFIGS[name] with random weights (every one moved off its init:
    no unit gain or zero bias hides a mapping mistake), saved weights-only into folder in
    dtype; returned in float32."""
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(CONFIGS[name](), dtype=torch.float32).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    copy.deepcopy(model).to(dtype).save_pretrained(folder, **save)
    return model                                        # in float32 (a bf16 round trip would round RoPE's too)


def their_logits(model, tokens):
    with torch.no_grad():
        return model(torch.from_numpy(tokens)).logits.numpy()


def their_greedy(model, prompt, steps):
    with torch.no_grad():
        out = model.generate(torch.from_numpy(prompt), max_new_tokens=steps, min_new_tokens=steps, do_sample=False,
                             use_cache=True, eos_token_id=None, pad_token_id=0)
    return out.numpy()


@pytest.mark.parametrize("name", CONFIGS)
def test_a_weights_only_folder_imports_with_their_logits_and_greedy_tokens(tmp_path, name):
    theirs = built(tmp_path, name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "generation_config.json", "model.safetensors"]
    ours, tokenizer = from_hf(tmp_path)
    assert tokenizer is None
    for seed, shape in enumerate([(2, 24), (1, 50), (3, 7)]):
        tokens = np.random.default_rng(seed).integers(0, VOCAB, shape)
        np.testing.assert_allclose(ours(tokens).data, their_logits(theirs, tokens), rtol=1e-4, atol=1e-4)
    prompt = np.random.default_rng(9).integers(0, VOCAB, (2, 5))
    greedy = ours.generate(prompt, 20)
    np.testing.assert_array_equal(greedy, their_greedy(theirs, prompt, 20))
    np.testing.assert_array_equal(ours.generate(prompt, 20, use_cache=False), greedy)


CONFIG_READ = {"gqa-llama": {"num_kv_heads": 2, "norm_eps": 1e-6, "rope_base": 500.0},
               "mqa-llama": {"num_kv_heads": 1},
               "smollm2-shaped": {"num_heads": 9, "num_kv_heads": 3, "d_model": 576, "tie_weights": True,
                                  "norm_eps": 1e-5, "rope_base": 100000.0},
               "llama3.2-scaled": {"rope_scaling": LLAMA3_SCALING, "rope_base": 500000.0, "tie_weights": True},
               "linear-scaled": {"rope_scaling": {"rope_type": "linear", "factor": 4.0}},
               "qwen2": {"qkv_bias": True, "bias": False, "num_kv_heads": 2},
               "mistral": {"num_kv_heads": 2, "max_len": 128}}


@pytest.mark.parametrize("name", CONFIG_READ)
def test_the_config_numbers_are_read_and_written_back_to_the_same_function(tmp_path, name):
    theirs = built(tmp_path / "in", name, seed=1)
    ours, _ = from_hf(tmp_path / "in")
    assert {key: getattr(ours.config, key) for key in CONFIG_READ[name]} == CONFIG_READ[name]
    save_hf(ours, None, tmp_path / "back")                 # weights-only, as it came
    again = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "back", dtype=torch.float32).eval()
    tokens = np.random.default_rng(4).integers(0, VOCAB, (2, 30))
    np.testing.assert_allclose(their_logits(again, tokens), their_logits(theirs, tokens), rtol=1e-4, atol=1e-4)
    assert type(again).__name__ == ("Qwen2ForCausalLM" if name == "qwen2" else "LlamaForCausalLM")


@pytest.mark.parametrize("name", ["smollm2-shaped", "qwen2"])
def test_a_bf16_checkpoint_reads_within_bf16_rounding(tmp_path, name):
    theirs = built(tmp_path, name, seed=2, dtype=torch.bfloat16)
    header = json.loads((tmp_path / "model.safetensors").read_bytes()[8:][:10000].split(b"}}")[0] + b"}}")
    assert {entry["dtype"] for key, entry in header.items() if key != "__metadata__"} == {"BF16"}
    ours, _ = from_hf(tmp_path)
    tokens = np.random.default_rng(2).integers(0, VOCAB, (2, 16))
    logits, before = ours(tokens).data, their_logits(theirs, tokens)     # theirs before rounding to bf16
    assert np.abs(logits - before).max() <= 2e-2 * np.abs(before).max()       # bf16 keeps 8 bits: 2^-8 per weight
    exact = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
    np.testing.assert_allclose(ours(tokens).data, their_logits(exact, tokens), rtol=1e-4, atol=1e-4)


def test_a_sharded_checkpoint_reads_as_one(tmp_path):
    theirs = built(tmp_path, "qwen2", seed=3, max_shard_size="100KB")
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 2 and not (tmp_path / "model.safetensors").exists()
    ours, _ = from_hf(tmp_path)
    tokens = np.random.default_rng(3).integers(0, VOCAB, (2, 16))
    np.testing.assert_allclose(ours(tokens).data, their_logits(theirs, tokens), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("change, says", [
    (lambda c: {**c, "sliding_window": 16}, "a sliding window (sliding_window=16) is not supported"),
    (lambda c: {**c, "architectures": ["MixtralForCausalLM"]}, "which has a mixture of experts: not supported"),
    (lambda c: {**c, "rope_parameters": {"rope_type": "yarn", "factor": 2.0, "rope_theta": 1e4}},
     "RoPE scaling 'yarn' is not supported")])
def test_what_our_model_does_not_have_is_refused_in_one_line_naming_it(tmp_path, change, says):
    built(tmp_path, "mistral")
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps(change(config)))
    with pytest.raises(ValueError) as err:
        from_hf(tmp_path)
    assert says in str(err.value) and "\n" not in str(err.value), err.value
