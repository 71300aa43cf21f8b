"""The character GPT: its configuration as nanoGPT's, generation with and without the cache,
the nanoGPT weight mapping and file reader, and the training loop."""

import math
import os
import pickle

import numpy as np
import pytest

import nn
from autograd import gradcheck, manual_seed
from nn import functional as F
from tests.transformer.helpers import tiny_transformer, to_float64
from transformer.data.text import TextDataset
from transformer.layers import FeedForward
from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig, gpt_config, llama_config, pick_next_token
from transformer.training.checkpoints import run_state
from transformer.training.lm import LMJob, LMTrainConfig, decay_groups, load_lm, step_functions, save_lm, train_lm
from transformer.training.nanogpt import from_nanogpt, load_nanogpt_checkpoint, read_meta, read_torch_file, to_nanogpt

DATA = os.path.join(os.path.dirname(os.path.dirname(__file__)), "data")


def tiny_gpt(seed=0, bias=False, block_size=8, vocab=11, layers=2, activation="gelu"):
    manual_seed(seed)
    return DecoderOnly(gpt_config(vocab, block_size=block_size, n_layer=layers, n_head=2, n_embd=8, bias=bias,
                                  attention="composed", activation=activation))


@pytest.mark.parametrize("bias, activation", [(False, "gelu"), (True, "gelu"), (False, "silu"), (True, "gelu_tanh")])
def test_gpt_gradcheck(bias, activation):
    """demos.gpt --activation builds these: each a GPT whose gradients are right."""
    model = to_float64(tiny_gpt(bias=bias, activation=activation))
    used, wanted = model.blocks.layers[0].feed_forward.activation, FeedForward.ACTIVATIONS[activation]()
    assert type(used) is type(wanted) and getattr(used, "approximate", 0) == getattr(wanted, "approximate", 0)   # GELU: two
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 11, (2, 5)), rng.integers(0, 11, (2, 5))
    assert gradcheck(lambda *p: F.cross_entropy(model(x), y), model.parameters())


def test_gpt_configuration_is_nanogpts():
    model = tiny_gpt(layers=3)
    assert model.out_proj.weight is model.embed.weight and model.out_proj.bias is None
    names = [n for n, _ in model.named_parameters()]
    assert not any(n.endswith("bias") for n in names)                  # bias=False everywhere
    assert model.blocks.layers[0].feed_forward.activation.approximate == "none"
    assert model.blocks.layers[0].feed_forward.linear1.weight.shape == (32, 8)   # d_ff = 4 d_model
    # GPT-2 init: residual projections have std 0.02 / sqrt(2 n_layer), other matrices 0.02
    manual_seed(0)
    big = DecoderOnly(gpt_config(50, block_size=64, n_layer=3, n_head=4, n_embd=128, bias=True))
    std = lambda p: float(p.data.std())                                  # noqa: E731
    assert abs(std(big.blocks.layers[1].self_attn.out_proj.weight) - 0.02 / math.sqrt(6)) < 0.001
    assert abs(std(big.blocks.layers[2].feed_forward.linear2.weight) - 0.02 / math.sqrt(6)) < 0.0005
    assert abs(std(big.blocks.layers[0].self_attn.q_proj.weight) - 0.02) < 0.001
    assert abs(std(big.embed.weight) - 0.02) < 0.001 and abs(std(big.positional.weight) - 0.02) < 0.001
    assert not big.blocks.layers[0].feed_forward.linear1.bias.data.any()
    assert (big.blocks.norm.weight.data == 1).all()


def test_sampling_picks_from_the_top_k_and_is_seeded():
    logits = np.log(np.array([[0.1, 0.5, 0.3, 0.1], [0.7, 0.1, 0.1, 0.1]]))
    draws = np.stack([pick_next_token(logits, 1.0, 2, np.random.default_rng(s)) for s in range(300)])
    assert set(draws[:, 0]) == {1, 2} and set(draws[:, 1]) <= {0, 1, 2, 3}
    assert abs((draws[:, 0] == 1).mean() - 0.5 / 0.8) < 0.08           # renormalised over the top 2
    np.testing.assert_array_equal(pick_next_token(logits, 0.0), [1, 0])
    np.testing.assert_array_equal(pick_next_token(logits, 5.0, 1, None), [1, 0])   # top-k 1 is greedy
    a = [pick_next_token(logits, 0.8, None, np.random.default_rng(3)) for _ in range(2)]
    np.testing.assert_array_equal(*a)


