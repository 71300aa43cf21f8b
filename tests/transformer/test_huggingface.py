"""Hugging Face folders without PyTorch: our GPT written and read back to the same function,
GPT-2's names and layouts, what GPT-2 cannot express refused in one line, tokenizer.json both
ways (our numbering and another's), and every malformed config.json or tokenizer.json one
error naming the file."""
import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.transformer.hf_helpers import BPE, CHARS, CORPUS, random_text, tiny_gpt
from transformer.data.bpe import END_OF_TEXT, BPETokenizer
from transformer.data.bpe_files import bytes_to_unicode
from transformer.masks import causal_mask
from transformer.training.hf_tokenizer import read_tokenizer_json, to_tokenizer_json
from transformer.training.huggingface import from_hf, gpt2_from_theirs, save_hf
from transformer.training.safetensors import read_safetensors, write_safetensors

TOKENS = np.random.default_rng(5).integers(0, len(CHARS), (2, 12))


@pytest.mark.parametrize("vocab", [BPE, CHARS], ids=["bpe", "char"])
@pytest.mark.parametrize("changes", [{}, {"bias": False}, {"tie_weights": False}, {"activation": "relu"},
                                     {"activation": "gelu_tanh", "dtype": "float64"}], ids=str)
def test_written_and_read_back_is_the_same_function(tmp_path, vocab, changes):
    model = tiny_gpt(len(vocab), seed=len(str(changes)), **changes)
    assert save_hf(model, vocab, tmp_path) == "GPT2LMHeadModel"
    back, tokenizer = from_hf(tmp_path)
    assert not back.training and back.config.activation == model.config.activation
    assert back.config.tie_weights == model.config.tie_weights and back.config.bias
    np.testing.assert_allclose(back(TOKENS).data, model(TOKENS).data, rtol=1e-6, atol=1e-6)
    text = CORPUS[:300] + (END_OF_TEXT if vocab is BPE else "")
    np.testing.assert_array_equal(tokenizer.encode(text), vocab.encode(text))
    assert type(tokenizer) is type(vocab) and len(tokenizer) == len(vocab)


def test_gpt2_names_and_conv1d_layout(tmp_path):
    model = tiny_gpt(len(BPE), bias=False)
    save_hf(model, BPE, tmp_path)
    tensors, metadata = read_safetensors(tmp_path / "model.safetensors")
    attn = model.blocks.layers[1].self_attn
    stacked = np.concatenate([attn.q_proj.weight.data, attn.k_proj.weight.data, attn.v_proj.weight.data])
    np.testing.assert_array_equal(tensors["transformer.h.1.attn.c_attn.weight"], stacked.T)     # (in, 3 out)
    np.testing.assert_array_equal(tensors["transformer.h.0.mlp.c_fc.weight"],
                                  model.blocks.layers[0].feed_forward.linear1.weight.data.T)
    assert "lm_head.weight" not in tensors and metadata == {"format": "pt"}                        # tied
    assert not tensors["transformer.h.0.mlp.c_fc.bias"].any() and tensors["transformer.ln_f.bias"].shape == (16,)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architectures"] == ["GPT2LMHeadModel"] and config["n_inner"] == 64
    assert config["bos_token_id"] == config["eos_token_id"] == BPE.special[END_OF_TEXT]


@pytest.mark.parametrize("prefix", ["transformer.", ""], ids=["GPT2LMHeadModel", "bare GPT2Model"])
def test_a_gpt2_file_with_older_transformers_mask_buffers_reads(tmp_path, prefix):
    """Older GPT-2 files keep attention's causal mask (attn.bias, 1 x 1 x T x T) and its fill
    value (attn.masked_bias, 0-d) in every block; a bare GPT2Model's drop the `transformer.` prefix."""
    model = tiny_gpt(len(BPE))
    save_hf(model, BPE, tmp_path)
    tensors, _ = read_safetensors(tmp_path / "model.safetensors")
    theirs = {prefix + name.removeprefix("transformer."): array for name, array in tensors.items()}
    for i in range(model.config.num_layers):
        theirs[f"{prefix}h.{i}.attn.bias"] = causal_mask(16)[None, None].astype(np.float32)   # (1, 1, T, T)
        theirs[f"{prefix}h.{i}.attn.masked_bias"] = np.array(-1e4, np.float32)
    weights = gpt2_from_theirs(theirs, model.config)
    assert sorted(weights) == sorted(name for name in model.state_dict() if name != "out_proj.weight")
    for name, array in weights.items():
        np.testing.assert_array_equal(array, model.state_dict()[name], err_msg=name)


