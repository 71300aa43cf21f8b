"""state_dicts, checkpoints, resuming, and refusing bad checkpoints without changing the model."""

import os

import numpy as np
import pytest

import nn
from autograd import Tensor, manual_seed
from nn import functional as F
from nn.optim import Adam, AdamW


def make_model(seed=0):
    manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.GELU(), nn.Dropout(0.1), nn.LayerNorm(8), nn.Linear(8, 3))


def train(model, opt, steps, data_seed):
    rng = np.random.default_rng(data_seed)
    losses = []
    for _ in range(steps):
        x = Tensor(rng.standard_normal((16, 4)).astype(np.float32))
        y = rng.integers(0, 3, 16)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_state_dict_round_trip_is_exact(tmp_path):
    a, b = make_model(0), make_model(1)
    nn.save(a.state_dict(), tmp_path / "m.npz")
    b.load_state_dict(nn.load(tmp_path / "m.npz"))
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and va.dtype == vb.dtype
        np.testing.assert_array_equal(va, vb)


def test_same_seed_same_losses_bit_for_bit():
    runs = []
    for _ in range(2):
        model = make_model(7)
        manual_seed(11)   # dropout masks
        runs.append(train(model, Adam(model.parameters(), lr=1e-2), 5, data_seed=3))
    assert runs[0] == runs[1]


def test_resume_from_checkpoint_gives_the_same_next_losses(tmp_path):
    model = make_model(3)
    opt = Adam(model.parameters(), lr=1e-2)
    manual_seed(5)
    train(model, opt, 4, data_seed=1)
    nn.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, tmp_path / "ckpt.npz")
    rng_state = manual_seed(9)
    uninterrupted = train(model, opt, 4, data_seed=2)

    resumed_model = make_model(42)
    resumed_opt = Adam(resumed_model.parameters(), lr=0.5)
    ckpt = nn.load(tmp_path / "ckpt.npz")
    resumed_model.load_state_dict(ckpt["model"])
    resumed_opt.load_state_dict(ckpt["optimizer"])
    manual_seed(9)
    assert train(resumed_model, resumed_opt, 4, data_seed=2) == uninterrupted
    assert rng_state is not None


def _assert_unchanged(model, before):
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


@pytest.mark.parametrize("corrupt,message", [
    (lambda s: s.pop("0.weight"), r"missing keys: 0\.weight"),
    (lambda s: s.__setitem__("extra.weight", np.zeros(2)), r"unexpected keys: extra\.weight"),
    (lambda s: s.__setitem__("4.bias", np.zeros(5)), r"4\.bias: expected shape \(3,\), got \(5,\)"),
])
def test_mismatched_state_dict_is_refused_and_model_unchanged(corrupt, message):
    model = make_model(0)
    before = model.state_dict()
    state = make_model(1).state_dict()
    corrupt(state)
    with pytest.raises(KeyError, match=message):
        model.load_state_dict(state)
    _assert_unchanged(model, before)


def test_object_array_checkpoint_is_refused(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, weight=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="object .*refusing"):
        nn.load(path)


def test_truncated_checkpoint_is_refused(tmp_path):
    path = tmp_path / "m.npz"
    nn.save(make_model(0).state_dict(), path)
    data = open(path, "rb").read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(ValueError, match="not a valid checkpoint"):
        nn.load(path)


def test_missing_file_and_directory_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint file"):
        nn.load(tmp_path / "nope.npz")
    with pytest.raises(FileNotFoundError, match="no checkpoint file"):
        nn.load(tmp_path)


