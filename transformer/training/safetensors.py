"""The safetensors format, read and written with numpy: Hugging Face's file of named tensors.

    8 bytes         N, the header's length (unsigned, little-endian)
    N bytes         the header: a JSON object (UTF-8, padded with spaces)
                        {"wte.weight": {"dtype": "F32", "shape": [50257, 768], "data_offsets": [0, 154389504]},
                         ...,
                         "__metadata__": {"format": "pt"}}          (optional, strings only)
    the rest        the byte buffer: every tensor's raw little-endian bytes, row-major, at
                    data_offsets (begin, end) counted from the buffer's start

Unlike a pickle (PyTorch's .bin), the file holds data only: reading it runs nothing from it.
A file is untrusted input, so `read_safetensors` checks everything the header claims before
using it: the header fits in the file and is a JSON object of well-formed entries, each
dtype is known, each shape's byte count equals its offsets' span, and the spans tile the
buffer exactly (no overlap, no gap, nothing past its end).  Any failure is one ValueError
naming the file.  F16 and BF16 are widened to float32 (numpy has no bfloat16: its bits are
a float32's top half), other dtypes kept.  `open_safetensors` memory-maps the file and
reads each tensor only when asked, into an array of the caller's (a model's parameter), so
that a large model loads without a second copy of its weights.
"""

import json
import math
import mmap
import os

import numpy as np

DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
          "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
NAMES = {np.dtype(t): name for name, t in DTYPES.items() if name != "BF16"}
MAX_HEADER = 100_000_000              # the safetensors library's own limit on N
METADATA = "__metadata__"


def read_safetensors(path):
    """({name: numpy array}, {metadata key: value}) of the safetensors file at path."""
    stored, metadata = open_safetensors(path)
    return {name: tensor.read() for name, tensor in stored.items()}, metadata


def open_safetensors(path):
    """({name: StoredTensor}, {metadata key: value}) of the safetensors file at path, its
    header checked and nothing else read yet: the file is memory-mapped, and each tensor is
    read when asked (a model of 500 MB loads without a second copy of it)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            raise _malformed(path, f"it has {size} bytes, fewer than the 8 of the header length")
        length = int.from_bytes(f.read(8), "little")
        if length > min(size - 8, MAX_HEADER):
            raise _malformed(path, f"the header length {length} exceeds the {size - 8} bytes after it"
                             + (f" (and the limit of {MAX_HEADER})" if length > MAX_HEADER else ""))
        header = _parse_header(path, f.read(length))
        entries = {name: _entry(path, name, spec) for name, spec in header.items() if name != METADATA}
        _check_tiling(path, entries, size - 8 - length)
        metadata = _metadata(path, header.get(METADATA, {}))
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if entries else None
    start = 8 + length
    return {name: StoredTensor(mapped, dtype, shape, start + begin)
            for name, (dtype, shape, begin, _) in entries.items()}, metadata


class StoredTensor:
    """One tensor of a memory-mapped safetensors file, not yet read: its dtype name (e.g.
    "BF16"), shape, and where its bytes start.  read() gives a numpy array (F16 and BF16
    widened to float32); read_into(out) writes it into an existing array, and lets the
    operating system drop the file's pages from memory once they are copied."""

    def __init__(self, mapped, dtype, shape, offset):
        self.mapped, self.dtype, self.shape, self.offset = mapped, dtype, shape, offset

    @property
    def read_dtype(self):
        """The numpy dtype read() gives: float32 for F16 and BF16, the stored one otherwise."""
        return np.dtype(np.float32 if self.dtype in ("F16", "BF16") else DTYPES[self.dtype])

    def raw(self):
        """The stored values as a read-only view of the file (BF16 as its uint16 bits)."""
        count = math.prod(self.shape)
        if count == 0:
            return np.zeros(self.shape, DTYPES[self.dtype])
        return np.frombuffer(self.mapped, np.dtype(DTYPES[self.dtype]).newbyteorder("<"), count,
                             self.offset).reshape(self.shape)

    def read(self):
        out = np.empty(self.shape, self.read_dtype)
        self.read_into(out)
        return out

    def read_into(self, out):
        """Write the tensor into out (an array of its shape; float32 for F16 and BF16, else
        any dtype numpy casts to), then release the pages it was read from."""
        raw = self.raw()
        if self.dtype == "BF16" and out.dtype == np.float32 and out.flags.c_contiguous:
            bits = out.view(np.uint32)                 # bfloat16 is the top 16 bits of a float32
            bits[...] = raw
            bits <<= 16
        elif self.dtype == "BF16":
            out[...] = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            out[...] = raw
        if raw.size and hasattr(mmap, "MADV_DONTNEED"):
            page = self.offset - self.offset % mmap.PAGESIZE
            self.mapped.madvise(mmap.MADV_DONTNEED, page, self.offset + raw.nbytes - page)
        return out