@pytest.mark.parametrize("name, array", [("transformer.h.1.attn.masked_bias", np.zeros(3, np.float32)),
                                         ("transformer.h.0.attn.bias", np.zeros(16, np.float32)),
                                         ("transformer.h.0.attn.rotary", np.zeros(3, np.float32))])
def test_a_tensor_gpt2_does_not_have_is_named_unexpected_not_missing(tmp_path, name, array):
    """A buffer's name with another shape is not skipped: it is a key the mapping does not know."""
    save_hf(tiny_gpt(len(BPE)), BPE, tmp_path)
    tensors, _ = read_safetensors(tmp_path / "model.safetensors")
    write_safetensors(tmp_path / "model.safetensors", {**tensors, name: array})
    with pytest.raises(ValueError) as err:
        from_hf(tmp_path)
    message = str(err.value)
    assert message == (f"from_hf: {str(tmp_path / 'model.safetensors')!r}: model.safetensors: unexpected keys, "
                       f"which this mapping does not know: [{name!r}]"), message


@pytest.mark.parametrize("changes, says", [
    ({"positional": "rope"}, "positions must be learned (GPT-2's wpe), not 'rope'"),
    ({"head_bias": True}, "its lm_head has no bias"),
    ({"pad_id": 0}, "it masks no padding token (the model has pad_id=0)"),
    ({"positional": "sinusoidal", "score": "additive"}, "attention scores must be scaled_dot, not 'additive'")])
def test_what_gpt2_cannot_express_is_refused_before_writing(tmp_path, changes, says):
    model = tiny_gpt(len(BPE), **changes)
    with pytest.raises(ValueError) as err:
        save_hf(model, BPE, tmp_path / "out")
    assert str(err.value).startswith("this model cannot be written as GPT-2: ") and says in str(err.value)
    assert not (tmp_path / "out").exists()


