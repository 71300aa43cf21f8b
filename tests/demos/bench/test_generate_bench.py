"""demos.bench.generate: a SmolLM2-shaped model (one layer of it here) loaded from a bf16
folder, its greedy tokens the same as transformers', the record's fields what RESULTS
tables; skipped without transformers (the bench extra), which builds the model."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("transformers", reason="demos.bench.generate builds its model and baseline with transformers")
pytest.importorskip("torch", reason="demos.bench.generate's baseline runs in PyTorch")
from tests.helpers import ENGINE_ROOM  # noqa: E402

pytestmark = pytest.mark.skipif(not ENGINE_ROOM, reason="demos.bench.generate measures the engine room")


def test_one_layer_of_smollm2_generates_transformers_tokens_and_records_where_time_goes(tmp_path):
    subprocess.run([sys.executable, "-m", "demos.bench.generate", "--layers", "1", "--prompt", "5", "--new", "6",
                    "--rounds", "2", "--dir", str(tmp_path / "model"), "--json", str(tmp_path / "g.json")],
                   check=True, capture_output=True, text=True, timeout=900)
    record = json.loads((tmp_path / "g.json").read_text())
    assert record["same_tokens"] is True
    assert (record["threads"], record["clock"]) == (1, "wall")
    assert (record["layers"], record["prompt"], record["new"]) == (1, 5, 6)
    assert all(len(rounds) == 2 and min(rounds) > 0 for rounds in record["tokens_per_second_rounds"].values())
    load = record["load"]
    # float32: the tied 49,152 x 576 embedding; q and o 576 x 576, k and v 576 x 192 (3 kv heads
    # of 64), SwiGLU's three 576 x 1536; the layer's two norms and the final one
    assert load["weights_bytes"] == 4 * (49152 * 576 + 2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536 + 3 * 576)
    assert 0 < load["peak_over_float32_weights"] == load["peak_bytes"] / load["weights_bytes"]
    parts = record["ours_ms_per_token"]
    assert 0 < parts["vocabulary projection"] < parts["total"]
    assert 0 < parts["every Linear (the projection included)"] < parts["total"] * 1.05


@pytest.mark.parametrize("argv,message", [(["--threads", "4096"], "exceeds this machine's"),
                                          (["--new", "0"], "--new: must be an integer >= 1"),
                                          (["--clock", "cpu", "--threads", "2"],
                                           "--clock cpu times the calling thread only")])
def test_a_flag_it_cannot_honour_is_one_line(argv, message):
    result = subprocess.run([sys.executable, "-m", "demos.bench.generate", *argv], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode != 0 and message in result.stderr and len(result.stderr.strip().splitlines()) == 1
