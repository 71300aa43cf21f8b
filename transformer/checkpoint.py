"""The checkpoint format every model's training writes: one .npz file (nn.save), no pickles.

    model_kind      the model's class name ("Transformer", "DecoderOnly", "RNNEncoderDecoder")
    model           its state dict
    model_config    its config dataclass, as JSON: with model_kind, enough to rebuild it
    train_config    the training config, as JSON
    history         the loop's history (transformer/loop.py), as JSON
    ...             whatever else the run needs to go on exactly where it stopped: the
                    optimizer's state, the random generators' states, a vocabulary

`model_from(state)` rebuilds the model of any of them; `load_checkpoint(path, needs)` reads
one and says clearly what is missing, and what kind of model it holds when it is not the
kind the caller wanted.
"""

import dataclasses
import json
import os

import nn


def _models():
    """model_kind -> (model class, config class).  Imported here: the models import the
    training modules' neighbours, not this file."""
    from transformer.decoder_only import DecoderOnly, DecoderOnlyConfig
    from transformer.model import Transformer, TransformerConfig
    from transformer.rnn import RNNConfig, RNNEncoderDecoder
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