def test_a_tokenizer_of_another_size_is_refused(tmp_path):
    with pytest.raises(ValueError, match=f"the tokenizer has {len(CHARS)} tokens but the model {len(BPE)}"):
        save_hf(tiny_gpt(len(BPE)), CHARS, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def renumbered(tokenizer, seed):
    """tokenizer.json of our BPE with its ids shuffled, and our id -> the shuffled id."""
    spec = to_tokenizer_json(tokenizer)
    permutation = np.random.default_rng(seed).permutation(len(tokenizer))
    spec["model"]["vocab"] = {s: int(permutation[i]) for s, i in spec["model"]["vocab"].items()}
    for token in spec["added_tokens"]:
        token["id"] = int(permutation[token["id"]])
    return spec, permutation


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_tokenizer_numbered_otherwise_encodes_to_its_ids(tmp_path, seed):
    spec, permutation = renumbered(BPE, seed)
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    tokenizer = read_tokenizer_json(tmp_path / "tokenizer.json")
    assert tokenizer.ids is not None and len(tokenizer) == len(BPE)
    text = random_text(seed)
    np.testing.assert_array_equal(tokenizer.encode(text), permutation[BPE.encode(text)])
    assert tokenizer.decode(tokenizer.encode(text)) == BPE.decode(BPE.encode(text))
    with pytest.raises(ValueError, match="token id 307 is outside the vocabulary"):
        tokenizer.decode([len(BPE)])


def test_a_tokenizer_numbered_otherwise_is_written_back_in_its_numbering(tmp_path):
    spec, permutation = renumbered(BPE, 7)
    (tmp_path / "theirs.json").write_text(json.dumps(spec))
    tokenizer = read_tokenizer_json(tmp_path / "theirs.json")
    again = to_tokenizer_json(tokenizer)
    assert again["model"]["vocab"] == spec["model"]["vocab"] and again["model"]["merges"] == spec["model"]["merges"]
    assert [(t["content"], t["id"]) for t in again["added_tokens"]] == [(END_OF_TEXT, int(permutation[-1]))]
    (tmp_path / "again.json").write_text(json.dumps(again))
    text = random_text(7)
    np.testing.assert_array_equal(read_tokenizer_json(tmp_path / "again.json").encode(text), tokenizer.encode(text))


def test_tokenizer_json_holds_our_merges_as_byte_strings():
    spec = to_tokenizer_json(BPE)
    first, alphabet = BPE.merges[0], bytes_to_unicode()
    assert spec["model"]["merges"][0] == [alphabet[first[0]], alphabet[first[1]]]
    assert spec["model"]["vocab"]["Ġ"] == ord(" ") and spec["added_tokens"][0]["content"] == END_OF_TEXT
    assert sorted(spec["model"]["vocab"].values()) == list(range(len(BPE)))
    assert spec["model"]["vocab"][END_OF_TEXT] == spec["added_tokens"][0]["id"] == len(BPE) - 1


def test_a_pattern_without_an_oniguruma_form_or_duplicate_tokens_are_refused():
    with pytest.raises(ValueError, match="pre-split pattern is neither bpe.PATTERN nor GPT-2's"):
        to_tokenizer_json(BPETokenizer(BPE.merges, pattern=r"\S+|\s+"))
    same_bytes = BPETokenizer([(97, 98), (256, 99), (98, 99), (97, 258)])        # ab+c and a+bc: both "abc"
    with pytest.raises(ValueError, match="tokens 257 and 259 are the same bytes b'abc'"):
        to_tokenizer_json(same_bytes)
    with pytest.raises(ValueError, match=r"special tokens \['a'\] are also ordinary tokens' strings"):
        to_tokenizer_json(BPETokenizer([], special_tokens=("a",)))


def edit(spec, path, value):
    """A copy of spec with the entry at path (a tuple of keys) replaced (or removed: None)."""
    spec = json.loads(json.dumps(spec))
    *parents, last = path
    holder = spec
    for key in parents:
        holder = holder[key]
    if value is None:
        del holder[last]
    else:
        holder[last] = value
    return spec


GOOD = to_tokenizer_json(BPE)
BAD_TOKENIZERS = {
    "not JSON": (b"{\"model\": ", "is not UTF-8 JSON"),
    "a list": (b"[]", "holds a JSON list, expected an object"),
    "no model": (edit(GOOD, ("model",), None), "it lacks 'model'"),
    "WordPiece": (edit(GOOD, ("model", "type"), "WordPiece"), "its model is 'WordPiece'; only BPE"),
    "a normalizer": (edit(GOOD, ("normalizer",), {"type": "NFKC"}), "it normalizes text first (NFKC)"),
    "an unknown split": (edit(GOOD, ("pre_tokenizer", "pretokenizers", 0, "pattern"), {"Regex": "\\w+"}),
                         "is neither GPT-2's byte-level split nor ours"),
    "a prefix space": (edit(GOOD, ("pre_tokenizer", "pretokenizers", 1, "add_prefix_space"), True),
                       "does not end in a byte-level step without add_prefix_space"),
    "a missing byte": (edit(GOOD, ("model", "vocab", "Ġ"), None), "the vocabulary lacks the token 'Ġ' of the byte alphabet"),
    "a merge out of order": (edit(GOOD, ("model", "merges"), GOOD["model"]["merges"][::-1]),
                             "uses a token no earlier merge made"),
    "merges not pairs": (edit(GOOD, ("model", "merges"), [["a", "b", "c"]]), "too many values to unpack"),
    "a gap in the ids": (edit(edit(GOOD, ("added_tokens", 0, "id"), 999), ("model", "vocab", END_OF_TEXT), 999),
                         "ids must number the 307 tokens 0..306"),
    "two ids for a special": (edit(GOOD, ("added_tokens", 0, "id"), 999),
                              "the added token '<|endoftext|>' has id 999 but 306 in the vocabulary"),
    "a token nothing makes": (edit(GOOD, ("model", "vocab", "zz"), 307),
                              "neither bytes nor merges, ['<|endoftext|>', 'zz'], are not its added tokens"),
    "a special that is a byte": (edit(GOOD, ("added_tokens", 0, "content"), "a"),
                                 "the added token 'a' has id 306 but 97 in the vocabulary"),
    "characters with specials": (edit(to_tokenizer_json(CHARS), ("added_tokens",), [{"id": 0, "content": "x"}]),
                                 "a character tokenizer (no pre-tokenizer, no merges) with added tokens"),
}


@pytest.mark.parametrize("case", sorted(BAD_TOKENIZERS))
def test_a_malformed_tokenizer_json_is_one_error_naming_it(tmp_path, case):
    content, says = BAD_TOKENIZERS[case]
    path = tmp_path / "tokenizer.json"
    path.write_bytes(content if isinstance(content, bytes) else json.dumps(content).encode())
    with pytest.raises(ValueError) as err:
        read_tokenizer_json(path)
    assert str(path) in str(err.value) and says in str(err.value) and "\n" not in str(err.value), str(err.value)


@pytest.mark.parametrize("change, says", [
    (lambda c: "[1]", "holds a JSON list, expected an object"),
    (lambda c: {**c, "architectures": ["BertModel"], "model_type": "bert"}, "describes ['BertModel']; this reads GPT2LMHeadModel"),
    (lambda c: {**c, "architectures": 5}, "describes [5]; this reads GPT2LMHeadModel"),
    (lambda c: {k: v for k, v in c.items() if k != "n_embd"}, "missing 'n_embd'"),
    (lambda c: {**c, "n_head": 3}, "d_model=16 is not divisible by num_heads=3"),
    (lambda c: {**c, "n_layer": "two"}, "num_layers must be an integer >= 1, got 'two'"),
    (lambda c: {**c, "layer_norm_epsilon": "small"}, "norm_eps must be a number in (0, 1), got 'small'"),
    (lambda c: {**c, "activation_function": "silu"}, "activation_function='silu'"),
    (lambda c: {**c, "n_inner": 48}, "model.safetensors': the weights disagree with config.json: "
                                     "transformer.h.0.mlp.c_fc.weight (64, 16), config.json: (48, 16)"),
    (lambda c: {**c, "n_positions": 10**9}, "transformer.wpe.weight (16, 16), config.json: (1000000000, 16)"),
    (lambda c: {**c, "n_layer": 10**7}, "config.json gives 10000000 layers, the weights hold blocks [0, 1]"),
    (lambda c: {**c, "tie_word_embeddings": False}, "missing 'lm_head.weight (tie_word_embeddings is false)'"),
    (lambda c: {**c, "tie_word_embeddings": "yes"}, "config.json': tie_word_embeddings must be true or false, got 'yes'")])
def test_a_malformed_or_unsupported_config_json_is_one_error_naming_the_file(tmp_path, change, says):
    save_hf(tiny_gpt(len(BPE)), BPE, tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    changed = change(config)
    (tmp_path / "config.json").write_text(changed if isinstance(changed, str) else json.dumps(changed))
    with pytest.raises(ValueError) as err:
        from_hf(tmp_path)
    message = str(err.value)
    assert message.startswith(("from_hf: ", "read_")), message
    assert says in message and "\n" not in message and str(tmp_path) in message, message


@pytest.mark.parametrize("missing, says", [("config.json", "no config.json in "),
                                           ("model.safetensors", "no model.safetensors nor model.safetensors.index.json in ")])
def test_a_missing_file_is_named(tmp_path, missing, says):
    save_hf(tiny_gpt(len(CHARS)), CHARS, tmp_path)
    os.remove(tmp_path / missing)
    with pytest.raises(FileNotFoundError, match=f"from_hf: {says}"):
        from_hf(tmp_path)
    with pytest.raises(FileNotFoundError, match="from_hf: no folder at"):
        from_hf(tmp_path / "nowhere")


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-3, 10**12) | st.floats() | st.text(max_size=5),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                       max_size=3), max_leaves=6)
SMALL = to_tokenizer_json(BPETokenizer(BPE.merges[:5]))