def test_save_is_atomic_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "m.npz"
    nn.save({"w": np.ones(3)}, path)

    def crash(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(OSError, match="disk full"):
        nn.save({"w": np.zeros(3)}, path)
    np.testing.assert_array_equal(nn.load(path)["w"], np.ones(3))
    assert os.listdir(tmp_path) == ["m.npz"]


def test_average_checkpoints(tmp_path):
    paths = []
    for i in range(3):
        paths.append(nn.save({"w": np.full(2, float(i)), "b": np.array([i * 2.0])}, tmp_path / f"{i}.npz"))
    avg = nn.average_checkpoints(paths)
    np.testing.assert_array_equal(avg["w"], [1.0, 1.0])
    nn.save({"w": np.zeros(3), "b": np.zeros(1)}, tmp_path / "bad_shape.npz")
    with pytest.raises(ValueError, match=r"'w' has shape \(3,\)"):
        nn.average_checkpoints(paths + [tmp_path / "bad_shape.npz"])
    nn.save({"w": np.zeros(2)}, tmp_path / "bad_keys.npz")
    with pytest.raises(KeyError, match="different keys"):
        nn.average_checkpoints(paths + [tmp_path / "bad_keys.npz"])


def test_average_checkpoints_takes_the_model_of_training_checkpoints(tmp_path):
    model = make_model()
    opt = Adam(model.parameters(), lr=1e-2)
    paths = []
    for i in range(2):
        train(model, opt, 3, data_seed=i)
        paths.append(nn.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": 3 * (i + 1)},
                             tmp_path / f"ckpt{i}.npz"))
    first = nn.load(paths[0])["model"]
    avg = nn.average_checkpoints(paths)
    np.testing.assert_allclose(avg["0.weight"], (first["0.weight"] + model.state_dict()["0.weight"]) / 2, rtol=1e-6)
    nn.save({"a": {"b": np.zeros(2)}}, tmp_path / "nested.npz")
    with pytest.raises(ValueError, match="is not a model state_dict"):
        nn.average_checkpoints([tmp_path / "nested.npz"])


def test_files_that_are_not_checkpoints_get_clear_errors(tmp_path):
    (tmp_path / "notes.txt").write_text("hello, not a checkpoint\n")
    with pytest.raises(ValueError, match=r"is not a checkpoint: expected a .npz file"):
        nn.load(tmp_path / "notes.txt")
    np.save(tmp_path / "array.npy", np.zeros(3))
    with pytest.raises(ValueError, match="is a single .npy array, not a checkpoint"):
        nn.load(tmp_path / "array.npy")
    import zipfile
    with zipfile.ZipFile(tmp_path / "odd.npz", "w") as archive:
        archive.writestr("weights.bin", b"\x00\x01\x02")
    with pytest.raises(ValueError, match=r"its members \['weights.bin'\] are not .npy arrays"):
        nn.load(tmp_path / "odd.npz")


def test_a_killed_saves_temporary_file_is_removed_by_the_next_save(tmp_path):
    stray = tmp_path / ".tmp-killed.npz"
    stray.write_bytes(b"half a checkpoint")
    old = os.path.getmtime(stray) - 3600
    os.utime(stray, (old, old))
    fresh = tmp_path / ".tmp-another-process-saving-now.npz"
    fresh.write_bytes(b"in progress")
    nn.save({"w": np.zeros(2)}, tmp_path / "model.npz")
    assert not stray.exists() and fresh.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [".tmp-another-process-saving-now.npz", "model.npz"]


def test_an_empty_file_is_called_empty(tmp_path):
    (tmp_path / "empty.npz").write_bytes(b"")
    with pytest.raises(ValueError, match=r"is empty \(0 bytes\)"):
        nn.load(str(tmp_path / "empty.npz"))


def test_a_mismatch_names_the_first_few_parameters_and_the_count():
    wide = nn.Sequential(*[nn.Linear(4, 4) for _ in range(6)])
    narrow = nn.Sequential(*[nn.Linear(3, 3) for _ in range(6)])
    with pytest.raises(KeyError) as caught:
        narrow.load_state_dict(wide.state_dict())
    message = str(caught.value)
    assert "12 shape mismatches: 0.weight: expected shape (3, 3), got (4, 4); 0.bias" in message
    assert "... and 9 more" in message and len(message) < 400


@pytest.mark.parametrize("seed", [0, 1])
def test_load_state_dict_gives_each_parameter_its_own_c_ordered_memory(seed):
    """A transposed array (Fortran order, as a Conv1D weight read from another framework is)
    loads as a C-ordered copy, so the optimizers' in-place updates work on it and the source
    array never changes with the model."""
    rng = np.random.default_rng(seed)
    layer = nn.Linear(3, 5)
    weight = rng.standard_normal((3, 5)).astype(np.float32).T          # (5, 3), Fortran order
    source = weight.copy()
    layer.load_state_dict({"weight": weight, "bias": np.zeros(5, np.float32)})
    assert layer.weight.data.flags.c_contiguous and not np.shares_memory(layer.weight.data, weight)
    optimizer = AdamW(layer.parameters(), lr=0.1)
    layer(Tensor(rng.standard_normal((4, 3)).astype(np.float32))).sum().backward()
    optimizer.step()
    assert not np.array_equal(layer.weight.data, source) and np.array_equal(weight, source)
