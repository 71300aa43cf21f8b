"""Tiny models, tokenizers and random texts for the Hugging Face tests."""
import unicodedata

import numpy as np

from transformer.data import bpe_training
from transformer.data.bpe import END_OF_TEXT
from transformer.data.text import CharVocab
from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig, gpt_config

with open(bpe_training.__file__, encoding="utf-8") as source:
    CORPUS = source.read()
BPE = bpe_training.train(CORPUS, 256 + 1 + 50)
CHARS = CharVocab.from_text(CORPUS)
ASSIGNED = np.array([c for c in range(0x110000) if unicodedata.category(chr(c)) not in ("Cn", "Cs", "Co")])
PIECES = ["the", " the", "s", "'s", "'ll", " ", "  ", "\n", "\n\n", "\t", "_", "__init__", "123", " 4", "!?", ".",
          "é", "日本", "ß", "²", "\u0301", "\x1c", "\u00a0", "\u2028", END_OF_TEXT]


def tiny_gpt(vocab, seed=0, **changes):
    """A tiny GPT-2-style model (2 layers, width 16), randomised beyond GPT-2's init so that
    zero biases and unit gains would not hide a mapping mistake."""
    config = gpt_config(vocab, block_size=16, n_layer=2, n_head=2, n_embd=16, bias=changes.pop("bias", True))
    model = DecoderOnly(DecoderOnlyConfig(**{**config.__dict__, **changes}))
    rng = np.random.default_rng(seed)
    for p in model.parameters():
        p.data = (p.data + 0.1 * rng.standard_normal(p.shape)).astype(p.data.dtype)
    return model.eval()


def random_text(seed, pieces=60):
    """Text that exercises a pre-split: words, spaces, digits, punctuation, marks, odd
    whitespace, the special token, and characters drawn from all of Unicode's assigned ones."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(pieces):
        if rng.random() < 0.3:
            out.append("".join(chr(c) for c in rng.choice(ASSIGNED, rng.integers(1, 4))))
        else:
            out.append(PIECES[rng.integers(len(PIECES))])
    return "".join(out)