def paths(spec, prefix=()):
    """Every path (tuple of keys and indices) into a JSON object."""
    children = spec.items() if isinstance(spec, dict) else enumerate(spec) if isinstance(spec, list) else []
    for key, value in children:
        yield prefix + (key,)
        if not (isinstance(value, dict) and len(value) > 20):              # not every vocabulary entry
            yield from paths(value, prefix + (key,))


TOKENIZER_PATHS = sorted(paths(SMALL), key=str)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(TOKENIZER_PATHS), JSON_VALUES), min_size=1, max_size=3))
def test_fuzzed_tokenizer_json_reads_or_is_one_valueerror(tmp_path, changes):
    spec = SMALL
    for path, value in changes:
        try:
            spec = edit(spec, path, value)
        except (KeyError, IndexError, TypeError):
            pass                                           # an earlier change removed the path
    (tmp_path / "tokenizer.json").write_text(json.dumps(spec))
    try:
        tokenizer = read_tokenizer_json(tmp_path / "tokenizer.json")
    except ValueError as err:
        assert str(err).startswith("read_tokenizer_json: ") and "\n" not in str(err)
    else:
        assert tokenizer.decode(tokenizer.encode("any text")) == "any text"


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(["vocab_size", "n_positions", "n_embd", "n_layer", "n_head", "n_inner",
                                           "activation_function", "layer_norm_epsilon", "tie_word_embeddings",
                                           "resid_pdrop", "architectures", "model_type"]), JSON_VALUES), max_size=3))
