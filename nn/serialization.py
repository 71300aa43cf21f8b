"""Checkpoints as .npz files: written atomically, loaded without ever unpickling.

`save` takes a (possibly nested) dict of arrays and numbers: a model's state_dict, or
{"model": ..., "optimizer": ..., "step": 1200}.  Nested keys are joined with "/" in the file.
"""

import glob
import os
import tempfile
import time
import zipfile

import numpy as np

SEPARATOR = "/"
TEMP_PREFIX = ".tmp-"
STALE_SECONDS = 60          # a temporary file this old belongs to a save that was killed


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
    _remove_stale_temporaries(folder)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=TEMP_PREFIX, suffix=".npz")
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


def _remove_stale_temporaries(folder):
    """Temporary files left by a save that was killed before its rename (older than a minute,
    so that a save running in another process right now is left alone)."""
    for stale in glob.glob(os.path.join(folder, TEMP_PREFIX + "*.npz")):
        try:
            if time.time() - os.path.getmtime(stale) > STALE_SECONDS:
                os.remove(stale)
        except OSError:
            pass                                   # removed meanwhile by someone else


def load(path):
    """Read a checkpoint written by `save` (nested dicts come back nested, numbers as 0-d
    arrays).  Object arrays are refused: loading never executes code from the file."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"load: no checkpoint file at {path!r}")
    if os.path.getsize(path) == 0:
        raise ValueError(f"load: {path!r} is empty (0 bytes): not a checkpoint, or one whose writing was cut off")
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic.startswith(b"\x93NUMPY"):
        raise ValueError(f"load: {path!r} is a single .npy array, not a checkpoint; checkpoints are .npz "
                         "files written by nn.save")
    if not magic.startswith(b"PK"):
        raise ValueError(f"load: {path!r} is not a checkpoint: expected a .npz file (a zip archive) written by nn.save")
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
    not_arrays = [name for name, value in flat.items() if not isinstance(value, np.ndarray)]
    if not_arrays:
        raise ValueError(f"load: {path!r} is not a valid checkpoint: its members {not_arrays} are not .npy arrays")
    return _unflatten(flat)


def average_checkpoints(paths):
    """The element-wise mean of several model state_dicts (a training tip of the original
    Transformer: average the last few checkpoints).  Keys and shapes must all agree.  A
    checkpoint holding {"model": ..., "optimizer": ...} (as training writes) contributes
    its "model" entry."""
    if not paths:
        raise ValueError("average_checkpoints: no paths given")
    states = [_model_state(load(p), p) for p in paths]
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


def _model_state(state, path):
    if isinstance(state.get("model"), dict):
        state = state["model"]
    nested = [key for key, value in state.items() if isinstance(value, dict)]
    if nested:
        raise ValueError(f"average_checkpoints: {path!r} is not a model state_dict (entries {nested} are nested)")
    return state
