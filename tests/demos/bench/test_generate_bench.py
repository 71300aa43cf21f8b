"""demos.bench.generate: a SmolLM2-shaped model (one layer of it here) loaded from a bf16
folder, its greedy tokens the same as transformers', the record's fields what RESULTS
tables, and --cpu NAME run in a child compiled for that tuning; skipped without
transformers (the bench extra), which builds the model."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("transformers", reason="demos.bench.generate builds its model and baseline with transformers")
pytest.importorskip("torch", reason="demos.bench.generate's baseline runs in PyTorch")
from demos.bench import cpu  # noqa: E402
from tests.helpers import ENGINE_ROOM  # noqa: E402

pytestmark = pytest.mark.skipif(not ENGINE_ROOM, reason="demos.bench.generate measures the engine room")


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    """One folder for the module's runs: the first builds one layer of SmolLM2 there, the others reuse it."""
    return str(tmp_path_factory.mktemp("smollm2-shaped") / "model")


def generate(model_folder, out, *flags):
    """demos.bench.generate on one layer, a 5-token prompt and 6 new tokens in 2 rounds, in a
    process of its own (it fixes the thread counts of the process it runs in): (its JSON
    record, its standard output)."""
    run = subprocess.run([sys.executable, "-m", "demos.bench.generate", "--layers", "1", "--prompt", "5", "--new", "6",
                          "--rounds", "2", "--dir", model_folder, *flags, "--json", str(out)],
                         check=True, capture_output=True, text=True, timeout=900)
    return json.loads(out.read_text()), run.stdout


def test_one_layer_of_smollm2_generates_transformers_tokens_and_records_where_time_goes(model_folder, tmp_path):
    import llvmlite.binding
    record, _ = generate(model_folder, tmp_path / "g.json")
    assert record["same_tokens"] is True
    assert record["machine"]["compiled_for"] == (os.environ.get("NUMBA_CPU_NAME") or llvmlite.binding.get_host_cpu_name())
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


@pytest.mark.skipif(not {"avx2", "fma"} <= cpu.host_features(),
                    reason="--cpu haswell compiles AVX2 code, which this CPU cannot run")
def test_cpu_haswell_generates_in_a_child_compiled_for_avx2_with_the_baselines_held_to_avx2(model_folder, tmp_path):
    """As demos.bench.train --cpu: the child compiles for haswell, in its own cache, with
    OpenBLAS and PyTorch held to AVX2 (cpu.TARGETS), and its record says so."""
    record, stdout = generate(model_folder, tmp_path / "haswell.json", "--cpu", "haswell", "--clock", "cpu")
    assert stdout.startswith("benchmarking as haswell (AVX2): NUMBA_CPU_NAME=haswell, cache " + cpu.cache_dir("haswell"))
    machine = record["machine"]
    assert machine["compiled_for"] == "haswell" and machine["vector_bytes"] == 32
    assert {"avx2", "fma"} <= set(machine["compiled_vector_features"])
    assert not any(feature.startswith("avx512") for feature in machine["compiled_vector_features"])
    assert machine["aten_cpu_capability"] == cpu.TARGETS["haswell"][2]["ATEN_CPU_CAPABILITY"] == "avx2"
    assert (machine["mkl_instructions"], machine["onednn_isa"]) == ("AVX2", "AVX2")
    assert machine["openblas_kernel"] in ("Haswell", None)              # None: numpy linked to another BLAS
    assert record["same_tokens"] is True and record["clock"] == "cpu"
    assert all(len(rounds) == 2 and min(rounds) > 0 for rounds in record["tokens_per_second_rounds"].values())
