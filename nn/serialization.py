"""Checkpoints as .npz files: written atomically, loaded without ever unpickling.

`save` takes a (possibly nested) dict of arrays and numbers: a model's state_dict, or
{"model": ..., "optimizer": ..., "step": 1200}.  Nested keys are joined with "/" in the file.
"""

import os
import tempfile
import zipfile

import numpy as np

SEPARATOR = "/"


def _flatten(obj, prefix=""):
    for key, value in obj.items():
        key = str(key)
        if SEPARATOR in key:
            raise ValueError(f"save: key {key!r} may not contain {SEPARATOR!r}")
        name = f"{prefix}{SEPARATOR}{key}" if prefix else key
        if isinstance(value, (list, tuple)) and any(isinstance(v, dict) for v in value):
            value = dict(enumerate(value))    # a list of dicts comes back as {"0": ..., "1": ...}
        if isinstance(value, dict):
            yield from _flatten(value, name)
        else:
            array = np.asarray(value)
            if array.dtype == object:
                raise TypeError(f"save: {name!r} is not numeric or text data (got {type(value).__name__})")
            yield name, array


def _unflatten(flat):
    root = {}
    for name, array in flat.items():
        node = root
        *parents, leaf = name.split(SEPARATOR)
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = array
    return root


def save(state, path):
    """Write `state` to `path` atomically: a temporary file in the same folder, then a
    rename, so a crash never leaves a half-written checkpoint under `path`."""
    flat = dict(_flatten(state))
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".npz")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **flat)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    return path


def load(path):
    """Read a checkpoint written by `save` (nested dicts come back nested, numbers as 0-d
    arrays).  Object arrays are refused: loading never executes code from the file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load: no checkpoint file at {path!r}")
    try:
        with np.load(path, allow_pickle=False) as archive:
            flat = {name: archive[name] for name in archive.files}
    except ValueError as err:
        if "allow_pickle" in str(err):
            raise ValueError(f"load: {path!r} holds an object (pickled) array; refusing to load it, "
                             "since unpickling can run arbitrary code") from None
        raise ValueError(f"load: {path!r} is not a valid checkpoint: {err}") from None
    except (zipfile.BadZipFile, EOFError, OSError) as err:
        raise ValueError(f"load: {path!r} is not a valid checkpoint (truncated or corrupt): {err}") from None
    return _unflatten(flat)


def average_checkpoints(paths):
    """The element-wise mean of several model state_dicts (a training tip of the original
    Transformer: average the last few checkpoints).  Keys and shapes must all agree."""
    if not paths:
        raise ValueError("average_checkpoints: no paths given")
    states = [load(p) for p in paths]
    first = states[0]
    for path, state in zip(paths[1:], states[1:]):
        if set(state) != set(first):
            diff = sorted(set(state) ^ set(first))
            raise KeyError(f"average_checkpoints: {path!r} has different keys from {paths[0]!r}: {diff}")
        for key in first:
            if state[key].shape != first[key].shape:
                raise ValueError(f"average_checkpoints: {key!r} has shape {state[key].shape} in {path!r} "
                                 f"but {first[key].shape} in {paths[0]!r}")
    return {key: (sum(s[key].astype(np.float64) for s in states) / len(states)).astype(first[key].dtype)
            for key in first}
