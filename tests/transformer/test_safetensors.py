"""safetensors read and written with numpy: exact round trips for every dtype, half and
bfloat16 widened exactly, the safetensors library's own files read and ours read by it, and
every malformed file (fuzzed headers included) one ValueError naming the file."""
import json

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from transformer.training.safetensors import read_safetensors, write_safetensors


def random_tensors(seed):
    rng = np.random.default_rng(seed)
    return {"wte.weight": rng.standard_normal((5, 3)).astype(np.float32),
            "h.0.bias": rng.standard_normal(7),                                          # float64
            "half": rng.standard_normal((2, 3, 2)).astype(np.float16),
            "ids": rng.integers(-2**40, 2**40, (4,)),
            "small": rng.integers(-100, 100, (3, 1)).astype(np.int8),
            "mask": rng.random((2, 2)) < 0.5,
            "scalar": np.array(3.5, np.float32),
            "empty": np.zeros((0, 4), np.float32)}


def file_of(tmp_path, header, buffer=b"", length=None):
    """A file with this header (a dict, or raw bytes) and buffer."""
    raw = header if isinstance(header, bytes) else json.dumps(header).encode()
    path = tmp_path / "model.safetensors"
    path.write_bytes((len(raw) if length is None else length).to_bytes(8, "little") + raw + buffer)
    return path


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_round_trip_is_exact_for_every_dtype(tmp_path, seed):
    tensors = random_tensors(seed)
    write_safetensors(tmp_path / "t.safetensors", tensors, {"format": "np", "seed": str(seed)})
    back, metadata = read_safetensors(tmp_path / "t.safetensors")
    assert metadata == {"format": "np", "seed": str(seed)} and sorted(back) == sorted(tensors)
    for name, array in tensors.items():
        expected = array.astype(np.float32) if array.dtype == np.float16 else array
        assert back[name].dtype == expected.dtype and back[name].shape == expected.shape, name
        np.testing.assert_array_equal(back[name], expected, err_msg=name)


def test_header_is_padded_to_eight_bytes_and_arrays_are_copies(tmp_path):
    write_safetensors(tmp_path / "t.safetensors", {"a": np.arange(3, dtype=np.float32)[::-1]})
    raw = (tmp_path / "t.safetensors").read_bytes()
    assert int.from_bytes(raw[:8], "little") % 8 == 0
    back, _ = read_safetensors(tmp_path / "t.safetensors")
    back["a"][0] = 7                                                   # writable: not a view of the file's bytes
    np.testing.assert_array_equal(back["a"], [7, 1, 0])


def test_bfloat16_is_the_top_half_of_a_float32(tmp_path):
    values = np.array([1.0, -2.5, 3.140625, 1e-3, np.inf, -0.0], np.float32)
    top = (values.view(np.uint32) >> 16).astype("<u2")
    path = file_of(tmp_path, {"x": {"dtype": "BF16", "shape": [6], "data_offsets": [0, 12]}}, top.tobytes())
    np.testing.assert_array_equal(read_safetensors(path)[0]["x"], (top.astype(np.uint32) << 16).view(np.float32))
    assert read_safetensors(path)[0]["x"][1] == -2.5 and read_safetensors(path)[0]["x"].dtype == np.float32


def test_big_endian_and_unwritable_inputs(tmp_path):
    write_safetensors(tmp_path / "t.safetensors", {"a": np.arange(4, dtype=">f4").reshape(2, 2)})
    np.testing.assert_array_equal(read_safetensors(tmp_path / "t.safetensors")[0]["a"], [[0, 1], [2, 3]])
    with pytest.raises(ValueError, match="tensor 'c' has dtype complex128"):
        write_safetensors(tmp_path / "u.safetensors", {"c": np.zeros(2, complex)})
    with pytest.raises(ValueError, match="names must be strings other than '__metadata__'"):
        write_safetensors(tmp_path / "u.safetensors", {"__metadata__": np.zeros(2)})
    with pytest.raises(ValueError, match="metadata must map strings to strings"):
        write_safetensors(tmp_path / "u.safetensors", {"a": np.zeros(2)}, {"step": 3})


