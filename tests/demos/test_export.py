"""demos.export writes a GPT trained here as nanoGPT's ckpt.pt and meta.pkl: the weights read
back identical, nanoGPT's equations in PyTorch give our logits, and its AdamW takes the
moments; the mapping of the moments is checked without PyTorch too.  With --hf it writes a
Hugging Face folder that reads back as the same model and samples the same text (demos.sample
--hf); its mistakes, and those of sample --hf, are one line with nothing written."""
import os
import pickle
import sys

import numpy as np
import pytest

import nn
from demos import export, gpt, sample
from nn import functional as F
from nn import optim
from tests.demos.test_user_mistakes import TINY_GPT, refused
from transformer.data.text import CharVocab, split_text
from transformer.encoder_decoder import Transformer, TransformerConfig
from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig, gpt_config
from transformer.training.checkpoints import run_state
from transformer.training.huggingface import from_hf, save_hf
from transformer.training.lm import decay_groups, load_lm
from transformer.training.nanogpt import (adam_moments_to_nanogpt, from_nanogpt, nanogpt_model_args,
                                          nanogpt_parameter_order, read_torch_file)


def trained_run(folder, *extra):
    gpt.main(TINY_GPT + ["--data", __file__, "--out", str(folder), *extra])
    return folder


def test_adam_moments_go_to_nanogpts_names_with_q_k_v_stacked():
    model = DecoderOnly(gpt_config(11, 8, 2, 2, 8, bias=True, attention="composed"))
    optimizer = optim.AdamW(model.parameters(), lr=1e-2)
    x = np.random.default_rng(0).integers(0, 11, (2, 8))
    for _ in range(3):
        optimizer.zero_grad()
        F.cross_entropy(model(x[:, :-1]), x[:, 1:]).backward()
        optimizer.step()
    moments, step = adam_moments_to_nanogpt(model, optimizer.state_dict(), model.parameters())
    assert step == 3 and sorted(moments) == sorted(nanogpt_parameter_order(2, bias=True))
    state = optimizer.state_dict()["state"]
    index = {id(p): i for i, p in enumerate(model.parameters())}
    attn = model.blocks.layers[1].self_attn
    stacked = np.concatenate([state[index[id(getattr(attn, n).weight)]]["exp_avg"] for n in ("q_proj", "k_proj", "v_proj")])
    np.testing.assert_array_equal(moments["transformer.h.1.attn.c_attn.weight"][0], stacked)


def test_a_model_nanogpt_cannot_be_is_named():
    config = gpt_config(11, 8, 1, 2, 8)
    config.positional = "rope"
    with pytest.raises(ValueError, match="not nanoGPT's GPT: positional='rope' \\(nanoGPT: 'learned'\\)"):
        nanogpt_model_args(config)


@pytest.mark.parametrize("activation", ["relu", "silu"])
def test_a_gpt_with_another_activation_is_not_nanogpts_and_the_exporter_says_so(activation):
    with pytest.raises(ValueError, match=f"not nanoGPT's GPT: activation='{activation}' \\(nanoGPT: 'gelu'\\)"):
        nanogpt_model_args(gpt_config(11, 8, 1, 2, 8, activation=activation))


def test_without_pytorch_the_command_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    run = trained_run(tmp_path / "run")
    capsys.readouterr()
    monkeypatch.setitem(sys.modules, "torch", None)                # import torch raises ImportError
    err = refused(export.main, ["--checkpoint", str(run), "--nanogpt", str(tmp_path / "ckpt.pt")], capsys,
                  "demos.export: error: --nanogpt writes a PyTorch checkpoint and needs PyTorch")
    assert 'pip install -e ".[bench]"' in err and not (tmp_path / "ckpt.pt").exists()


