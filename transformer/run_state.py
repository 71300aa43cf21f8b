"""What a training run needs to stop and go on exactly where it was.

- `StopOnInterrupt`: Ctrl-C asks the loop to stop after the step in progress (a second
  Ctrl-C stops at once), so the loop can write its checkpoint, metrics and plots.
- `generator_state` / `restore_generator`: a numpy Generator's exact state as text, so a
  checkpoint (.npz, no pickles) can carry every random stream of the run.
- `CheckpointRotation`: periodic checkpoints, keeping the last K and the best.

A resumed run is the same run: model, optimizer, schedule step, data position, every
random generator and the loss log come back from the checkpoint, and the losses that
follow are the ones the uninterrupted run would have printed, bit for bit.
"""

import json
import os
import signal
import threading

import numpy as np

import nn

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
