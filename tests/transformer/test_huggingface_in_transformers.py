"""Our GPT in `transformers` and theirs here, as a user of both would check it: the logits of
an exported model (GPT-2 and Llama-style) equal ours, greedy generation picks the same
tokens, the fast tokenizer gives our ids; a GPT-2 and a Llama built in transformers (with a
tokenizer trained by `tokenizers`) import with equal logits and ids, and each side trains
the other's model."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch", reason="PyTorch (bench extra)")
transformers = pytest.importorskip("transformers", reason="transformers (bench extra)")
tokenizers = pytest.importorskip("tokenizers", reason="tokenizers (bench extra)")

from nn import functional as F
from nn.optim import AdamW
from tests.transformer.hf_helpers import BPE, CHARS, CORPUS, random_text, tiny_gpt
from tests.transformer.test_huggingface_llama import tiny_llama
from transformer.data.bpe import END_OF_TEXT
from transformer.training.hf_tokenizer import read_tokenizer_json
from transformer.training.huggingface import from_hf, save_hf

transformers.logging.set_verbosity_error()


def their_model(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def their_logits(model, tokens):
    with torch.no_grad():
        return model(torch.from_numpy(tokens)).logits.numpy()


MODELS = [(tiny_gpt, {}), (tiny_gpt, {"bias": False, "tie_weights": False}), (tiny_gpt, {"activation": "gelu_tanh"}),
          (tiny_gpt, {"activation": "relu"}), (tiny_llama, {}), (tiny_llama, {"tie_weights": True}),
          (tiny_llama, {"rope_pairing": "interleaved"}), (tiny_llama, {"rope_pairing": "interleaved", "tie_weights": True})]
NAMES = {tiny_gpt: "GPT2LMHeadModel", tiny_llama: "LlamaForCausalLM"}


@pytest.mark.parametrize("vocab", [BPE, CHARS], ids=["bpe", "char"])
@pytest.mark.parametrize("make, changes", MODELS, ids=[f"{NAMES[make]}-{changes}" for make, changes in MODELS])
def test_exported_logits_in_transformers_equal_ours(tmp_path, vocab, make, changes):
    model = make(len(vocab), seed=3, **changes)
    save_hf(model, vocab, tmp_path)
    theirs = their_model(tmp_path)
    assert type(theirs).__name__ == NAMES[make]
    for seed in range(3):
        tokens = np.random.default_rng(seed).integers(0, len(vocab), (2, 16))
        np.testing.assert_allclose(their_logits(theirs, tokens), model(tokens).data, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("vocab", [BPE, CHARS], ids=["bpe", "char"])
@pytest.mark.parametrize("make, changes", [(tiny_gpt, {}), (tiny_llama, {}), (tiny_llama, {"rope_pairing": "interleaved"})],
                         ids=["gpt2", "llama-half", "llama-interleaved"])
def test_greedy_generation_picks_the_same_30_tokens(tmp_path, vocab, make, changes):
    model = make(len(vocab), seed=4, max_len=40, **changes)
    save_hf(model, vocab, tmp_path)
    theirs = their_model(tmp_path)
    theirs.generation_config.eos_token_id = None                                # do not stop at <|endoftext|>
    for start in (200, 900):
        prompt = vocab.encode(CORPUS[start:start + 30])[None, :8]                 # (1, 8)
        got = theirs.generate(torch.from_numpy(prompt), max_new_tokens=30, do_sample=False,
                              attention_mask=torch.ones(prompt.shape, dtype=torch.long))
        np.testing.assert_array_equal(got.numpy(), model.generate(prompt, 30))


@pytest.mark.parametrize("seed", range(4))
def test_the_fast_tokenizer_gives_our_ids_specials_included(tmp_path, seed):
    save_hf(tiny_gpt(len(BPE)), BPE, tmp_path)
    fast = transformers.AutoTokenizer.from_pretrained(tmp_path)
    raw = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    text = random_text(seed)
    ours = BPE.encode(text).tolist()
    assert END_OF_TEXT in text and BPE.special[END_OF_TEXT] in ours
    assert fast(text)["input_ids"] == ours and raw.encode(text).ids == ours
    assert fast.decode(ours) == text and fast.eos_token == END_OF_TEXT


ASSIGNED_TEXT = st.text(st.characters(exclude_categories=("Cn", "Cs")), max_size=40)    # Python's Unicode


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(ASSIGNED_TEXT, min_size=1, max_size=4))
def test_tokenizers_cut_any_text_as_we_do(tmp_path_factory, parts):
    """Our pre-split (Python's re) and its Oniguruma form in tokenizers agree on any text
    of assigned characters, with special tokens between the parts; so do GPT-2's pre-split
    spelled for re and tokenizers' own ByteLevel, on a tokenizer tokenizers trained."""
    folder = tmp_path_factory.getbasetemp() / "any-text"
    if not (folder / "tokenizer.json").exists():
        save_hf(tiny_gpt(len(BPE)), BPE, folder / "ours")
        gpt2_built_in_transformers(folder)
    text = END_OF_TEXT.join(parts)
    for path in (folder / "ours" / "tokenizer.json", folder / "tokenizer.json"):
        ours = read_tokenizer_json(path)                        # theirs: a BPETokenizer with its ids
        assert tokenizers.Tokenizer.from_file(str(path)).encode(text).ids == ours.encode(text).tolist(), path


def test_the_fast_tokenizer_of_a_character_model(tmp_path):
    save_hf(tiny_gpt(len(CHARS)), CHARS, tmp_path)
    fast = transformers.AutoTokenizer.from_pretrained(tmp_path)
    text = CORPUS[1000:1600]
    assert fast(text)["input_ids"] == CHARS.encode(text).tolist() and fast.decode(CHARS.encode(text)) == text
    assert fast("a\u2603b")["input_ids"] == CHARS.encode("ab").tolist()          # tokenizers drops what it lacks


def gpt2_built_in_transformers(folder, seed=0):
    """A random GPT-2 from transformers and a byte-level BPE trained by tokenizers (GPT-2's
    pre-split, GPT-2's numbering: specials first), saved as their users save them."""
    config = transformers.GPT2Config(vocab_size=320, n_positions=16, n_embd=16, n_layer=2, n_head=2,
                                     bos_token_id=0, eos_token_id=0)
    return built_in_transformers(folder, lambda: transformers.GPT2LMHeadModel(config), seed)


def llama_built_in_transformers(folder, seed=0, tie=False):
    """A random Llama from transformers (RMSNorm eps 1e-5, as Llama 2's and ours) with the
    tokenizer of gpt2_built_in_transformers."""
    config = transformers.LlamaConfig(vocab_size=320, hidden_size=16, intermediate_size=40, num_attention_heads=2,
                                      num_hidden_layers=2, max_position_embeddings=32, rms_norm_eps=1e-5,
                                      rope_theta=500.0, tie_word_embeddings=tie, bos_token_id=0, eos_token_id=0)
    return built_in_transformers(folder, lambda: transformers.LlamaForCausalLM(config), seed)


def built_in_transformers(folder, make_model, seed):
    """make_model() with random weights (seeded) and a byte-level BPE trained by tokenizers,
    saved in folder."""
    trained = tokenizers.ByteLevelBPETokenizer()
    trained.train_from_iterator([CORPUS], vocab_size=320, special_tokens=[END_OF_TEXT], show_progress=False)
    trained.save(str(folder / "tokenizer.json"))
    torch.manual_seed(seed)
    model = make_model().eval()
    with torch.no_grad():                                               # beyond the init: nothing zero or one
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    model.save_pretrained(folder)
    return model


def test_a_gpt2_saved_by_transformers_imports_with_equal_logits_and_ids(tmp_path):
    theirs = gpt2_built_in_transformers(tmp_path)
    ours, tokenizer = from_hf(tmp_path)
    for seed in range(3):
        tokens = np.random.default_rng(seed).integers(0, 320, (2, 16))
        np.testing.assert_allclose(ours(tokens).data, their_logits(theirs, tokens), rtol=1e-5, atol=1e-5)
        text = random_text(seed)
        assert tokenizer.encode(text).tolist() == tokenizers.Tokenizer.from_file(
            str(tmp_path / "tokenizer.json")).encode(text).ids
        assert tokenizer.decode(tokenizer.encode(text)) == text


@pytest.mark.parametrize("tie", [False, True], ids=["untied", "tied"])
def test_a_llama_saved_by_transformers_imports_with_equal_logits_and_trains_here(tmp_path, tie):
    theirs = llama_built_in_transformers(tmp_path, seed=2, tie=tie)
    ours, tokenizer = from_hf(tmp_path)
    assert ours.config.tie_weights == tie and ours.config.rope_base == 500.0
    for seed in range(3):
        tokens = np.random.default_rng(seed).integers(0, 320, (2, 20))
        np.testing.assert_allclose(ours(tokens).data, their_logits(theirs, tokens), rtol=1e-5, atol=1e-5)
    tokens = tokenizer.encode(CORPUS[:2000])[:4 * 17].reshape(4, 17)
    losses = train_here(ours, tokens)
    assert losses[-1] < 0.85 * losses[0], losses
    save_hf(ours.eval(), tokenizer, tmp_path / "back")                         # and back to transformers, trained
    np.testing.assert_allclose(their_logits(their_model(tmp_path / "back"), tokens), ours(tokens).data,
                               rtol=1e-5, atol=1e-5)


def test_rms_norm_eps_agrees_where_it_matters(tmp_path):
    """Embeddings so small that RMSNorm's eps outweighs mean(x^2): an eps other than
    transformers' would move the logits far beyond 1e-5."""
    theirs = llama_built_in_transformers(tmp_path, seed=3)
    with torch.no_grad():
        theirs.model.embed_tokens.weight.mul_(1e-3)
    theirs.save_pretrained(tmp_path)
    ours, _ = from_hf(tmp_path)
    tokens = np.random.default_rng(3).integers(0, 320, (2, 20))
    x = ours.embed.weight.data[tokens]
    assert (x ** 2).mean(-1).max() < 1e-6                                  # eps is 1e-5: it dominates
    np.testing.assert_allclose(ours(tokens).data, their_logits(theirs, tokens), rtol=1e-5, atol=1e-5)


def train_here(model, tokens, steps=20):
    """Losses of `steps` AdamW steps of our engine on one batch of next-token prediction."""
    model.train()
    optimizer = AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(tokens[:, :-1]), tokens[:, 1:])
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