@pytest.mark.parametrize("temperature,top_k", [(0.0, None), (1.0, 3), (0.7, None)])
def test_cached_generation_equals_uncached_also_past_the_context(temperature, top_k):
    model = to_float64(tiny_gpt(seed=3, block_size=6))
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    runs = [model.generate(prompt, 9, temperature, top_k, np.random.default_rng(0), use_cache=cache,
                           return_logits=True) for cache in (True, False)]
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_allclose(runs[0][1], runs[1][1], rtol=1e-12, atol=1e-12)
    assert runs[0][0].shape == (2, 12)                                  # 3 + 9 > block_size 6: cropped


def test_cached_generation_handles_generated_padding():
    """A model that generates its pad id: with the cache the pads must stay masked as keys,
    exactly as without it (the cache used to forget them: logits 0.4 apart)."""
    manual_seed(4)
    model = to_float64(DecoderOnly(DecoderOnlyConfig(vocab=7, d_model=8, num_heads=2, d_ff=8, num_layers=2,
                                                     max_len=12, pad_id=0)))
    model.out_proj.bias.data[0] += 5.0                                  # the pad id wins often
    prompt = np.array([[1, 3, 4], [1, 0, 5]])                           # a pad inside a prompt too
    cached, cached_logits = model.generate(prompt, 7, use_cache=True, return_logits=True)
    plain, plain_logits = model.generate(prompt, 7, use_cache=False, return_logits=True)
    assert (cached[:, 3:] == 0).any()
    np.testing.assert_array_equal(cached, plain)
    np.testing.assert_allclose(cached_logits, plain_logits, rtol=1e-12, atol=1e-12)


def test_decoder_only_input_errors():
    model = tiny_gpt()
    with pytest.raises(ValueError, match=r"shape \(batch, seq\), got shape \(5,\)"):
        model(np.arange(5))
    with pytest.raises(ValueError, match="exceed the context length max_len=8"):
        model(np.zeros((1, 9), dtype=np.int64))
    with pytest.raises(IndexError, match="token id 11 is out of range"):
        model(np.array([[1, 11]]))
    with pytest.raises(ValueError, match="needs a numpy Generator"):
        model.generate(np.array([[1]]), 2, temperature=1.0)
    with pytest.raises(ValueError, match="init must be"):
        DecoderOnly(DecoderOnlyConfig(vocab=5, init="xavier"))


# ----- nanoGPT -----

