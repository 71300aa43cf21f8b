"""demos/bench/cpu.py: benchmarking as another CPU sets the tuning, the features and a cache of its own."""

import pytest

from demos.bench import cpu

X86_HOST = {"avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "amx-tile", "vaes", "gfni",
            "sse4.2", "sse4.1", "ssse3", "sse3", "sse2", "sse", "popcnt", "cx16", "cx8", "cmov", "fxsr", "mmx",
            "sahf", "64bit", "bmi", "bmi2", "lzcnt", "movbe", "xsave"}


@pytest.fixture
def avx512_host(monkeypatch):
    monkeypatch.setattr(cpu, "host_features", lambda: set(X86_HOST))


@pytest.mark.parametrize("name,on,off", [("haswell", {"avx2", "fma"}, {"avx512f", "avx512bw", "amx-tile", "gfni"}),
                                         ("x86-64-v2", {"sse4.2", "popcnt"}, {"avx", "avx2", "fma", "avx512f", "f16c"}),
                                         ("znver4", {"avx512f", "avx2", "fma"}, set())])
def test_features_are_the_targets_and_the_hosts_wider_ones_are_off(avx512_host, name, on, off):
    flags = cpu.feature_string(name).split(",")
    assert {f"+{f}" for f in on} <= set(flags) and {f"-{f}" for f in off} <= set(flags)
    assert not any(flag[1:] in on for flag in flags if flag.startswith("-"))


def test_each_target_compiles_into_a_cache_of_its_own(avx512_host):
    environments = {name: cpu.target_environment(name) for name in cpu.TARGETS}
    assert len({env["NUMBA_CACHE_DIR"] for env in environments.values()}) == len(cpu.TARGETS)
    for name, env in environments.items():
        assert env["NUMBA_CPU_NAME"] == name and env[cpu.CHILD] == name
    held = {"OPENBLAS_CORETYPE": "Haswell", "ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
            "ONEDNN_MAX_CPU_ISA": "AVX2"}            # PyTorch's products run on MKL and oneDNN, which pick their own
    assert {key: environments["haswell"].get(key) for key in held} == held
    assert not set(held) & set(environments["znver4"])


def test_a_target_the_host_cannot_run_or_an_unknown_one_is_refused(monkeypatch):
    monkeypatch.setattr(cpu, "host_features", lambda: {"sse", "sse2", "64bit"})
    with pytest.raises(SystemExit, match="lacks .*avx2"):
        cpu.target_environment("haswell")
    with pytest.raises(SystemExit, match="unknown target"):
        cpu.target_environment("pentium")


@pytest.mark.parametrize("name", ["sapphirerapids", "icelake-server", "znver4"])
def test_an_avx512_tuning_is_refused_on_a_cpu_without_avx512_not_built_as_avx2_under_its_name(monkeypatch, name):
    monkeypatch.setattr(cpu, "host_features", lambda: X86_HOST - {"avx512f", "avx512bw", "avx512vl"})
    with pytest.raises(SystemExit, match=f"--cpu {name}: this CPU lacks avx512f"):
        cpu.feature_string(name)


def test_without_a_target_or_in_the_targets_child_nothing_is_rerun(monkeypatch):
    monkeypatch.setattr(cpu.subprocess, "run", lambda *a, **k: pytest.fail("a child was started"))
    assert cpu.ran_in_child(None, "demos.bench.generate", []) is False
    monkeypatch.setenv(cpu.CHILD, "haswell")
    assert cpu.ran_in_child("haswell", "demos.bench.generate", []) is False


def test_a_child_that_fails_stops_its_parent_with_the_childs_status(avx512_host):
    """The child (a real one) refuses --new 0 with argparse's status 2, which the parent exits with."""
    with pytest.raises(SystemExit) as stop:
        cpu.ran_in_child("haswell", "demos.bench.generate", ["--new", "0"])
    assert stop.value.code == 2
