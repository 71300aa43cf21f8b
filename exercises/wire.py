"""The one format in which a check's child and the judge talk: data only, never code.

A message is a length-prefixed frame (4 bytes, big-endian, then that many bytes of JSON).
Its values are None, booleans, numbers (NaN and infinities included), strings, lists and
dicts with string keys; a numpy array travels as {"__array__": [dtype, shape, base64 bytes]},
its dtype one of the plain numeric ones, at most MAX_DIMS dimensions. An answer holds at
most MAX_CONTAINERS lists and dicts and MAX_ITEMS items. Nothing is unpickled or evaluated: what a child
writes is parsed as data, bounded in size, and anything else is a `WireError`.

Both sides use this file: the child (exercises/child.py) to answer, the judge
(exercises/sandbox.py) to ask and to read the answers.
"""

import base64
import json
import os
import select
import time

import numpy as np

TASK = b"task"                    # what the grader sends the zygote with a task child's socket (the task goes to that socket)
MAX_BYTES = 4 * 2 ** 20          # one answer: far more than any check's arrays (they are a few KB)
MAX_CONTAINERS = 10_000          # lists and dicts in one answer (an array is one): a few dozen in any check's
MAX_ITEMS = 100_000              # commas in one answer: every list's items but one (an array's data has none)
MAX_DIMS = 8                     # an array's dimensions: a check's have at most 4
DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64"}


class WireError(Exception):
    """What a child sent is not a message of this format (or came too late, or too large)."""


def _plain(value):
    """value with every array, tuple and numpy scalar turned into JSON's types."""
    if isinstance(value, np.ndarray):
        if value.dtype.name not in DTYPES:
            raise WireError(f"an array of dtype {value.dtype} cannot be sent")
        data = base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii")
        return {"__array__": [value.dtype.name, list(value.shape), data]}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise WireError(f"a {type(value).__name__} cannot be sent, only data (numbers, strings, lists, arrays)")


def _array(spec):
    dtype, shape, data = spec
    if dtype not in DTYPES or not isinstance(shape, list) or len(shape) > MAX_DIMS or \
            not all(isinstance(n, int) and 0 <= n < 2 ** 31 for n in shape):
        raise WireError(f"not an array: {str(spec)[:80]}")
    raw = base64.b64decode(data.encode("ascii"), validate=True)
    if len(raw) != int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize:
        raise WireError(f"an array of shape {shape} and dtype {dtype} with {len(raw)} bytes")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _hook(pairs):
    found = dict(pairs)
    if "__array__" in found:
        if len(found) != 1:
            raise WireError("an array with other keys")
        return _array(found["__array__"])
    return found


def encode(value):
    body = json.dumps(_plain(value), separators=(",", ":")).encode()
    if len(body) > MAX_BYTES:
        raise WireError(f"a message of {len(body)} bytes, more than {MAX_BYTES}")
    return len(body).to_bytes(4, "big") + body


def decode(body):
    """The value a frame's body holds. Bounded before it is parsed: the Python objects of 4 MB
    of JSON can take gigabytes (`[{},{},...]`), and the judge may keep several answers."""
    if body.count(b"[") + body.count(b"{") > MAX_CONTAINERS or body.count(b",") > MAX_ITEMS:
        raise WireError(f"an answer of more than {MAX_CONTAINERS} lists and dicts or {MAX_ITEMS} items")
    try:
        return json.loads(body.decode("utf-8"), object_pairs_hook=_hook)
    except WireError:
        raise
    except (ValueError, TypeError, RecursionError, KeyError, IndexError) as err:
        raise WireError(f"not a message: {type(err).__name__}: {str(err)[:200]}") from None


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def send(fd, value):
    write_all(fd, encode(value))


def _read_exactly(fd, count, deadline):
    chunks, missing = [], count
    while missing:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise TimeoutError
        chunk = os.read(fd, min(missing, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


def receive(fd, deadline=None):
    """The next message on fd. TimeoutError past the deadline (time.monotonic()), EOFError when
    the other side closed, WireError for anything that is not a message or is over MAX_BYTES."""
    size = int.from_bytes(_read_exactly(fd, 4, deadline), "big")
    if size > MAX_BYTES:
        raise WireError(f"a message of {size} bytes announced, more than {MAX_BYTES}")
    return decode(_read_exactly(fd, size, deadline))
