"""The checkpoint format every model's training writes: one .npz file (nn.save), no pickles.

    model_kind      the model's class name ("Transformer", "DecoderOnly", "RNNEncoderDecoder")
    model           its state dict
    model_config    its config dataclass, as JSON: with model_kind, enough to rebuild it
    train_config    the training config, as JSON
    history         the loop's history (transformer/training/loop.py), as JSON
    ...             whatever else the run needs to go on exactly where it stopped: the
                    optimizer's state, the random generators' states, a vocabulary

`run_state(model, ...)` gathers a run's entries; `model_from(state)` rebuilds the model of
any of them; `load_checkpoint(path, needs)` reads one and says clearly what is missing, and
what kind of model it holds when it is not the kind the caller wanted.  `generator_state` /
`restore_generator` carry a numpy Generator's exact state as text (no pickles), and
`CheckpointRotation` writes periodic checkpoints, keeping the last K and the best.

A resumed run is the same run: model, optimizer, schedule step, data position, every
random generator and the loss log come back from the checkpoint, and the losses that
follow are the ones the uninterrupted run would have printed, bit for bit (on the same
machine and kernel build: docs/RESULTS.md says why another CPU differs in the last bits).
"""

import dataclasses
import json
import os

import numpy as np

import nn


def _models():
    """model_kind -> (model class, config class).  Imported here: the models import the
    training modules' neighbours, not this file."""
    from transformer.encoder_decoder import Transformer, TransformerConfig
    from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig
    from transformer.families.rnn import RNNConfig, RNNEncoderDecoder
    return {"Transformer": (Transformer, TransformerConfig), "DecoderOnly": (DecoderOnly, DecoderOnlyConfig),
            "RNNEncoderDecoder": (RNNEncoderDecoder, RNNConfig)}


DESCRIPTIONS = {"Transformer": "an encoder-decoder Transformer (written by demos.train)",
                "DecoderOnly": "a GPT, decoder-only (written by demos.gpt)",
                "RNNEncoderDecoder": "an RNN encoder-decoder (written by demos.bottleneck)"}


def run_state(model, train_config=None, history=None, **extra):
    """A checkpoint's entries for `model`, trained with `train_config` (a dataclass) so far as
    `history` says (both left out when None: a model alone), plus `extra` (arrays, strings,
    or dicts of them)."""
    state = {"model_kind": type(model).__name__, "model": model.state_dict(),
             "model_config": json.dumps(dataclasses.asdict(model.config)), **extra}
    if train_config is not None:
        state["train_config"] = json.dumps(dataclasses.asdict(train_config))
    if history is not None:
        state["history"] = json.dumps(history)
    return state


def load_checkpoint(path, needs=(), kinds=None):
    """The entries of the checkpoint at `path` (a file, or a folder holding checkpoint.npz).
    Raises ValueError, naming the file, when it lacks an entry of `needs`, or when its model
    is not one of `kinds` (class names; None: any)."""
    if os.path.isdir(path):
        path = os.path.join(path, "checkpoint.npz")
    state = nn.load(path)
    if "model_kind" not in state or "model_config" not in state:
        raise ValueError(f"{path!r} is not a training checkpoint (it has no model_kind and model_config entries)")
    kind = str(state["model_kind"])
    if kinds is not None and kind not in kinds:
        raise ValueError(f"{path!r} holds {DESCRIPTIONS.get(kind, kind)}; this needs "
                         f"{' or '.join(DESCRIPTIONS.get(k, k) for k in kinds)}")
    missing = [key for key in needs if key not in state]
    if missing:
        raise ValueError(f"{path!r} lacks {', '.join(missing)}: it cannot be used for this "
                         "(a checkpoint written without them, e.g. by nn.save of a state dict alone?)")
    return state


def config_of(state):
    """The model config a checkpoint records, as its dataclass."""
    return _models()[str(state["model_kind"])][1](**json.loads(str(state["model_config"])))


def model_from(state):
    """The model a checkpoint holds, its weights loaded (in training mode, as a new model is)."""
    model_class = _models()[str(state["model_kind"])][0]
    model = model_class(config_of(state))
    model.load_state_dict(state["model"])
    return model


def generator_state(generator):
    """A numpy Generator's state as JSON text (its integers exceed 64 bits)."""
    return json.dumps(generator.bit_generator.state)


def restore_generator(generator, text):
    """Put a numpy Generator back into a state saved by generator_state."""
    generator.bit_generator.state = json.loads(str(text))
    return generator


class CheckpointRotation:
    """Writes `checkpoint.npz` (the latest), `step-N.npz` for the last `keep` saves, and
    `best.npz` whenever `score` improves (higher is better)."""

    def __init__(self, folder, keep=1):
        if keep < 1:
            raise ValueError(f"CheckpointRotation: keep must be >= 1, got {keep}")
        self.folder, self.keep = folder, keep
        self.best = -np.inf

    def save(self, state, step, score=None):
        os.makedirs(self.folder, exist_ok=True)
        nn.save(state, os.path.join(self.folder, "checkpoint.npz"))
        nn.save(state, os.path.join(self.folder, f"step-{step}.npz"))
        for old in self.numbered()[:-self.keep]:
            os.remove(old)
        if score is not None and score > self.best:
            self.best = score
            nn.save(state, os.path.join(self.folder, "best.npz"))

    def clear_earlier_run(self):
        """Remove an earlier run's step-N.npz and best.npz from the folder (a new run in the
        same folder: left there, they would pass for this run's, and an earlier run's later
        steps would outlast this run's in the rotation); returns their names."""
        if not os.path.isdir(self.folder):
            return []
        stale = self.numbered() + [path for path in [os.path.join(self.folder, "best.npz")] if os.path.exists(path)]
        for path in stale:
            os.remove(path)
        return [os.path.basename(path) for path in stale]

    def numbered(self):
        """The step-N.npz files in the folder, oldest first."""
        names = [n for n in os.listdir(self.folder) if n.startswith("step-") and n.endswith(".npz")]
        return [os.path.join(self.folder, n) for n in sorted(names, key=lambda n: int(n[5:-4]))]
