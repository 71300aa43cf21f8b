"""The end-to-end part of the checks of the code a training step runs: a short seeded
training of a tiny model (an Embedding, a LayerNorm, a Linear, a matmul, cross-entropy and
Adam) through the project, whose losses must equal the numpy reference's step by step. The
judge draws the initial parameters and the batch; the child trains from them."""

import numpy as np

from exercises.checks.expected import expect

VOCAB, WIDTH, STEPS, LR = 7, 6, 6, 0.05


def training_inputs():
    """(the initial parameters: embedding, LayerNorm's weight and bias, Linear's weight and
    bias, the output matrix; ids; targets), seeded."""
    r = np.random.default_rng(11)
    initial = [r.standard_normal((VOCAB, WIDTH)), 1 + 0.1 * r.standard_normal(WIDTH), 0.1 * r.standard_normal(WIDTH),
               r.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH), 0.1 * r.standard_normal(WIDTH),
               r.standard_normal((WIDTH, VOCAB)) * 0.5]
    r = np.random.default_rng(12)
    return initial, r.integers(0, VOCAB, (3, 4)), r.integers(0, VOCAB, (3, 4))


def judge_training(judge, task):
    initial, ids, targets = training_inputs()
    losses = task.call("tiny_training", initial, ids, targets, STEPS, LR)
    judge.compare("an end-to-end run: the losses of 6 seeded Adam steps of Embedding -> LayerNorm -> Linear -> "
                  "matmul -> cross-entropy, against the numpy reference", "ids (3, 4), vocabulary 7, width 6",
                  losses, expect("tiny_training", *initial, ids, targets, STEPS, LR), atol=1e-9, rtol=1e-7)
