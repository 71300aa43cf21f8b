"""The training recipe every demo shares: Adam with a learning-rate schedule, and one
optimisation step (backward, clip, update, advance the schedule)."""

from nn.optim import Adam, clip_grad_norm_
from nn.schedule import LambdaLR, noam, warmup_cosine


def make_optimizer(parameters, lr, warmup, decay_steps, schedule="cosine", d_model=None):
    """Adam (betas 0.9/0.98, as in the paper) with a learning-rate schedule:
    "cosine": linear warm-up to lr, then cosine decay to lr/10 by decay_steps;
    "noam": the paper's shape, linear warm-up then decay as 1/sqrt(step), scaled to peak at lr."""
    optimizer = Adam(parameters, lr=lr, betas=(0.9, 0.98), eps=1e-9)
    if schedule == "cosine":
        return optimizer, LambdaLR(optimizer, warmup_cosine(warmup, decay_steps, min_factor=0.1))
    if schedule == "noam":
        shape = noam(d_model or 1, warmup)
        peak = shape(warmup - 1)
        return optimizer, LambdaLR(optimizer, lambda k: shape(k) / peak)
    raise ValueError(f"make_optimizer: schedule must be 'cosine' or 'noam', got {schedule!r}")


def optimize(loss, optimizer, schedule, clip_norm):
    """One step: backward, clip the global gradient norm, update, advance the schedule
    (None: the caller sets each step's learning rate itself, as nanoGPT's recipe does)."""
    optimizer.zero_grad()
    loss.backward()
    params = [p for group in optimizer.param_groups for p in group["params"]]
    clip_grad_norm_(params, clip_norm)
    optimizer.step()
    if schedule is not None:
        schedule.step()
    return loss.item()
