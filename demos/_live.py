"""A live progress line on a terminal: steps/s, loss and time left, rewritten in place.

Between the training loop's log lines, the line at the bottom of a terminal says how the
run goes now, rewritten after each step with a carriage return (`\\r`, back to the start of
the line) and cleared (`ESC [K`, erase to the end of the line) before a log line is printed,
so that the log reads as it would without it.  Piped into a file or another program (stdout
not a TTY) nothing is added: the output is the log lines alone.

    with LiveLine() as live:
        train_loop(job, ..., log=live.log, on_step=live.step)
"""

import sys
import time

CLEAR = "\r\x1b[K"          # back to the start of the line, erase it
EVERY_SECONDS = 0.1         # the live line is rewritten at most this often (the first step's at once)


class LiveLine:
    """The live progress line of a training run on `stream` (stdout), if it is a terminal."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stdout
        self.live = self.stream.isatty()
        self.shown = False                # whether a live line is on the screen now
        self.written = None               # when it was last written (time.monotonic)

    def step(self, number, max_steps, history, since):
        """After step `number` of max_steps: rewrite the line.  since: (this process's first
        step, the run's seconds before it), as the loop gives a job's progress."""
        now = time.monotonic()
        if not self.live or (self.written is not None and now - self.written < EVERY_SECONDS and number < max_steps):
            return
        first, earlier_seconds = since
        rate = (number - first + 1) / max(history["seconds"] - earlier_seconds, 1e-9)       # steps a second
        recent = history["loss"][-10:]
        self.stream.write(f"{CLEAR}step {number}/{max_steps}  {rate:.1f} steps/s  loss {sum(recent) / len(recent):.4f}  "
                          f"{(max_steps - number) / rate:.0f}s left")
        self.stream.flush()
        self.shown, self.written = True, now

    def log(self, line):
        """Print a log line, the live line cleared first (the next step writes it again)."""
        self.clear()
        print(line, file=self.stream, flush=True)

    def clear(self):
        """Remove the live line, if one is shown."""
        if self.shown:
            self.stream.write(CLEAR)
            self.stream.flush()
            self.shown = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.clear()
        return False