def _malformed(path, reason):
    return ValueError(f"read_safetensors: {os.fspath(path)!r} is not a valid safetensors file: {reason}")


def _parse_header(path, raw):
    """The header's JSON object; duplicate keys are refused (JSON would keep the last)."""
    def unique(pairs):
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys):
            raise _malformed(path, f"the header names {sorted(k for k in set(keys) if keys.count(k) > 1)[0]!r} twice")
        return dict(pairs)
    try:
        header = json.loads(raw.decode("utf-8"), object_pairs_hook=unique)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise _malformed(path, f"the header is not UTF-8 JSON ({err})") from None
    if not isinstance(header, dict):
        raise _malformed(path, f"the header is a JSON {type(header).__name__}, expected an object")
    return header


def _entry(path, name, spec):
    """(dtype name, shape, begin, end) of one tensor's header entry, each checked."""
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data_offsets"}:
        raise _malformed(path, f"tensor {name!r}: expected an object with dtype, shape and data_offsets, got {spec!r}")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if dtype not in DTYPES:
        raise _malformed(path, f"tensor {name!r}: unknown dtype {dtype!r} (known: {', '.join(DTYPES)})")
    if not isinstance(shape, list) or not all(_count(d) for d in shape):
        raise _malformed(path, f"tensor {name!r}: shape {shape!r} is not a list of integers >= 0")
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_count(o) for o in offsets):
        raise _malformed(path, f"tensor {name!r}: data_offsets {offsets!r} is not [begin, end] in bytes")
    begin, end = offsets
    expected = math.prod(shape) * np.dtype(DTYPES[dtype]).itemsize
    if end - begin != expected:
        raise _malformed(path, f"tensor {name!r}: shape {shape} of {dtype} takes {expected} bytes, but data_offsets "
                         f"{offsets} span {end - begin}")
    return dtype, tuple(shape), begin, end


def _count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_tiling(path, entries, buffer_size):
    """The tensors' byte spans, in order, must cover the buffer from 0 to its end with no
    overlap and no gap (as the safetensors library requires)."""
    position = 0
    for name, (_, _, begin, end) in sorted(entries.items(), key=lambda item: item[1][2:]):
        if begin != position:
            what = "overlaps the tensor before it" if begin < position else f"leaves bytes {position}..{begin} unused"
            raise _malformed(path, f"tensor {name!r} at bytes {begin}..{end} {what}")
        position = end
    if position != buffer_size:
        raise _malformed(path, f"the tensors end at byte {position} of a {buffer_size}-byte buffer"
                         + (" (the file is truncated)" if position > buffer_size else ""))


def _metadata(path, metadata):
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _malformed(path, f"{METADATA} must map strings to strings, got {metadata!r}")
    return metadata


def write_safetensors(path, tensors, metadata=None):
    """Write {name: numpy array} (and {str: str} metadata) as a safetensors file, the
    tensors in name order, the header padded with spaces to a multiple of 8 bytes."""
    header, arrays, position = {}, [], 0
    for name in sorted(tensors):
        array = np.asarray(tensors[name], order="C")
        if not isinstance(name, str) or name == METADATA:
            raise ValueError(f"write_safetensors: tensor names must be strings other than {METADATA!r}, got {name!r}")
        if array.dtype.newbyteorder("=") not in NAMES:
            raise ValueError(f"write_safetensors: tensor {name!r} has dtype {array.dtype}; "
                             f"writable: {', '.join(str(d) for d in NAMES)}")
        array = array.astype(array.dtype.newbyteorder("<"))
        header[name] = {"dtype": NAMES[array.dtype.newbyteorder("=")], "shape": list(array.shape),
                        "data_offsets": [position, position + array.nbytes]}
        arrays.append(array)
        position += array.nbytes
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ValueError(f"write_safetensors: metadata must map strings to strings, got {metadata!r}")
        header[METADATA] = dict(metadata)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(len(raw).to_bytes(8, "little"))
        f.write(raw)
        for array in arrays:
            f.write(array.tobytes())