F32_2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
MALFORMED = {
    "shorter than its header length": ({"a": F32_2}, b"\0" * 8, 10**6, "header length 1000000 exceeds the"),
    "an absurd header length": ({"a": F32_2}, b"\0" * 8, 2**63, "and the limit of 100000000"),
    "a non-object header": ([1, 2], b"", None, "the header is a JSON list, expected an object"),
    "not JSON": (b"{\"a\": ", b"", None, "the header is not UTF-8 JSON"),
    "not UTF-8": (b"\xff\xfe{}", b"", None, "the header is not UTF-8 JSON"),
    "duplicate keys": (b'{"a": {}, "a": {}}', b"", None, "the header names 'a' twice"),
    "an unknown dtype": ({"a": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}}, b"\0\0", None,
                         "tensor 'a': unknown dtype 'F8_E4M3'"),
    "a shape that disagrees with the bytes": ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}},
                                              b"\0" * 8, None, "shape \\[3\\] of F32 takes 12 bytes, but data_offsets"),
    "a negative dimension": ({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8, None,
                             "is not a list of integers >= 0"),
    "offsets past the buffer": ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, b"\0" * 8, None,
                                "leaves bytes 0..4 unused"),
    "offsets past the end": ({"a": F32_2, "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}},
                             b"\0" * 12, None, "end at byte 16 of a 12-byte buffer \\(the file is truncated\\)"),
    "overlapping offsets": ({"a": F32_2, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}},
                            b"\0" * 12, None, "tensor 'b' at bytes 4..12 overlaps the tensor before it"),
    "a gap at the end": ({"a": F32_2}, b"\0" * 12, None, "end at byte 8 of a 12-byte buffer"),
    "reversed offsets": ({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}}, b"\0" * 8, None,
                         "shape \\[0\\] of F32 takes 0 bytes, but data_offsets \\[8, 0\\] span -8"),
    "an entry with extra fields": ({"a": {**F32_2, "x": 1}}, b"\0" * 8, None, "expected an object with dtype, shape"),
    "non-string metadata": ({"a": F32_2, "__metadata__": {"step": 3}}, b"\0" * 8, None,
                            "__metadata__ must map strings to strings"),
    "boolean offsets": ({"a": {"dtype": "F32", "shape": [0], "data_offsets": [False, False]}}, b"", None,
                        "data_offsets \\[False, False\\] is not"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_file_is_one_error_naming_it(tmp_path, case):
    header, buffer, length, says = MALFORMED[case]
    path = file_of(tmp_path, header, buffer, length)
    with pytest.raises(ValueError, match=says) as err:
        read_safetensors(path)
    assert str(err.value).startswith(f"read_safetensors: {str(path)!r} is not a valid safetensors file: ")
    assert "\n" not in str(err.value)


def test_a_file_too_short_for_the_length(tmp_path):
    (tmp_path / "x.safetensors").write_bytes(b"\1\0\0")
    with pytest.raises(ValueError, match="it has 3 bytes, fewer than the 8"):
        read_safetensors(tmp_path / "x.safetensors")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200), st.binary(max_size=40))
def test_fuzzed_headers_read_or_fail_with_one_valueerror(tmp_path_factory, header, buffer):
    path = file_of(tmp_path_factory.mktemp("fuzz"), header, buffer)
    try:
        tensors, _ = read_safetensors(path)
    except ValueError as err:
        assert str(err).startswith("read_safetensors: ") and "\n" not in str(err)
    else:
        assert sum(t.nbytes for t in tensors.values() if t.dtype.itemsize > 0) <= 2 * len(buffer)


ITEMSIZE = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8, "U8": 1, "F64": 8}


