"""demos.bench.bpe: its figures, and tiktoken given our merges gives our tokens (where installed)."""
import importlib.util
import json

from demos.bench import bpe as bench_bpe


def test_benchmark_reports_each_timing_and_checks_tiktoken_against_ours(tmp_path):
    out = tmp_path / "bpe.json"
    result = bench_bpe.main(["--merges", "30", "--reference-merges", "1", "--rounds", "1", "--json", str(out)])
    assert json.loads(out.read_text()) == result
    assert result["merges"] == 30 and result["bytes"] > 900_000 and 1.0 < result["bytes_per_token"] < 2.0
    assert result["train_s"] > 0 and result["encode_s"] > 0 and result["reference_per_merge_s"] > 0
    assert (result["tokenizers_train_s"] is None) == (importlib.util.find_spec("tokenizers") is None)
    assert result["tiktoken_tokens_equal_ours"] == (importlib.util.find_spec("tiktoken") is not None)
