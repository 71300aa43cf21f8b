"""The toy data the other model families learn from in the demos, kept apart from the models:
the sort task (decoder-only), arithmetic progressions (encoder-only) and bars at four
orientations (the Vision Transformer).  The encoder-decoder's tasks are in tasks.py and
scan.py."""

import numpy as np


# ----- encoder-only: the special tokens, the <class> token and masked-language-model inputs -----

PAD, CLS, MASK = 0, 1, 2
FIRST_SYMBOL = 3


def with_cls(sequences):
    """Prepend the <class> token: (B, T) -> (B, T + 1)."""
    sequences = np.asarray(sequences)
    return np.concatenate([np.full((len(sequences), 1), CLS), sequences], axis=1)


def mask_for_mlm(tokens, num_symbols, rng, rate=0.15):
    """BERT's masking.  Of the symbol positions (not PAD or CLS), `rate` are chosen; of
    those 80% become <mask>, 10% a random symbol and 10% stay.  Returns (inputs, targets)
    with targets -100 (ignored) everywhere but the chosen positions."""
    tokens = np.asarray(tokens)
    chosen = (tokens >= FIRST_SYMBOL) & (rng.random(tokens.shape) < rate)
    action = rng.random(tokens.shape)
    inputs = tokens.copy()
    inputs[chosen & (action < 0.8)] = MASK
    random_positions = chosen & (action >= 0.8) & (action < 0.9)
    inputs[random_positions] = rng.integers(FIRST_SYMBOL, FIRST_SYMBOL + num_symbols, random_positions.sum())
    targets = np.where(chosen, tokens, -100)
    return inputs, targets


# ----- decoder-only: read 6 digits from {0, 1, 2}, write them sorted -----

SORT_PAD, SORT_BOS, SORT_SEP = 0, 1, 2
DIGIT0 = 3


def sort_dataset(length=6, digits=3, heldout_fraction=0.2, seed=0):
    """Every sequence of `length` digits, split by a seeded shuffle into train and held-out.
    Each row is BOS x1..xn SEP sorted(x)1..n."""
    grid = np.stack(np.meshgrid(*[np.arange(digits)] * length, indexing="ij"), -1).reshape(-1, length)
    rows = np.concatenate([np.full((len(grid), 1), SORT_BOS), grid + DIGIT0, np.full((len(grid), 1), SORT_SEP),
                           np.sort(grid, axis=1) + DIGIT0], axis=1)
    order = np.random.default_rng(seed).permutation(len(rows))
    cut = int(len(rows) * heldout_fraction)
    return rows[order[cut:]], rows[order[:cut]]


def lm_batch(rows, length):
    """Inputs and next-token targets; only the answer positions (after SEP) count."""
    inputs, targets = rows[:, :-1], rows[:, 1:].copy()
    targets[:, :length + 1] = -100                     # the input digits and SEP are not predicted
    return inputs, targets


def sort_accuracy(model, rows, length):
    """Exact-match accuracy of greedy, cached generation of the sorted answer."""
    prompt = rows[:, :length + 2]                      # BOS x1..xn SEP
    out = model.generate(prompt, length)
    return float(np.mean((out[:, length + 2:] == rows[:, length + 2:]).all(axis=1)))


# ----- encoder-only: arithmetic progressions modulo num_symbols -----

def progressions(count, length, num_symbols, rng):
    """Rows (a + i d) mod num_symbols, i = 0..length-1, for random a and d: a masked symbol
    can be recovered from its neighbours."""
    start = rng.integers(0, num_symbols, (count, 1))
    step = rng.integers(1, num_symbols, (count, 1))
    return (start + step * np.arange(length)) % num_symbols + FIRST_SYMBOL


def corruption_task(count, length, num_symbols, rng):
    """Classification: label 1 for an intact progression, 0 for one with a symbol replaced."""
    rows = progressions(count, length, num_symbols, rng)
    labels = rng.integers(0, 2, count)
    for i in np.where(labels == 0)[0]:
        j = rng.integers(0, length)
        rows[i, j] = FIRST_SYMBOL + (rows[i, j] - FIRST_SYMBOL + rng.integers(1, num_symbols)) % num_symbols
    return with_cls(rows), labels


# ----- Vision Transformer: bars at four orientations -----

ORIENTATIONS = ("horizontal", "vertical", "diagonal", "anti-diagonal")


def bars(count, size, rng, noise=0.5, brightness=1.0):
    """Images with one bright bar (a line of width 2 and random offset) at one of four
    orientations, plus Gaussian noise.  Returns (images (count, size, size), labels)."""
    labels = rng.integers(0, 4, count)
    images = noise * rng.standard_normal((count, size, size))
    rows, cols = np.indices((size, size))
    for i, label in enumerate(labels):
        offset = rng.integers(2, size - 3)
        if label == 0:
            line = np.abs(rows - offset) <= 0.5
        elif label == 1:
            line = np.abs(cols - offset) <= 0.5
        elif label == 2:
            line = np.abs(rows - cols - (offset - size // 2)) <= 0.5
        else:
            line = np.abs(rows + cols - (offset + size // 2)) <= 0.5
        images[i] += brightness * line
    return images.astype(np.float32), labels
