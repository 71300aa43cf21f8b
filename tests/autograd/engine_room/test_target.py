"""The engine room fits the CPU it is compiled for: register tiles from the vector width,
the GEMM's hot loop on the widest registers, blocks from the caches read at run time."""

import numba
import numpy as np
import pytest

from autograd.engine_room import gemm, small_gemm, target

AVX512 = {"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl"}
AVX2 = {"avx", "avx2", "fma"}
SSE = {"sse4.2", "popcnt"}


@pytest.mark.parametrize("features,arm,width,registers", [
    (AVX512, False, 64, 32), (AVX2, False, 32, 16), (SSE, False, 16, 16), ({"neon", "fp-armv8"}, True, 16, 32)])
def test_vector_width_and_registers_follow_the_features(features, arm, width, registers):
    assert target.vector_bytes(features) == width
    assert target.vector_registers(features, arm=arm) == registers


def test_features_are_numbas_when_set(monkeypatch):
    monkeypatch.setattr(numba.config, "CPU_FEATURES", "+sse4.2,+avx,+avx2,+fma,-avx512f")
    assert target.vector_bytes() == 32 and target.vector_registers(arm=False) == 16
    monkeypatch.setattr(numba.config, "CPU_FEATURES", "+avx2,+fma,+avx512f,+avx512bw")
    assert target.vector_bytes() == 64 and target.vector_registers(arm=False) == 32


@pytest.mark.parametrize("registers,vector_bytes", [(32, 64), (32, 16), (16, 32), (16, 16)])
def test_gemm_tile_fits_the_register_file(registers, vector_bytes):
    """MR rows of four vector registers of accumulators, plus a row of B (four more), fit."""
    rows = gemm.tile_rows(registers, vector_bytes)
    assert rows >= 3 and 4 * rows + 4 <= registers


def test_host_tiles_fit_the_host_registers():
    per_row = gemm.NR[np.float32] * 4 // gemm.VECTOR_BYTES
    assert per_row == 4 and gemm.MR * per_row + per_row <= gemm.VECTOR_REGISTERS
    assert small_gemm.MR * 2 + 2 <= gemm.VECTOR_REGISTERS


@pytest.mark.parametrize("text,size", [("48K", 48 << 10), ("2048K", 2 << 20), ("2M", 2 << 20), ("32KB", 32 << 10),
                                       ("512", 512), ("lots", None)])
def test_cache_sizes_are_parsed(text, size):
    assert target._parse_size(text) == size


def test_cache_sizes_fall_back_where_they_cannot_be_read(monkeypatch, tmp_path):
    monkeypatch.setattr(target, "_CACHE_FOLDER", str(tmp_path / "missing"))
    monkeypatch.setattr(target, "_SYSCONF_NAMES", {1: "SC_NO_SUCH_NAME", 2: "SC_NO_SUCH_NAME"})
    assert target.cache_bytes(1) == target.FALLBACK_CACHE_BYTES[1]
    assert target.cache_bytes(2) == target.FALLBACK_CACHE_BYTES[2]


def test_cache_sizes_are_read_from_sys(monkeypatch, tmp_path):
    for index, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K")]):
        folder = tmp_path / f"index{index}"
        folder.mkdir()
        (folder / "level").write_text(f"{level}\n")
        (folder / "type").write_text(f"{kind}\n")
        (folder / "size").write_text(f"{size}\n")
    monkeypatch.setattr(target, "_CACHE_FOLDER", str(tmp_path))
    assert target.cache_bytes(1) == 48 << 10 and target.cache_bytes(2) == 2 << 20


def test_fma_registers_counts_destination_widths():
    asm = ("\tvfmadd231ps\t%zmm1, %zmm2, %zmm3\n\tvfmadd231ps\t(%rax){1to16}, %zmm2, %zmm4\n"
           "\tvfmadd213ps\t%ymm1, %ymm2, %ymm3\n\tvaddps\t%zmm1, %zmm2, %zmm3\n\tvfmadd231ss\t%xmm1, %xmm2, %xmm3\n")
    assert target.fma_registers(asm) == {"zmm": 2, "ymm": 1, "xmm": 1}