def test_export_mistakes(tmp_path, capsys):
    """Each named before PyTorch is needed."""
    bpe = trained_run(tmp_path / "bpe", "--tokenizer", "bpe", "--vocab-size", "300")
    char = trained_run(tmp_path / "char")
    capsys.readouterr()
    err = refused(export.main, ["--checkpoint", str(char), "--nanogpt", str(tmp_path)], capsys,
                  "demos.export: error: --nanogpt: ")
    assert "is a folder" in err
    err = refused(export.main, ["--checkpoint", str(bpe), "--nanogpt", str(tmp_path / "x" / "ckpt.pt")], capsys,
                  "demos.export: error: --checkpoint: ")
    assert "reads bpe tokens" in err and not (tmp_path / "x").exists()
    err = refused(export.main, ["--checkpoint", str(tmp_path / "nowhere"), "--nanogpt", str(tmp_path / "y.pt")],
                  capsys, "demos.export: error: --checkpoint: ")
    assert "no checkpoint file at" in err


def test_exported_checkpoint_reads_back_identical_and_runs_in_pytorch_as_nanogpt(tmp_path):
    torch = pytest.importorskip("torch", reason="writing ckpt.pt takes PyTorch (the bench extra)")
    from demos.bench.torch_gpt import TorchGPT  # nanoGPT's modules, names and equations
    run = trained_run(tmp_path / "run", "--bias")
    path = tmp_path / "out" / "ckpt.pt"
    export.main(["--checkpoint", str(run), "--nanogpt", str(path)])
    ours, vocab = load_lm(str(run))

    back = read_torch_file(str(path))                              # read back without PyTorch: bit-identical
    model = from_nanogpt(back["model"], num_heads=back["model_args"]["n_head"])
    for (name, p), (_, q) in zip(ours.named_parameters(), model.named_parameters()):
        np.testing.assert_array_equal(p.data, q.data, err_msg=name)
    meta = pickle.load(open(tmp_path / "out" / "meta.pkl", "rb"))
    assert meta["vocab_size"] == len(vocab) and [meta["itos"][i] for i in range(len(vocab))] == vocab.chars
    with open(__file__) as f:                                         # the run's text, as nanoGPT's prepare.py writes it
        train_text, val_text = split_text(f.read())
    assert vocab.decode(np.fromfile(tmp_path / "out" / "train.bin", np.uint16)) == train_text
    assert vocab.decode(np.fromfile(tmp_path / "out" / "val.bin", np.uint16)) == val_text

    checkpoint = torch.load(path)                                   # as nanoGPT's train.py loads it (weights only)
    args = checkpoint["model_args"]
    theirs = TorchGPT(args["vocab_size"], args["block_size"], args["n_layer"], args["n_head"], args["n_embd"],
                      args["dropout"], bias=args["bias"])
    theirs.load_state_dict(checkpoint["model"])                    # strict: every key, every shape
    tokens = np.random.default_rng(0).integers(0, len(vocab), (2, 8))
    expected = ours(tokens).data
    with torch.no_grad():
        got = theirs(torch.from_numpy(tokens)).numpy()
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)

    params = dict(theirs.named_parameters())                       # nanoGPT's configure_optimizers
    groups = [{"params": [p for p in params.values() if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99))
    optimizer.load_state_dict(checkpoint["optimizer"])
    held = [p for group in decay_groups(ours, 0.0) for p in group["params"]]
    moments, step = adam_moments_to_nanogpt(ours, nn.load(str(run / "checkpoint.npz"))["optimizer"], held)
    for name, p in params.items():
        np.testing.assert_array_equal(optimizer.state[p]["exp_avg"].numpy(), moments[name][0], err_msg=name)
        assert int(optimizer.state[p]["step"]) == step == checkpoint["iter_num"]
    loss = torch.nn.functional.cross_entropy(theirs(torch.from_numpy(tokens)).flatten(0, 1),
                                             torch.from_numpy(tokens).roll(-1, 1).flatten())
    loss.backward()
    optimizer.step()                                                # training goes on there
    assert checkpoint["config"]["init_from"] == "resume" and checkpoint["best_val_loss"] < 10


def saved_model(folder, model, vocab):
    os.makedirs(folder)
    nn.save(run_state(model, vocab=vocab.to_array(), tokenizer=vocab.kind), str(folder / "checkpoint.npz"))
    return folder


@pytest.mark.parametrize("extra, architecture", [
    ([], "GPT2LMHeadModel"), (["--tokenizer", "bpe", "--vocab-size", "300"], "GPT2LMHeadModel"),
    (["--arch", "llama"], "LlamaForCausalLM"),
    (["--arch", "llama", "--rope-pairing", "interleaved", "--tokenizer", "bpe", "--vocab-size", "300"], "LlamaForCausalLM")],
    ids=["char", "bpe", "llama-char", "llama-interleaved-bpe"])
def test_export_hf_writes_a_folder_that_reads_back_as_the_same_model(tmp_path, capsys, extra, architecture):
    run = trained_run(tmp_path / "run", *extra)
    capsys.readouterr()
    export.main(["--checkpoint", str(run), "--hf", str(tmp_path / "hf")])
    out = capsys.readouterr().out
    assert architecture in out and f"AutoModelForCausalLM.from_pretrained({str(tmp_path / 'hf')!r})" in out
    assert sorted(os.listdir(tmp_path / "hf")) == ["config.json", "generation_config.json", "model.safetensors",
                                                   "tokenizer.json", "tokenizer_config.json"]
    ours, vocab = load_lm(str(run))
    back, tokenizer = from_hf(tmp_path / "hf")
    tokens = np.random.default_rng(0).integers(0, len(vocab), (2, 8))
    np.testing.assert_allclose(back(tokens).data, ours(tokens).data, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(tokenizer.encode("Return the"), vocab.encode("Return the"))
    text = sample.main(["--hf", str(tmp_path / "hf"), "--prompt", "Return", "--tokens", "12", "--top-k", "1"])
    assert text == sample.main(["--checkpoint", str(run), "--prompt", "Return", "--tokens", "12", "--top-k", "1"])


@pytest.mark.parametrize("extra", [[], ["--arch", "llama", "--kv-heads", "1"]], ids=["gpt2", "llama-mqa"])
def test_an_imported_folder_goes_back_out_as_the_same_files(tmp_path, capsys, extra):
    """--from-hf DIR --hf OUT: what the importer reads, written back: the same config, weights
    and tokenizer; a weights-only folder (as save_pretrained writes) stays weights-only."""
    from transformer.training.safetensors import read_safetensors
    export.main(["--checkpoint", str(trained_run(tmp_path / "run", *extra)), "--hf", str(tmp_path / "hf")])
    export.main(["--from-hf", str(tmp_path / "hf"), "--hf", str(tmp_path / "again")])
    assert "and its char tokenizer" in capsys.readouterr().out
    for name in ("config.json", "tokenizer.json"):
        assert (tmp_path / "again" / name).read_text() == (tmp_path / "hf" / name).read_text(), name
    first, again = (read_safetensors(str(tmp_path / f / "model.safetensors"))[0] for f in ("hf", "again"))
    assert first.keys() == again.keys() and all(np.array_equal(first[k], again[k]) for k in first)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        os.remove(tmp_path / "hf" / name)
    export.main(["--from-hf", str(tmp_path / "hf"), "--hf", str(tmp_path / "weights")])
    assert "and no tokenizer (the folder had none)" in capsys.readouterr().out
    assert "tokenizer.json" not in os.listdir(tmp_path / "weights")


def test_an_imported_folder_is_not_a_nanogpt_run(tmp_path, capsys):
    err = refused(export.main, ["--from-hf", str(tmp_path), "--nanogpt", str(tmp_path / "ckpt.pt")], capsys,
                  "demos.export: error: ")
    assert "--from-hf goes with --hf" in err and os.listdir(tmp_path) == []


@pytest.mark.parametrize("make, blamed, says", [
    (lambda tmp: tmp / "nowhere", "--checkpoint", "no checkpoint file at"),
    (lambda tmp: saved_model(tmp / "seq2seq", Transformer(TransformerConfig(src_vocab=5, tgt_vocab=5)), CharVocab("ab")),
     "--checkpoint", "holds an encoder-decoder Transformer (written by demos.train); this needs a GPT"),
    (lambda tmp: saved_model(tmp / "rope", DecoderOnly(DecoderOnlyConfig(vocab=2, positional="rope", pad_id=None)),
                             CharVocab("ab")),
     "--checkpoint", "this model cannot be written as GPT-2: positions must be learned (GPT-2's wpe), not 'rope'"),
    (lambda tmp: saved_model(tmp / "rope", DecoderOnly(DecoderOnlyConfig(vocab=2, positional="rope", pad_id=None)),
                             CharVocab("ab")),
     "--checkpoint", "nor as Llama: its norms are RMSNorm, not 'layer_norm'; its feed-forward is SwiGLU, not 'mlp'"),
    (lambda tmp: saved_model(tmp / "padded", DecoderOnly(DecoderOnlyConfig(vocab=2)), CharVocab("ab")),
     "--checkpoint", "it masks no padding token (the model has pad_id=0)")])
def test_export_hf_mistakes_are_one_line_and_write_nothing(tmp_path, capsys, make, blamed, says):
    checkpoint = make(tmp_path)
    before = sorted(os.listdir(tmp_path))
    err = refused(export.main, ["--checkpoint", str(checkpoint), "--hf", str(tmp_path / "hf")], capsys,
                  f"demos.export: error: {blamed}: ")
    assert says in err and sorted(os.listdir(tmp_path)) == before


def test_export_hf_into_a_file_is_refused(tmp_path, capsys):
    run = saved_model(tmp_path / "run", DecoderOnly(gpt_config(2, 8, 1, 2, 8)), CharVocab("ab"))
    (tmp_path / "notes.txt").write_text("a file")
    err = refused(export.main, ["--checkpoint", str(run), "--hf", str(tmp_path / "notes.txt")], capsys,
                  "demos.export: error: --hf: ")
    assert "is a file; expected a folder" in err and (tmp_path / "notes.txt").read_text() == "a file"


@pytest.mark.parametrize("damage, says", [
    (None, "from_hf: no folder at"),
    (lambda hf: (hf / "config.json").write_text("{\"n_embd\": "), "config.json' is not UTF-8 JSON"),
    (lambda hf: (hf / "tokenizer.json").write_text("[]"), "tokenizer.json' holds a JSON list"),
    (lambda hf: (hf / "model.safetensors").write_bytes(b"\xff" * 16), "model.safetensors' is not a valid safetensors")])
def test_sample_hf_mistakes_are_one_line(tmp_path, capsys, damage, says):
    hf = tmp_path / "hf"
    if damage is not None:
        save_hf(DecoderOnly(gpt_config(2, 8, 1, 2, 8)).eval(), CharVocab("ab"), hf)
        damage(hf)
    err = refused(sample.main, ["--hf", str(hf)], capsys, "demos.sample: error: --hf: ")
    assert says in err


@pytest.mark.parametrize("main, argv, flag", [
    (export.main, ["--checkpoint", "RUN", "--hf", ""], "--hf"),
    (export.main, ["--checkpoint", "RUN", "--nanogpt", ""], "--nanogpt"),
    (export.main, ["--checkpoint", "", "--hf", "OUT"], "--checkpoint"),
    (sample.main, ["--hf", ""], "--hf"),
    (sample.main, ["--checkpoint", ""], "--checkpoint"),
    (sample.main, ["--nanogpt", "", "--meta", "meta.pkl"], "--nanogpt"),
    (sample.main, ["--nanogpt", "ckpt.pt", "--meta", ""], "--meta")])
def test_an_empty_path_is_one_line_naming_its_flag_and_nothing_is_written(tmp_path, capsys, main, argv, flag):
    """An empty path is a mistake, not a flag left out (it was read as "not given" and ended
    in a traceback)."""
    run = saved_model(tmp_path / "run", DecoderOnly(gpt_config(2, 8, 1, 2, 8)), CharVocab("ab"))
    argv = [{"RUN": str(run), "OUT": str(tmp_path / "out")}.get(word, word) for word in argv]
    before = sorted(os.listdir(tmp_path))
    prog = "demos.export" if main is export.main else "demos.sample"
    err = refused(main, argv, capsys, f"{prog}: error: argument {flag}: an empty path")
    assert sorted(os.listdir(tmp_path)) == before
