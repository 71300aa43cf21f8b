"""The end-to-end part of the checks of the code a training step runs: a short seeded
training of a tiny model (an Embedding, a LayerNorm, a Linear, a matmul, cross-entropy and
Adam) through the project, whose losses must equal the numpy reference's step by step."""

import numpy as np

from exercises.checks.expected import expect

VOCAB, WIDTH, STEPS, LR = 7, 6, 6, 0.05


def training_losses():
    """(the initial parameters, the loss before each step) of the project's run."""
    import nn
    from autograd import manual_seed
    from nn import functional as F
    manual_seed(11)
    embed, norm = nn.Embedding(VOCAB, WIDTH, dtype=np.float64), nn.LayerNorm(WIDTH, dtype=np.float64)
    linear = nn.Linear(WIDTH, WIDTH, dtype=np.float64)
    out = nn.Parameter(np.random.default_rng(11).standard_normal((WIDTH, VOCAB)) * 0.5)
    params = [embed.weight, norm.weight, norm.bias, linear.weight, linear.bias, out]
    initial = [p.data.copy() for p in params]
    r = np.random.default_rng(12)
    ids, targets = r.integers(0, VOCAB, (3, 4)), r.integers(0, VOCAB, (3, 4))
    optimizer, losses = nn.optim.Adam(params, lr=LR), []
    for _ in range(STEPS):
        optimizer.zero_grad()
        logits = linear(norm(embed(ids))) @ out                            # (3, 4, VOCAB)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return initial, ids, targets, np.array(losses)


def judge_training(judge):
    initial, ids, targets, losses = training_losses()
    judge.compare("an end-to-end run: the losses of 6 seeded Adam steps of Embedding -> LayerNorm -> Linear -> "
                  "matmul -> cross-entropy, against the numpy reference", "ids (3, 4), vocabulary 7, width 6",
                  losses, expect("tiny_training", *initial, ids, targets, STEPS, LR), atol=1e-9, rtol=1e-7)