def test_packed_registers_count_whole_vector_float_instructions_only():
    """Packed float instructions (ps, pd) by destination width; scalar ones (ss, sd),
    integer vector ones (vpmaxsd, vpaddd) and moves of scalars are left out."""
    asm = ("\tvmovups\t(%rdi), %zmm0\n\tvaddps\t%zmm0, %zmm1, %zmm1\n\tvmulpd\t%ymm2, %ymm3, %ymm3\n"
           "\tvfmadd231ps\t%xmm1, %xmm2, %xmm3\n\tvaddss\t%xmm1, %xmm2, %xmm3\n\tvpmaxsd\t%zmm1, %zmm2, %zmm3\n"
           "\tvpaddd\t%ymm1, %ymm2, %ymm3\n\tvmovups\t%zmm1, (%rax)\n\tvcvtps2pd\t%ymm1, %zmm2\n")
    assert target.packed_registers(asm) == {"zmm": 4, "ymm": 1, "xmm": 1}


@pytest.mark.skipif(numba.config.DISABLE_JIT, reason="inspects compiled code")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_micro_kernel_runs_on_the_widest_registers(dtype):
    """The GEMM's hot loop, as its drivers compile it (the micro-kernel called from a function
    that has no vector-width preference of its own), multiplies and adds on 512-bit registers
    where the CPU has AVX-512, and on none wider than it has elsewhere."""
    kernel = gemm.compile_micro_kernel(gemm.MR, gemm.NR[dtype], dtype)

    @numba.extending.register_jitable
    def block(a, b, k, tile):                 # like gemm's block(): no preference of its own
        kernel(a, b, k, tile)

    def driver(a, b, k, tile):
        block(a, b, k, tile)

    compiled = numba.njit(cache=False)(driver)
    a = np.ones((8, gemm.MR), dtype)
    b = np.ones((8, gemm.NR[dtype]), dtype)
    tile = np.zeros((gemm.MR, gemm.NR[dtype]), dtype)
    with gemm.slp_vectorizer():                 # as the drivers are compiled
        compiled(a, b, 8, tile)
    np.testing.assert_array_equal(tile, 8)
    asm = compiled.inspect_asm(compiled.signatures[0])
    if "fma" not in target.compile_features():        # SSE: no fused multiply-add, no wider registers
        assert "%ymm" not in asm and "%zmm" not in asm and "mulp" in asm
        return
    counts = target.fma_registers(asm)
    widest = {64: "zmm", 32: "ymm", 16: "xmm"}[gemm.VECTOR_BYTES]
    # one multiply-add per accumulator register per kk, at the widest width
    assert counts[widest] >= gemm.MR * 4, counts
    if widest != "zmm":
        assert counts["zmm"] == 0, counts


@pytest.mark.parametrize("l2_kib,mr,vector_bytes,strips", [(2048, 4, 64, 16), (1024, 4, 64, 16), (1024, 3, 32, 48),
                                                           (256, 3, 32, 21), (256, 4, 64, 16), (64, 3, 32, 5),
                                                           (16, 6, 16, 4)])
def test_row_blocks_fit_a_quarter_of_l2(l2_kib, mr, vector_bytes, strips):
    assert gemm.row_block_strips(l2_kib << 10, mr, vector_bytes) == strips
    assert strips == 4 or strips * mr * gemm.KC * 4 <= (l2_kib << 10) // 4


def test_micro_kernel_ir_builds_for_aarch64_with_neon():
    """Beyond x86: the micro-kernel's LLVM IR, at the tile sized for NEON's thirty-two 128-bit
    registers, optimized and compiled by llvmlite's LLVM for an AArch64 CPU (Apple's M1),
    multiplies and adds on NEON's four-number registers, one fused multiply-add per
    accumulator per kk."""
    import llvmlite.binding as llvm
    import llvmlite.ir
    from autograd.engine_room import micro_kernel
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    triple = "aarch64-unknown-linux-gnu"
    machine = llvm.Target.from_triple(triple).create_target_machine(cpu="apple-m1", features="+neon", opt=3)
    rows = gemm.tile_rows(target.vector_registers({"neon"}, arm=True), target.vector_bytes({"neon"}))
    columns = 4 * target.vector_bytes({"neon"}) // 4                        # four registers of float32
    module = llvmlite.ir.Module("micro_kernel")
    module.triple = triple
    micro_kernel._define_micro_kernel(module, "micro_kernel", rows, columns, np.float32, False, True).linkage = "external"
    parsed = llvm.parse_assembly(str(module))
    parsed.data_layout = str(machine.target_data)
    parsed.verify()
    options = llvm.create_pipeline_tuning_options(speed_level=3)
    options.slp_vectorization = True
    builder = llvm.create_pass_builder(machine, options)
    builder.getModulePassManager().run(parsed, builder)
    asm = machine.emit_assembly(parsed)
    fused = [line for line in asm.splitlines() if line.strip().startswith("fmla")]
    assert (rows, columns) == (6, 16)
    assert len(fused) == rows * columns // 4 and all(".4s" in line for line in fused), fused
