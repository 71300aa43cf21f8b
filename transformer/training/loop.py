"""The training loop: one for every model, the encoder-decoder on a toy task and the GPT on text.

What differs between models lives in a *job* (transformer/training/seq2seq.py's ToyTaskJob,
transformer/training/lm.py's LMJob); what every run needs lives here, once: the step
counter, evaluation every `eval_every` steps and at the end, a progress line, stopping
early (a target reached, Ctrl-C, or the caller's should_stop), checkpoints every
`save_every` steps and when the loop ends (checkpoint.npz, the last step-N.npz and the best
so far: checkpoints.CheckpointRotation), going on from an interrupted run's history, and
the kernels made ready before the first step (kernels.prepare: a first run compiles there,
not inside a step).

A job has seven methods:
    kernel_needs() -> (dtype, fused)   the dtype its model computes in and whether its
                                       attention is fused, for kernels.prepare before the
                                       first step (None: its steps run no kernels of ours)
    step(number) -> (loss, lr)         one training step, numbered from 1
    evaluate(number) -> dict           metrics now (numbers), e.g. validation loss
    progress(number, history, since)   the progress line (since: this process's first step
                                       and the run's seconds before it, for a rate)
    done(metrics) -> bool              whether to stop early, given the latest evaluation
    score(metrics) -> float            how good an evaluation is, higher better (for best.npz)
    checkpoint(history) -> dict        everything a checkpoint holds to go on from here
                                       (transformer/training/checkpoints.py's format)
"""

import signal
import threading
import time

from autograd import kernels
from transformer.training.checkpoints import CheckpointRotation

INTERRUPTED_EXIT_CODE = 130          # what a shell reports for a process stopped by Ctrl-C


class StopOnInterrupt:
    """Context manager: inside it, the first Ctrl-C (SIGINT) only sets `.requested`."""

    def __init__(self):
        self.requested = False
        self._previous = None

    def _handle(self, signum, frame):
        if self.requested:                                   # the second Ctrl-C: stop now
            signal.signal(signal.SIGINT, self._previous)
            raise KeyboardInterrupt
        self.requested = True
        print("\ninterrupted: finishing this step, then writing the checkpoint (Ctrl-C again to stop at once)",
              flush=True)

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():     # signals reach the main thread only
            self._previous = signal.signal(signal.SIGINT, self._handle)
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


def new_history():
    """What a run records: every step's loss and learning rate, every evaluation (its step,
    seconds since the run began, learning rate and metrics), the seconds trained, and
    whether it was interrupted before its last step."""
    return {"step": [], "loss": [], "lr": [], "evals": [], "seconds": 0.0, "interrupted": False}


def train_loop(job, max_steps, eval_every, log_every=None, out_dir=None, save_every=0, keep_last=1, history=None,
               log=print, should_stop=None, on_step=None):
    """Run job.step for the steps after those in `history` (an interrupted run's, to go on
    from; default: a new run) up to max_steps.  Evaluates every eval_every steps and at the
    last; logs job.progress every log_every steps, at each evaluation and at the
    last; stops early when job.done says so after an evaluation, at Ctrl-C (after the step
    in progress) or when should_stop(step) returns True.  With out_dir, writes a checkpoint
    there every save_every steps (0: never) and once when the loop ends, keeping the last
    keep_last step-N.npz files.  on_step(number, max_steps, history, since), if given, is
    called after each step, before its log line (a live view: demos/_live.py).  Returns the
    history."""
    history = history or new_history()
    prepare_kernels(job)
    rotation = checkpoint_rotation(out_dir, keep_last, history, log)
    log_every = log_every or eval_every
    first = len(history["step"]) + 1
    since = (first, history["seconds"])
    started = time.perf_counter() - history["seconds"]
    with StopOnInterrupt() as interrupt:
        for number in range(first, max_steps + 1):
            last = number == max_steps
            reached = step_and_evaluate(job, number, history, started, evaluate=number % eval_every == 0 or last)
            if on_step:
                on_step(number, max_steps, history, since)
            if number % log_every == 0 or number % eval_every == 0 or last:     # every evaluation shown
                log(job.progress(number, history, since))
            history["interrupted"] = (interrupt.requested or bool(should_stop and should_stop(number))) and not last
            if history["interrupted"] or reached:
                break
            if rotation and save_every and number % save_every == 0 and not last:
                save_checkpoint(job, rotation, history)
    if rotation:
        save_checkpoint(job, rotation, history)
    return history


def prepare_kernels(job):
    """The kernels made ready for the job's model before the clock starts (compiled the first
    time, saying so), so that no step pays for compiling: the one place a training run calls
    kernels.prepare.  A job whose steps run no kernels of ours (kernel_needs() None) skips it."""
    needs = job.kernel_needs()
    if needs is not None:
        dtype, fused_attention = needs
        kernels.prepare(dtype, fused_attention=fused_attention)


def checkpoint_rotation(out_dir, keep_last, history, log):
    """Where the run's checkpoints go (None without out_dir).  A new run first removes an
    earlier run's checkpoints there, saying so in one line, so that the folder holds one run."""
    if not out_dir:
        return None
    rotation = CheckpointRotation(out_dir, keep_last)
    if not history["step"]:
        stale = rotation.clear_earlier_run()
        if stale:
            log(f"{out_dir} held an earlier run's {', '.join(stale)}: removed (this run writes its own)")
    return rotation


def step_and_evaluate(job, number, history, started, evaluate):
    """Training step `number`, recorded in history, then, if `evaluate`, an evaluation
    (stamped with the seconds since `started`).  Returns whether the job is done: its target
    reached at this evaluation."""
    loss, lr = job.step(number)
    history["step"].append(number)
    history["loss"].append(loss)
    history["lr"].append(lr)
    reached = False
    if evaluate:
        metrics = job.evaluate(number)
        history["evals"].append({"step": number, "seconds": time.perf_counter() - started, "lr": lr, **metrics})
        reached = job.done(metrics)
    history["seconds"] = time.perf_counter() - started
    return reached


def save_checkpoint(job, rotation, history):
    """The job's checkpoint, numbered by the steps done and scored by its latest evaluation."""
    score = job.score(history["evals"][-1]) if history["evals"] else None
    rotation.save(job.checkpoint(history), len(history["step"]), score)
