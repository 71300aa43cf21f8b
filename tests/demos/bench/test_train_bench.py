"""demos.bench.train's choice of our attention: each model as its demo trains it by default,
either kind on request, both timed side by side, and the step's work counted the same way."""

import json
import subprocess
import sys

import pytest

from tests.helpers import ENGINE_ROOM_ABSENT

pytest.importorskip("autograd.engine_room", reason=ENGINE_ROOM_ABSENT)

from demos.bench import train as bench_train  # noqa: E402  (it measures the engine room)


@pytest.mark.parametrize("argv,kinds", [([], ["composed"]), (["--model", "gpt"], ["fused"]), (["--model", "llama"], ["fused"]),
                                        (["--attention", "fused"], ["fused"]),
                                        (["--model", "gpt", "--attention", "composed", "fused"], ["composed", "fused"])])
def test_each_model_runs_the_attention_its_demo_trains_with_unless_told(argv, kinds):
    assert bench_train.parse_args(argv).attention == kinds


def test_two_kinds_are_timed_side_by_side_and_count_the_same_matmul_work(tmp_path):
    """--attention fused composed: a time (and, with PyTorch, a ratio) for each kind, the
    first as "ours"; the matmul FLOPs (the BLAS limit's) are the composed step's whichever
    kind is timed, since the fused op's products are not matmul calls."""
    both, alone = (run(tmp_path / name, *flags) for name, flags in [("both.json", ["--attention", "fused", "composed"]),
                                                                    ("alone.json", [])])
    assert both["attention"] == "fused" and alone["attention"] == "composed"
    assert both["ours_ms"] > 0 and both["composed_ms"] > 0 and len(both["composed_rounds_ms"]) == 3
    assert both["matmul_gflop"] == alone["matmul_gflop"] > 0
    if "pytorch_ms" in both:
        assert both["ratio_vs_pytorch"] == both["fused_ratio_vs_pytorch"] == bench_train.ratio_of_rounds(both)
        assert both["composed_ratio_vs_pytorch"] == bench_train.ratio_of_rounds(both, "composed")


def run(path, *flags):
    """demos.bench.train at size S for 3 steps in a process of its own (it fixes the thread
    counts of the process it runs in), its JSON record."""
    subprocess.run([sys.executable, "-m", "demos.bench.train", "--size", "S", "--steps", "3", *flags, "--json", str(path)],
                   check=True, capture_output=True)
    return json.loads(path.read_text())


def test_a_ratio_of_rounds_is_the_median_of_each_rounds_ratio():
    result = {"ours_rounds_ms": [10, 30, 20], "fused_rounds_ms": [5, 60, 40], "pytorch_rounds_ms": [20, 20, 10]}
    assert bench_train.ratio_of_rounds(result) == 1.5                    # ratios 0.5, 1.5, 2
    assert bench_train.ratio_of_rounds(result, "fused") == 3.0           # ratios 0.25, 3, 4


@pytest.mark.parametrize("argv,message", [(["--steps", "2"], "--steps: must be an integer >= 3, got 2"),
                                          (["--model", "gpt", "--size", "M"], "--size is for --model transformer"),
                                          (["--recipe"], "--recipe is for --model gpt or llama"),
                                          (["--model", "gpt", "--kv-heads", "2"], "--kv-heads is for --model llama"),
                                          (["--model", "gpt", "--data", "x.txt"], "--data is for --model gpt --recipe"),
                                          (["--model", "gpt", "--recipe", "--data", "/no/such.txt"],
                                           "--data /no/such.txt: no such file"),
                                          (["--threads", "4096"], "--threads 4096: this machine has")])
def test_a_flag_the_run_would_ignore_or_fail_on_later_is_one_line_before_anything_is_timed(capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        bench_train.parse_args(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


def test_rounds_that_differ_over_one_and_a_half_fold_are_called_unsteady():
    assert bench_train.unsteady({"ours": [10, 11, 12], "pytorch": [20, 21, 29]}) is None
    warning = bench_train.unsteady({"ours": [10, 11, 12], "pytorch": [495, 700, 1615]})
    assert warning.startswith("warning: pytorch's rounds differ 3.3-fold")


@pytest.mark.parametrize("module,argv,message", [("train", ["--json", "/"], "argument --json: / is a folder"),
                                                 ("train", ["--json", ""], "argument --json: an empty path"),
                                                 ("kernels", ["--sizes", "Q"], "argument --sizes: invalid choice: 'Q'"),
                                                 ("kernels", ["--json", "/"], "argument --json: / is a folder")])
def test_the_benchmarks_refuse_an_output_they_could_not_write_and_an_unknown_size_at_once(capsys, module, argv, message):
    """Both failed only after the whole benchmark had run (a folder as --json, --sizes Q)."""
    import importlib
    with pytest.raises(SystemExit) as stop:
        importlib.import_module(f"demos.bench.{module}").parse_args(argv)
    assert stop.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("kv_heads", [None, 2, 1])
def test_the_llama_baseline_is_transformers_llama_holding_our_weights(kv_heads):
    """--model llama's baseline: LlamaForCausalLM with our config's key/value heads and our
    weights gives our logits (so the two steps time the same model)."""
    pytest.importorskip("transformers", reason="transformers (the optional bench extra) is not installed: "
                                               "--model llama has no baseline to build")
    import numpy as np
    import torch

    from demos.bench.hf_llama import transformers_twin
    from transformer.families.decoder_only import DecoderOnly, llama_config
    model = DecoderOnly(llama_config(23, block_size=16, n_layer=2, n_head=4, n_embd=32, n_kv_head=kv_heads))
    tokens = np.random.default_rng(0).integers(0, 23, (2, 16))
    with torch.no_grad():
        theirs = transformers_twin(model)(torch.from_numpy(tokens)).numpy()
    np.testing.assert_allclose(theirs, model(tokens).data, atol=1e-4)
