"""demos/bench/widths.py: the register width each fast kernel's machine code runs at."""

import pytest

from tests.helpers import ENGINE_ROOM_ABSENT

pytest.importorskip("autograd.engine_room", reason=ENGINE_ROOM_ABSENT)

from autograd.engine_room import target  # noqa: E402  (it reads the engine room's code)
from demos.bench import cpu, widths  # noqa: E402


def test_a_kernel_that_asks_for_wide_vectors_gets_them_and_no_kernel_outruns_the_cpu():
    """Compiled for this CPU: GELU (which asks for 512-bit vectors) runs on zmm where the CPU
    has AVX-512, and no kernel uses a register wider than the CPU compiled for has."""
    counts = widths.register_widths(["gelu", "softmax", "relu backward"])
    features = target.compile_features()
    allowed = ("zmm", "ymm", "xmm") if "avx512f" in features else ("ymm", "xmm") if "avx2" in features else ("xmm",)
    for name, kernel in counts.items():
        assert widths.widest(kernel) in allowed, (name, kernel)
    if "avx512f" in features:
        assert widths.widest(counts["gelu"]) == "zmm", counts["gelu"]


@pytest.mark.skipif("avx2" not in cpu.host_features(), reason="the AVX2 build runs Adam once to compile it: needs AVX2")
def test_compiled_for_avx2_no_kernel_uses_512_bit_registers():
    """--cpu haswell's build: every kernel at 256 bits at most, the GEMM's multiply-adds on ymm."""
    counts = widths.register_widths(["gemm", "gelu", "adam"], cpu="haswell")
    assert {name: widths.widest(kernel) for name, kernel in counts.items()} == {"gemm": "ymm", "gelu": "ymm", "adam": "ymm"}
    assert counts["gemm"]["fma"]["ymm"] > 0 and counts["gemm"]["fma"]["zmm"] == 0


def test_an_unknown_kernel_is_named():
    with pytest.raises(ValueError, match="no such kernel: sofmax"):
        widths.register_widths(["sofmax"])


@pytest.mark.parametrize("packed,width", [({"zmm": 3, "ymm": 9, "xmm": 40}, "zmm"), ({"zmm": 0, "ymm": 1, "xmm": 9}, "ymm"),
                                          ({"zmm": 0, "ymm": 0, "xmm": 2}, "xmm"), ({"zmm": 0, "ymm": 0, "xmm": 0}, None)])
def test_the_widest_register_is_the_widest_used_not_the_most_used(packed, width):
    assert widths.widest({"packed": packed}) == width
