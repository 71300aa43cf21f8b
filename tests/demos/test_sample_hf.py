"""demos.sample --hf on a folder as transformers' save_pretrained writes it (weights only, no
tokenizer): the prompt as token ids, greedy tokens equal to transformers' generate; each
layer's attention over the prompt plotted and equal to transformers' attentions; demos.debug
stopping in an imported model's attention as in one trained here; the mistakes one line."""
import os
import subprocess
import sys

import numpy as np
import pytest

from demos import sample
from tests.demos.test_export import refused
from transformer.families.decoder_only import DecoderOnly, llama_config
from transformer.training.huggingface import save_hf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def weights_only_llama(folder, n_kv_head=1):
    """Our tiny GQA Llama written as a weights-only folder (no tokenizer.json)."""
    save_hf(DecoderOnly(llama_config(40, 16, 1, 4, 16, n_kv_head=n_kv_head)).eval(), None, folder)
    return folder


@pytest.mark.parametrize("argv, says", [
    (["--prompt", "hello"], "has no tokenizer.json to encode --prompt with: give the prompt as token ids "
                            "(--prompt-ids 1,2,3)"),
    ([], "has no tokenizer.json to encode --prompt with"),
    (["--prompt-ids", "1,40"], "--prompt-ids: id 40 is not below the model's vocabulary of 40"),
    (["--prompt-ids", "1,x"], "argument --prompt-ids: expected comma-separated token ids >= 0 such as 1,2,3, got '1,x'"),
    (["--prompt-ids", "1,2", "--prompt", "a"], "not allowed with argument")])
def test_a_prompt_a_weights_only_folder_cannot_take_is_one_line(tmp_path, capsys, argv, says):
    folder = weights_only_llama(tmp_path / "hf")
    err = refused(sample.main, ["--hf", str(folder), *argv], capsys, "demos.sample: error: ")
    assert says in err, err


def test_token_ids_in_and_out_without_a_tokenizer(tmp_path, capsys):
    folder = weights_only_llama(tmp_path / "hf", n_kv_head=2)
    text = sample.main(["--hf", str(folder), "--prompt-ids", "3,1,4", "--tokens", "6", "--top-k", "1"])
    ids = [int(t) for t in text.split()]
    assert ids[:3] == [3, 1, 4] and len(ids) == 9 and max(ids) < 40


torch = pytest.importorskip("torch", reason="PyTorch (bench extra)")
transformers = pytest.importorskip("transformers", reason="transformers (bench extra)")
transformers.logging.set_verbosity_error()


def smollm2_shaped(folder, seed=0):
    """A SmolLM2-shaped Llama (9 heads, 3 kv heads, d 576, tied; 2 layers, a small
    vocabulary), random weights, saved weights-only by transformers; returned (eager
    attention, so that it can give its attention weights)."""
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(vocab_size=200, hidden_size=576, intermediate_size=1536, num_hidden_layers=2,
                                      num_attention_heads=9, num_key_value_heads=3, max_position_embeddings=8192,
                                      rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager").eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.2 * torch.randn_like(p))          # attention far from uniform
    model.save_pretrained(folder)
    return model


def test_sample_greedy_ids_and_attention_maps_equal_transformers(tmp_path):
    theirs = smollm2_shaped(tmp_path / "hf")
    prompt = [5, 17, 3, 99, 42, 7]
    text = sample.main(["--hf", str(tmp_path / "hf"), "--prompt-ids", ",".join(map(str, prompt)), "--tokens", "10",
                        "--top-k", "1", "--attention-maps", str(tmp_path / "maps")])
    with torch.no_grad():
        expected = theirs.generate(torch.tensor([prompt]), max_new_tokens=10, min_new_tokens=10, do_sample=False,
                                   eos_token_id=None, pad_token_id=0)
        attentions = theirs(torch.tensor([prompt]), output_attentions=True).attentions     # per layer (1, H, T, T)
    assert [int(t) for t in text.split()] == expected[0].tolist()
    assert sorted(os.listdir(tmp_path / "maps")) == ["attention_layer00.png", "attention_layer01.png"]
    from demos.plots import prompt_attention_heatmaps
    from transformer.training.huggingface import from_hf
    ours, _ = from_hf(tmp_path / "hf")
    (tmp_path / "again").mkdir()
    prompt_attention_heatmaps(ours, np.array([prompt]), [str(t) for t in prompt], tmp_path / "again")
    for layer, weights in zip(ours.blocks.layers, attentions):
        # float32 through the layers, products summed in another order than PyTorch's: the 1e-4
        np.testing.assert_allclose(layer.self_attn.attn_weights, weights.numpy(), rtol=1e-4, atol=1e-4)
        assert weights.numpy().std(-1).max() > 0.05                           # not uniform: the check has teeth


def test_demos_debug_stops_in_an_imported_models_attention(tmp_path):
    smollm2_shaped(tmp_path / "hf", seed=1)
    commands = "p tuple(q.shape), tuple(k.shape)\np type(self).__name__ if 'self' in dir() else 'function'\nq\n"
    result = subprocess.run([sys.executable, "-m", "demos.debug", "-b",
                             "transformer/attention.py:scaled_dot_product_attention", "demos.sample", "--hf",
                             str(tmp_path / "hf"), "--prompt-ids", "1,2,3", "--tokens", "1", "--attention", "composed"],
                            cwd=ROOT, input=commands, capture_output=True, text=True, timeout=300)
    assert "scaled_dot_product_attention()" in result.stdout, result.stdout[-1500:] + result.stderr[-1500:]
    assert "((1, 9, 3, 64), (1, 3, 3, 64))" in result.stdout, result.stdout[-1500:]     # 9 query heads, 3 kv heads


@pytest.mark.parametrize("ids", ["a,b", "1,-2", ""])
def test_prompt_ids_that_are_not_ids_say_what_is_expected(ids, capsys):
    """argparse once printed only "invalid token_ids value": the function's own reason was dropped."""
    from demos import sample
    with pytest.raises(SystemExit) as stop:
        sample.parse_args(["--hf", ".", "--prompt-ids", ids])
    assert stop.value.code == 2
    assert f"expected comma-separated token ids >= 0 such as 1,2,3, got {ids!r}" in capsys.readouterr().err


@pytest.mark.parametrize("heads,kv_heads,said", [(4, 4, ""), (6, 2, "; heads 0-2, 3-5 share key/value heads 0, 1"),
                                                 (9, 3, "; heads 0-2, 3-5, 6-8 share key/value heads 0, 1, 2"),
                                                 (3, 1, "; heads 0-2 share key/value heads 0")])
def test_the_attention_maps_say_which_query_heads_share_a_key_value_head(heads, kv_heads, said):
    from demos.plots import shared_heads
    assert shared_heads(heads, kv_heads) == said