def nanogpt_forward(state, tokens, n_head):
    """nanoGPT's GPT.forward written out in numpy from its equations (no code of ours), float64."""
    s = {k.removeprefix("_orig_mod."): np.asarray(v, np.float64) for k, v in state.items()}

    def layer_norm(x, name):
        mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + 1e-5) * s[name + ".weight"] + s.get(name + ".bias", 0.0)

    def linear(x, name):
        return x @ s[name + ".weight"].T + s.get(name + ".bias", 0.0)

    batch, length = tokens.shape
    x = s["transformer.wte.weight"][tokens] + s["transformer.wpe.weight"][:length]
    width = x.shape[-1]
    heads = lambda t: t.reshape(batch, length, n_head, width // n_head).transpose(0, 2, 1, 3)   # noqa: E731
    n_layer = len({k.split(".")[2] for k in s if k.startswith("transformer.h.")})
    causal = np.tril(np.ones((length, length), bool))
    for i in range(n_layer):
        h = f"transformer.h.{i}."
        q, k, v = np.split(linear(layer_norm(x, h + "ln_1"), h + "attn.c_attn"), 3, axis=-1)
        att = heads(q) @ heads(k).transpose(0, 1, 3, 2) / math.sqrt(width // n_head)
        att = np.where(causal, att, -np.inf)
        att = np.exp(att - att.max(-1, keepdims=True))
        y = (att / att.sum(-1, keepdims=True)) @ heads(v)
        x = x + linear(y.transpose(0, 2, 1, 3).reshape(batch, length, width), h + "attn.c_proj")
        u = linear(layer_norm(x, h + "ln_2"), h + "mlp.c_fc")
        gelu = 0.5 * u * (1 + np.vectorize(math.erf)(u / math.sqrt(2)))
        x = x + linear(gelu, h + "mlp.c_proj")
    return layer_norm(x, "transformer.ln_f") @ s["lm_head.weight"].T


@pytest.mark.parametrize("bias,prefix", [(False, ""), (True, "_orig_mod.")])
def test_nanogpt_state_dict_gives_nanogpts_logits(bias, prefix):
    rng = np.random.default_rng(5)
    width, vocab, layers = 16, 13, 2
    state = {"transformer.wte.weight": rng.normal(0, 0.3, (vocab, width)),
             "transformer.wpe.weight": rng.normal(0, 0.3, (10, width)),
             "transformer.ln_f.weight": 1 + rng.normal(0, 0.1, width)}
    for i in range(layers):
        h = f"transformer.h.{i}."
        for name, shape in (("ln_1", (width,)), ("attn.c_attn", (3 * width, width)), ("attn.c_proj", (width, width)),
                            ("ln_2", (width,)), ("mlp.c_fc", (4 * width, width)), ("mlp.c_proj", (width, 4 * width))):
            state[h + name + ".weight"] = (1 if name.startswith("ln") else 0) + rng.normal(0, 0.2, shape)
            if bias:
                state[h + name + ".bias"] = rng.normal(0, 0.1, shape[0])
        state[h + "attn.bias"] = np.tril(np.ones((1, 1, 10, 10)))          # old nanoGPT's mask buffer
    if bias:
        state["transformer.ln_f.bias"] = rng.normal(0, 0.1, width)
    state["lm_head.weight"] = state["transformer.wte.weight"]
    state = {prefix + k: v.astype(np.float32) for k, v in state.items()}
    model = from_nanogpt(state, num_heads=4)
    assert (model.config.num_layers, model.config.max_len, model.config.bias) == (2, 10, bias)
    tokens = rng.integers(0, vocab, (3, 7))
    np.testing.assert_allclose(model(tokens).data, nanogpt_forward(state, tokens, 4), atol=1e-5, rtol=1e-5)
    back = to_nanogpt(model)                                            # and back to nanoGPT's names
    for key, value in back.items():
        np.testing.assert_array_equal(value, state[prefix + key])
    as_float64 = from_nanogpt({k: v.astype(np.float64) for k, v in state.items()}, num_heads=4)
    assert as_float64.config.dtype == "float64" and all(p.dtype == np.float64 for p in as_float64.parameters())
    assert model.config.dtype == "float32"


def test_nanogpt_mapping_errors():
    state = to_nanogpt(tiny_gpt())
    with pytest.raises(ValueError, match="width 8 is not divisible by num_heads=3"):
        from_nanogpt(state, 3)
    with pytest.raises(ValueError, match=r"unexpected keys, which this mapping does not know: \['transformer.h.0.attn.rotary'\]"):
        from_nanogpt({**state, "transformer.h.0.attn.rotary": np.zeros(3)}, 2)
    with pytest.raises(KeyError, match="missing 'transformer.wpe.weight'"):
        from_nanogpt({k: v for k, v in state.items() if k != "transformer.wpe.weight"}, 2)
    broken = dict(state)
    broken["transformer.h.1.mlp.c_fc.weight"] = np.zeros((5, 8), np.float32)
    with pytest.raises(KeyError, match=r"linear1.weight: expected shape \(32, 8\), got \(5, 8\)"):
        from_nanogpt(broken, 2)


def test_reads_a_real_nanogpt_checkpoint_without_pytorch():
    """tests/data/nanogpt_tiny.pt was written by torch.save in nanoGPT's layout (see
    make_nanogpt_fixture.py) with PyTorch's own logits beside it."""
    model = load_nanogpt_checkpoint(os.path.join(DATA, "nanogpt_tiny.pt"))
    reference = np.load(os.path.join(DATA, "nanogpt_tiny_logits.npz"))
    np.testing.assert_allclose(model(reference["tokens"]).data, reference["logits"], atol=1e-5, rtol=1e-5)
    assert model.config.bias and model.config.num_heads == 2 and not model.training
    meta = read_meta(os.path.join(DATA, "nanogpt_tiny_meta.pkl"))
    assert meta["vocab_size"] == model.config.vocab and meta["stoi"][meta["itos"][3]] == 3
    checkpoint = read_torch_file(os.path.join(DATA, "nanogpt_tiny.pt"))
    assert checkpoint["iter_num"] == 5 and checkpoint["model_args"]["n_layer"] == 2


def test_torch_file_reader_refuses_code_and_non_checkpoints(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo pwned",))
    evil = tmp_path / "meta.pkl"
    evil.write_bytes(pickle.dumps({"itos": Evil()}))
    with pytest.raises(ValueError, match="refusing to load"):
        read_meta(str(evil))
    text = tmp_path / "ckpt.pt"
    text.write_text("not a checkpoint")
    with pytest.raises(ValueError, match="not a zip-format"):
        read_torch_file(str(text))
    with pytest.raises(FileNotFoundError):
        read_torch_file(str(tmp_path / "missing.pt"))


# ----- training -----

TEXT = "the cat sat on the mat. " * 40


def test_decay_groups_put_weight_decay_on_matrices_only():
    model = tiny_gpt(bias=True)
    decay, no_decay = decay_groups(model, 0.1)
    assert all(p.ndim == 2 for p in decay["params"]) and all(p.ndim == 1 for p in no_decay["params"])
    assert len(decay["params"]) + len(no_decay["params"]) == len(model.parameters())
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.1, 0.0)


def test_lr_schedule_warms_up_then_decays_to_min_lr():
    cfg = LMTrainConfig(max_iters=100, warmup=10, lr=1e-3, min_lr=1e-4)
    lrs = [cfg.lr_at(i) for i in range(100)]
    assert lrs[0] == pytest.approx(1e-4) and lrs[9] == pytest.approx(1e-3)
    assert all(a >= b for a, b in zip(lrs[9:], lrs[10:])) and lrs[-1] == pytest.approx(1e-4, rel=0.01)
    with pytest.raises(ValueError, match="max_iters must be an integer >= 1"):
        LMTrainConfig(max_iters=0)
    with pytest.raises(ValueError, match=r"min_lr must be in \[0, lr = 0.0001\], got 0.001"):
        LMTrainConfig(lr=1e-4, min_lr=1e-3)


def _run(seed, iters=120):
    cfg = LMTrainConfig(block_size=8, batch_size=8, max_iters=iters, warmup=5, lr=1e-2, min_lr=1e-3,
                        eval_every=60, eval_iters=3, log_every=1000, seed=seed)
    data = TextDataset(TEXT, cfg.block_size)
    manual_seed(seed)
    model = DecoderOnly(gpt_config(len(data.vocab), 8, 1, 2, 16))
    step, evaluate, optimizer = step_functions(model, cfg)
    return model, data, optimizer, train_lm(LMJob(data, step, evaluate, cfg), log=lambda line: None)


def test_short_training_halves_the_loss_and_repeats_with_the_seed(tmp_path):
    model, data, optimizer, history = _run(0)
    assert np.mean(history["loss"][-10:]) < 0.5 * np.mean(history["loss"][:5])
    assert [e["step"] for e in history["evals"]] == [60, 120] and history["evals"][-1]["val"] < 1.5
    again = _run(0)[3]
    assert again["loss"] == history["loss"]
    path = save_lm(str(tmp_path / "checkpoint.npz"), model, data.vocab)
    loaded, vocab = load_lm(str(tmp_path))
    x = data.vocab.encode("the mat.")[None, :]
    np.testing.assert_array_equal(loaded(x).data, model.eval()(x).data)
    assert vocab.chars == data.vocab.chars and os.path.exists(path)


def test_the_model_config_chooses_the_attention_and_the_loop_prepares_its_kernels_first(monkeypatch):
    """DecoderOnlyConfig.attention="fused" runs the fused op, and the training loop prepares
    the model's kernels (its dtype, its kind of attention) once, before the first step; both
    kinds give the same training to float32 rounding."""
    from autograd import kernels, ops
    fused_calls, events = [], []
    apply = ops.ScaledDotProductAttention.apply
    monkeypatch.setattr(ops.ScaledDotProductAttention, "apply", lambda *a, **k: fused_calls.append(1) or apply(*a, **k))
    prepare = kernels.prepare
    monkeypatch.setattr(kernels, "prepare", lambda dtype, fused_attention: events.append((dtype, fused_attention))
                        or prepare(dtype, fused_attention))
    data = TextDataset(TEXT, 8)
    cfg = LMTrainConfig(block_size=8, batch_size=4, max_iters=3, eval_every=3, eval_iters=1, log_every=3)
    histories = {}
    for kind in ("composed", "fused"):
        manual_seed(0)
        model = DecoderOnly(gpt_config(len(data.vocab), 8, 2, 2, 16, attention=kind))
        step, evaluate, optimizer = step_functions(model, cfg)
        events.clear()
        calls_before = len(fused_calls)
        job = LMJob(data, lambda x, y, lr: events.append("step") or step(x, y, lr), evaluate, cfg, model, optimizer)
        histories[kind] = train_lm(job, log=lambda line: None)
        assert (len(fused_calls) > calls_before) == (kind == "fused")      # 2 layers x 4 forwards
        assert events == [(np.float32, kind == "fused"), "step", "step", "step"]    # ready before the first step
    np.testing.assert_allclose(histories["fused"]["loss"], histories["composed"]["loss"], rtol=1e-5)
    np.testing.assert_allclose(histories["fused"]["evals"][-1]["val"], histories["composed"]["evals"][-1]["val"],
                               rtol=1e-5)


def test_load_lm_refuses_a_checkpoint_without_a_vocabulary_or_of_another_model(tmp_path):
    nn.save({"model": tiny_gpt().state_dict()}, str(tmp_path / "m.npz"))
    with pytest.raises(ValueError, match="is not a training checkpoint"):
        load_lm(str(tmp_path / "m.npz"))
    nn.save(run_state(tiny_gpt()), str(tmp_path / "m.npz"))
    with pytest.raises(ValueError, match="lacks vocab"):
        load_lm(str(tmp_path / "m.npz"))
    nn.save(run_state(tiny_transformer()), str(tmp_path / "m.npz"))
    with pytest.raises(ValueError, match="holds an encoder-decoder Transformer .written by demos.train.; this needs "
                                         "a GPT, decoder-only .written by demos.gpt."):
        load_lm(str(tmp_path / "m.npz"))


@pytest.mark.parametrize("make_config", [gpt_config, llama_config])
def test_lm_run_interrupted_and_resumed_gives_the_same_losses_with_dropout(tmp_path, make_config):
    from transformer.training.lm import resume_state

    cfg = LMTrainConfig(block_size=8, batch_size=8, max_iters=30, warmup=5, lr=1e-2, min_lr=1e-3, eval_every=10,
                        eval_iters=2, log_every=1000, seed=3)
    data = TextDataset(TEXT, cfg.block_size)

    def fresh():
        manual_seed(cfg.seed)
        model = DecoderOnly(make_config(len(data.vocab), 8, 1, 2, 16, dropout=0.2))
        return model, step_functions(model, cfg)

    model, (step, evaluate, _) = fresh()
    full = train_lm(LMJob(data, step, evaluate, cfg), log=lambda line: None)
    model, (step, evaluate, optimizer) = fresh()
    cut = train_lm(LMJob(data, step, evaluate, cfg, model, optimizer), log=lambda line: None,
                   should_stop=lambda it: it == 12, out_dir=str(tmp_path))
    assert cut["interrupted"] and len(cut["loss"]) == 12
    manual_seed(12345)                                           # the checkpoint, not this process, decides
    state, saved_cfg = resume_state(str(tmp_path))
    assert saved_cfg == cfg
    model, (step, evaluate, optimizer) = fresh()
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    resumed = train_lm(LMJob(data, step, evaluate, cfg), log=lambda line: None, start=state)
    assert resumed["loss"] == full["loss"] and resumed["evals"][-1]["val"] == full["evals"][-1]["val"]
    assert not resumed["interrupted"]
    from transformer.training.checkpoints import model_from
    assert model_from(state).config == make_config(len(data.vocab), 8, 1, 2, 16, dropout=0.2)   # the block it was


def test_sample_cli_reads_both_kinds_of_checkpoint(tmp_path, capsys):
    from demos import sample
    fixture = ["--nanogpt", os.path.join(DATA, "nanogpt_tiny.pt"), "--meta", os.path.join(DATA, "nanogpt_tiny_meta.pkl")]
    text = sample.main(fixture + ["--prompt", "hello", "--tokens", "4", "--top-k", "1"])
    model = load_nanogpt_checkpoint(os.path.join(DATA, "nanogpt_tiny.pt"))
    meta = read_meta(os.path.join(DATA, "nanogpt_tiny_meta.pkl"))
    ids = np.array([[meta["stoi"][c] for c in "hello"]])
    assert text == "".join(meta["itos"][int(i)] for i in model.generate(ids, 4)[0])   # top-k 1 is greedy
    model, data, optimizer, _ = _run(0, iters=5)
    save_lm(str(tmp_path / "checkpoint.npz"), model, data.vocab)
    a = sample.main(["--checkpoint", str(tmp_path), "--prompt", "the ", "--tokens", "12", "--seed", "4"])
    b = sample.main(["--checkpoint", str(tmp_path), "--prompt", "the ", "--tokens", "12", "--seed", "4"])
    assert a == b and a.startswith("the ") and len(a) == 16
    with pytest.raises(SystemExit) as stop:
        sample.main(["--checkpoint", str(tmp_path), "--prompt", "Ω"])
    assert stop.value.code == 2


def test_any_bytes_that_are_not_nanogpts_pickle_raise_a_value_error_naming_the_file(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "meta.pkl"
    for _ in range(300):                           # random bytes trip the unpickler in a dozen different ways
        path.write_bytes(rng.integers(0, 256, int(rng.integers(1, 80)), dtype=np.uint8).tobytes())
        with pytest.raises(ValueError, match="read_meta: .*meta.pkl' is not a pickle nanoGPT wrote"):
            read_meta(str(path))