def test_an_imported_gpt2_trains_here(tmp_path):
    gpt2_built_in_transformers(tmp_path, seed=1)
    model, tokenizer = from_hf(tmp_path)
    tokens = tokenizer.encode(CORPUS[:2000])[:4 * 17].reshape(4, 17)
    losses = train_here(model, tokens)
    assert losses[-1] < 0.85 * losses[0], losses
    save_hf(model.eval(), tokenizer, tmp_path / "back")                        # and back to transformers, trained
    np.testing.assert_allclose(their_logits(their_model(tmp_path / "back"), tokens[:, :16]), model(tokens[:, :16]).data,
                               rtol=1e-5, atol=1e-5)
    text = random_text(9)
    assert tokenizers.Tokenizer.from_file(str(tmp_path / "back" / "tokenizer.json")).encode(text).ids == \
        tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")).encode(text).ids


@pytest.mark.parametrize("make, changes", [(tiny_gpt, {}), (tiny_llama, {"rope_pairing": "interleaved"})],
                         ids=["gpt2", "llama-interleaved"])
def test_an_export_trains_in_transformers(tmp_path, make, changes):
    model = make(len(BPE), seed=2, **changes)
    tokens = BPE.encode(CORPUS[:2000])[:4 * 16].reshape(4, 16)                # the context GPT-2 holds
    save_hf(model, BPE, tmp_path)
    theirs = their_model(tmp_path).train()                                  # dropout 0, as exported
    optimizer = torch.optim.AdamW(theirs.parameters(), lr=3e-3)
    batch = torch.from_numpy(tokens)
    losses = []
    for _ in range(20):
        optimizer.zero_grad()
        loss = theirs(batch, labels=batch).loss                              # transformers shifts the labels itself
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    first = F.cross_entropy(model(tokens[:, :-1]), tokens[:, 1:]).item()
    assert abs(losses[0] - first) < 1e-4 and losses[-1] < 0.85 * losses[0], losses
