"""The results document's table per CPU tuning (demos.figures' "tunings" group), read from
the benchmarks' JSON records: each tuning's steps, generation and kernels, and what it ran on."""

import json

import pytest

from demos import figures


def machine(tuning):
    features = ["avx", "avx2", "fma"] + (["avx512f"] if tuning != "haswell" else [])
    return {"cpu_model": "Some CPU 9000", "host_cpu": "znver4", "host_vector_features": ["avx", "avx2", "avx512f"],
            "compiled_for": "znver4" if tuning == "host" else tuning, "compiled_vector_features": features,
            "gemm_tile_float32": "4 x 64", "l2_bytes": 1 << 20, "openblas_kernel": "SkylakeX",
            "aten_cpu_capability": "(host)"}


def write_records(runs, tuning, ratio):
    """The six JSON files one tuning's commands write, with ours / PyTorch = ratio everywhere
    but generation, where ours / transformers' tokens per second is 1 / ratio."""
    folder = runs / "bench" / "tunings" / tuning
    folder.mkdir(parents=True)
    gpt = {"ours_median_ms": 50 * ratio, "pytorch_median_ms": 50.0, "ratio_vs_pytorch": ratio, "machine": machine(tuning)}
    (folder / "gpt.json").write_text(json.dumps(gpt))
    for size in "SML":
        step = {"ours_ms": 10 * ratio, "pytorch_ms": 10.0, "ours_rounds_ms": [10 * ratio] * 3,
                "pytorch_rounds_ms": [10.0] * 3}
        (folder / f"train-{size}.json").write_text(json.dumps(step))
    kernels = {"machine": dict(machine(tuning), gemm_multiply_adds={"goto": {"zmm": 48}},
                               kernel_widths={"gemm": "zmm", "softmax": "ymm" if tuning != "host" else "zmm", "gelu": "zmm"}),
               "matmul": [{"case": "square 512 float32", "numba_gflops": 90.0, "numpy_gflops": 80.0, "ratio_vs_numpy": 1.125},
                          {"case": "square 512 float64", "numba_gflops": 45.0, "numpy_gflops": 40.0, "ratio_vs_numpy": 1.125}],
               "rowwise": [{"case": "softmax (640, 1000) float32", "numba_us": 100.0, "torch_us": 200.0, "ratio_vs_torch": 0.5}]}
    (folder / "kernels.json").write_text(json.dumps(kernels))
    generation = {"median_tokens_per_second": {"ours": 40 / ratio, "transformers": 40.0}, "ours_over_transformers": 1 / ratio,
                  "same_tokens": tuning != "haswell", "machine": machine(tuning)}
    (folder / "generate.json").write_text(json.dumps(generation))


@pytest.mark.parametrize("host, features, expected", [
    ("znver4", {"avx2", "avx512f"}, ["host", "sapphirerapids", "haswell"]),
    ("sapphirerapids", {"avx2", "avx512f"}, ["host", "znver4", "haswell"]),
    ("emeraldrapids", {"avx2", "avx512f"}, ["host", "znver4", "haswell"]),
    ("alderlake", {"avx2"}, ["host", "haswell"]),                  # no AVX-512: no AVX-512 tuning
    ("neoverse-v1", {"neon"}, ["host"])])
def test_the_tunings_are_the_hosts_the_other_vendors_and_avx2(monkeypatch, host, features, expected):
    from demos.bench import cpu
    monkeypatch.setattr(figures, "cpu_name", lambda: host)
    monkeypatch.setattr(cpu, "host_features", lambda: features)
    assert figures.tunings() == expected


def test_one_table_per_tuning_with_its_ratios_and_what_it_ran_on(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "tunings", lambda: ["host", "sapphirerapids", "haswell"])
    ratios = {"host": 0.8, "sapphirerapids": 0.85, "haswell": 0.95}
    for tuning, ratio in ratios.items():
        write_records(tmp_path, tuning, ratio)
    summary, *tables = figures.collect_tunings(str(tmp_path))["items"]
    assert [row[:2] for row in summary["rows"]] == [["znver4 (this CPU's own)", "AVX-512"],
                                                   ["sapphirerapids (--cpu sapphirerapids)", "AVX-512"],
                                                   ["haswell (--cpu haswell)", "AVX2"]]
    for row, ratio in zip(summary["rows"], ratios.values()):
        assert row[2:] == [f"{ratio:.2f}x"] * 4 + [f"{1 / ratio:.2f}x"]   # GPT, S, M, L; generation
    assert "--new 32 --rounds 3" in summary["note"]
    assert len(tables) == 3
    for table, tuning in zip(tables, ratios):
        assert "Some CPU 9000" in table["note"] and "--clock cpu" in table["command"]
        rows = {row[0]: row for row in table["rows"]}
        assert rows["matmul square 512, float32"][2:] == ["90.0", "numpy", "80.0", "1.12x"]
        assert not any("float64" in name for name in rows)          # the float32 products only
        assert rows["softmax(640,1000), float32"][2:] == ["100", "PyTorch", "200", "0.50x"]
        assert rows["greedy generation, SmolLM2-135M's shape"][1:] == [
            "tokens/s", f"{40 / ratios[tuning]:.1f}", "transformers", "40.0", f"{1 / ratios[tuning]:.2f}x"]
        compiled = "znver4" if tuning == "host" else tuning
        same = "NO" if tuning == "haswell" else "yes"
        assert f"Generation compiled for {compiled}; the same greedy tokens as transformers': {same}." in table["note"]
        assert f"python -m demos.bench.generate --new 32 --rounds 3{' --cpu ' + tuning if tuning != 'host' else ''} --clock cpu" \
            in table["command"]
        assert (f"--cpu {tuning}" in table["command"]) == (tuning != "host")
        widths = "zmm (512 bits) gemm, softmax, gelu" if tuning == "host" else "zmm (512 bits) gemm, gelu; ymm (256 bits) softmax"
        assert f"(demos/bench/widths.py; a kernel can mix widths): {widths}." in table["note"]


def test_a_kernels_record_without_widths_renders_without_them():
    assert figures.kernel_widths({"gemm_multiply_adds": {}}) == ""


def test_each_tuning_generates_on_one_model_folder_in_cpu_time(monkeypatch):
    """The group's generation commands: one a tuning, --cpu for all but the host's, one
    thread in CPU time, and one model folder (built by the first, reused by the others)."""
    monkeypatch.setattr(figures, "tunings", lambda: ["host", "znver4", "haswell"])
    commands = [c for c in figures.tuning_commands("runs") if c[0] == "demos.bench.generate"]
    assert len(commands) == 3
    for command, tuning in zip(commands, ["host", "znver4", "haswell"]):
        flags = " ".join(command[1:])
        assert flags.startswith("--new 32 --rounds 3") and "--threads" not in flags and "--clock cpu" in flags
        assert ("--cpu " + tuning in flags) == (tuning != "host")
        assert flags.endswith(f"--dir runs/bench/smollm2-shaped --json runs/bench/tunings/{tuning}/generate.json")
