"""Learning-rate schedules.  As in PyTorch, call `scheduler.step()` once after each
`optimizer.step()`; the lr for optimizer step k (counting from 0) is base_lr * f(k)."""

import math


class LambdaLR:
    """lr = base_lr * lr_lambda(step) for every parameter group."""

    def __init__(self, optimizer, lr_lambda):
        self.optimizer = optimizer
        self.lr_lambda = lr_lambda
        self.base_lrs = [g["lr"] for g in optimizer.param_groups]
        self.last_step = 0
        self._apply()

    def _apply(self):
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group["lr"] = base * self.lr_lambda(self.last_step)

    def step(self):
        self.last_step += 1
        self._apply()

    def get_last_lr(self):
        return [g["lr"] for g in self.optimizer.param_groups]

    def state_dict(self):
        return {"last_step": self.last_step, "base_lrs": list(self.base_lrs)}

    def load_state_dict(self, state):
        self.last_step = int(state["last_step"])
        self.base_lrs = [float(x) for x in state["base_lrs"]]
        self._apply()


def noam(d_model, warmup):
    """The schedule of "Attention Is All You Need", for step s = k + 1 (k counted from 0):
    d_model^-0.5 * min(s^-0.5, s * warmup^-1.5): linear warm-up, then decay as 1/sqrt(s)."""
    def f(k):
        s = k + 1
        return d_model ** -0.5 * min(s ** -0.5, s * warmup ** -1.5)
    return f


def warmup_cosine(warmup, total, min_factor=0.0):
    """Linear warm-up over `warmup` steps to 1, then a cosine decay to min_factor at `total`."""
    def f(k):
        if k < warmup:
            return (k + 1) / warmup
        progress = min(1.0, (k - warmup) / max(1, total - warmup))
        return min_factor + (1 - min_factor) * 0.5 * (1 + math.cos(math.pi * progress))
    return f


class NoamLR(LambdaLR):
    """LambdaLR with the Noam schedule; the optimizer's lr is the factor in front (the paper used 1)."""

    def __init__(self, optimizer, d_model, warmup):
        super().__init__(optimizer, noam(d_model, warmup))


class WarmupCosineLR(LambdaLR):
    def __init__(self, optimizer, warmup, total, min_factor=0.0):
        super().__init__(optimizer, warmup_cosine(warmup, total, min_factor))