@st.composite
def nearly_valid_headers(draw):
    """(header, buffer size): tensors laid end to end, then perhaps one offset or the
    buffer's size nudged by a few bytes (so both valid and broken files come up)."""
    names = draw(st.lists(st.sampled_from("abcde"), unique=True, max_size=4))
    header, position = {}, 0
    for name in names:
        dtype, shape = draw(st.sampled_from(sorted(ITEMSIZE))), draw(st.lists(st.integers(0, 3), max_size=3))
        size = int(np.prod(shape)) * ITEMSIZE[dtype]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [position, position + size]}
        position += size
    if names and draw(st.booleans()):
        offsets = header[draw(st.sampled_from(names))]["data_offsets"]
        offsets[draw(st.integers(0, 1))] += draw(st.integers(-4, 4))
    return header, position + draw(st.sampled_from([0, 0, -1, 1, 8]))


@settings(max_examples=300, deadline=None)
@given(nearly_valid_headers())
def test_fuzzed_well_typed_headers_never_read_outside_the_buffer(tmp_path_factory, header_and_size):
    """The reader accepts exactly the headers whose spans tile the buffer with the byte
    counts their shapes need, and each tensor then holds its own bytes."""
    header, size = header_and_size
    size = max(size, 0)
    path = file_of(tmp_path_factory.mktemp("fuzz"), header, bytes(i % 256 for i in range(size)))
    spans = sorted(tuple(e["data_offsets"]) for e in header.values())
    ends = [0] + [end for _, end in spans]
    valid = (all(e["data_offsets"][1] - e["data_offsets"][0] == int(np.prod(e["shape"])) * ITEMSIZE[e["dtype"]]
                 for e in header.values())
             and [begin for begin, _ in spans] == ends[:-1] and ends[-1] == size)
    event("valid" if valid else "refused")
    if not valid:
        with pytest.raises(ValueError, match="read_safetensors: "):
            read_safetensors(path)
        return
    tensors, _ = read_safetensors(path)
    for name, e in header.items():
        begin, end = e["data_offsets"]
        raw = bytes(i % 256 for i in range(size))[begin:end]
        if e["dtype"] in ("U8", "I64", "F64", "F32"):                # kept as stored: the very bytes
            assert tensors[name].astype(tensors[name].dtype.newbyteorder("<")).tobytes() == raw, name
        assert tensors[name].shape == tuple(e["shape"]), name


def test_the_safetensors_librarys_files_and_ours_agree(tmp_path):
    st_numpy = pytest.importorskip("safetensors.numpy", reason="the safetensors library (bench extra)")
    for seed in range(3):
        tensors = random_tensors(seed)
        st_numpy.save_file(tensors, tmp_path / "theirs.safetensors", metadata={"format": "np"})
        back, metadata = read_safetensors(tmp_path / "theirs.safetensors")
        assert metadata == {"format": "np"}
        write_safetensors(tmp_path / "ours.safetensors", tensors)
        theirs = st_numpy.load_file(tmp_path / "ours.safetensors")
        for name, array in tensors.items():
            np.testing.assert_array_equal(back[name], array, err_msg=name)
            assert theirs[name].dtype == array.dtype
            np.testing.assert_array_equal(theirs[name], array, err_msg=name)


def test_bfloat16_written_by_pytorch_reads_exactly(tmp_path):
    torch = pytest.importorskip("torch", reason="PyTorch writes bfloat16 (bench extra)")
    from safetensors.torch import save_file
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(0))
    save_file({"x": x.to(torch.bfloat16), "y": x.to(torch.float16)}, tmp_path / "t.safetensors")
    back, _ = read_safetensors(tmp_path / "t.safetensors")
    np.testing.assert_array_equal(back["x"], x.to(torch.bfloat16).float().numpy())
    np.testing.assert_array_equal(back["y"], x.to(torch.float16).float().numpy())