def test_fuzzed_config_json_loads_or_is_one_valueerror_naming_a_file(tmp_path, changes):
    model = read_with_changed_config(tmp_path, lambda: tiny_gpt(len(CHARS)), changes)
    assert model is None or (model.config.vocab == len(CHARS) and model.config.d_model == 16)


def read_with_changed_config(folder, make_model, changes):
    """from_hf of make_model()'s folder (written on the first call) with config.json's
    entries changed: the model it reads, or None after checking that it refused in one
    ValueError naming the folder's file."""
    if not (folder / "model.safetensors").exists():
        save_hf(make_model(), CHARS, folder)
        (folder / "good.json").write_text((folder / "config.json").read_text())
    config = json.loads((folder / "good.json").read_text()) | dict(changes)
    (folder / "config.json").write_text(json.dumps(config))
    try:
        return from_hf(folder)[0]
    except ValueError as err:
        assert str(err).startswith("from_hf: ") and str(folder) in str(err) and "\n" not in str(err), str(err)
        return None


def shard(folder, names_per_file=7):
    """Split folder's model.safetensors into shards and an index as save_pretrained writes them."""
    tensors, _ = read_safetensors(folder / "model.safetensors")
    os.remove(folder / "model.safetensors")
    names = sorted(tensors)
    groups = [names[i:i + names_per_file] for i in range(0, len(names), names_per_file)]
    weight_map = {}
    for number, group in enumerate(groups, 1):
        file = f"model-{number:05d}-of-{len(groups):05d}.safetensors"
        write_safetensors(folder / file, {name: tensors[name] for name in group})
        weight_map |= dict.fromkeys(group, file)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return weight_map


@pytest.mark.parametrize("per_file", [1, 5, 1000])
def test_a_sharded_folder_without_tokenizer_reads_as_one_file(tmp_path, per_file):
    model = tiny_gpt(len(CHARS), seed=per_file)
    save_hf(model, None, tmp_path)
    assert not (tmp_path / "tokenizer.json").exists()
    shard(tmp_path, per_file)
    back, tokenizer = from_hf(tmp_path)
    tokens = np.random.default_rng(per_file).integers(0, len(CHARS), (2, 9))
    assert tokenizer is None
    np.testing.assert_allclose(back(tokens).data, model(tokens).data, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("damage, says", [
    (lambda m, f: {**m, next(iter(m)): "../model-00001-of-00004.safetensors"}, "not a file name in the folder"),
    (lambda m, f: {**m, next(iter(m)): "elsewhere.safetensors"}, "lists 'elsewhere.safetensors', which is not in"),
    (lambda m, f: dict(list(m.items())[1:]), "holds other tensors than model.safetensors.index.json says"),
    (lambda m, f: (f / m[next(iter(m))]).write_bytes(b"\x10" + bytes(20)) and m, "is not a valid safetensors file"),
    (lambda m, f: "weights", "has no weight_map object")])
def test_a_damaged_shard_or_index_is_one_error_naming_it(tmp_path, damage, says):
    save_hf(tiny_gpt(len(CHARS)), CHARS, tmp_path)
    weight_map = shard(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": damage(weight_map, tmp_path)}))
    with pytest.raises((ValueError, FileNotFoundError)) as err:
        from_hf(tmp_path)
    message = str(err.value)
    assert message.startswith("from_hf: ") and says in message and "\n" not in message, message
    assert ".safetensors" in message


def test_a_damaged_model_safetensors_is_named_first(tmp_path):
    save_hf(tiny_gpt(len(CHARS)), CHARS, tmp_path)
    raw = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(raw[:len(raw) // 2])
    with pytest.raises(ValueError) as err:
        from_hf(tmp_path)
    assert f"{str(tmp_path / 'model.safetensors')!r} is not a valid safetensors file" in str(err.value)
    assert "truncated" in str(err.value) and "tokenizer" not in str(err.value)
    assert str(err.value).count(str(tmp_path / "model.safetensors")) == 1       # the path once, not as a prefix too
