"""What every Hugging Face architecture of huggingface.py shares: the Architecture record
(its names and four translations) and the checks a folder's weights meet before a model
is built (the sizes config.json claims, a tied lm_head)."""

import dataclasses
import re

import numpy as np

from transformer.training.safetensors import StoredTensor


@dataclasses.dataclass(frozen=True)
class Architecture:
    """One Hugging Face architecture: its names and the four translations."""
    name: str                      # config.json's "architectures" entry, e.g. "GPT2LMHeadModel"
    model_type: str                # config.json's "model_type", e.g. "gpt2"
    label: str                     # its name in messages, e.g. "GPT-2"
    cannot: callable               # (our config) -> [what of it this architecture cannot express]
    write_config: callable         # (our config, special ids) -> config.json's dict
    read_config: callable          # (config.json's dict) -> our DecoderOnlyConfig; ValueError if unsupported
    to_theirs: callable            # (our state dict, our config) -> {their name: array}
    from_theirs: callable          # ({their name: StoredTensor}, our config) -> {our name: StoredTensor or array}


def tie_word_embeddings(spec, default):
    """config.json's tie_word_embeddings (default when absent): a bool, or a ValueError (a
    string such as "yes" or "false" would read as true)."""
    tied = spec.get("tie_word_embeddings", default)
    if not isinstance(tied, bool):
        raise ValueError(f"tie_word_embeddings must be true or false, got {tied!r}")
    return tied


def _same_values(a, b):
    """Whether two tensors (arrays or StoredTensors) hold the same values; stored ones of one
    dtype are compared in the file, unread."""
    if isinstance(a, StoredTensor) and isinstance(b, StoredTensor) and a.dtype == b.dtype:
        return a.shape == b.shape and np.array_equal(a.raw(), b.raw())
    read = [t.read() if isinstance(t, StoredTensor) else t for t in (a, b)]
    return np.array_equal(*read)


def drop_tied_head(theirs, config, embedding):
    """Leave lm_head.weight out of `theirs` when config.json ties it to `embedding` (our
    tied model reads the embedding).  A file whose lm_head.weight differs from the embedding
    contradicts its config.json and is refused (tying would drop trained weights silently);
    an untied config needs an lm_head.weight."""
    if not config.tie_weights:
        if "lm_head.weight" not in theirs:
            raise KeyError("lm_head.weight (tie_word_embeddings is false)")
        return
    head = theirs.pop("lm_head.weight", None)
    if head is not None and embedding in theirs and not _same_values(head, theirs[embedding]):
        raise ValueError(f"config.json ties lm_head to {embedding} (tie_word_embeddings is true), but the file's "
                         "lm_head.weight differs from it; set tie_word_embeddings to false to read it untied")


def check_sizes(theirs, config, block_prefix, expected):
    """The sizes config.json gives must be the weights' before a model of that size is
    built: a config.json claiming a billion positions or layers is refused, not allocated.
    block_prefix: the blocks' names before their number; expected: {name: shape}, "{i}"
    in a name standing for every block."""
    layers = {int(m.group(1)) for name in theirs if (m := re.match(re.escape(block_prefix) + r"(\d+)\.", name))}
    if len(layers) != config.num_layers or sorted(layers) != list(range(len(layers))):
        raise ValueError(f"config.json gives {config.num_layers} layers, the weights hold blocks {sorted(layers)[:8]}")
    expected = {name.format(i=i): shape for name, shape in expected.items() for i in sorted(layers)}
    wrong = [f"{name} {tuple(theirs[name].shape) if name in theirs else 'missing'}, config.json: {shape}"
             for name, shape in expected.items() if name not in theirs or tuple(theirs[name].shape) != shape]
    if wrong:
        raise ValueError("the weights disagree with config.json: " + "; ".join(wrong[:3]))
