"""demos.train and demos.gpt: a live progress line on a terminal (a pty here), rewritten
with `\\r` between their log lines; piped, their output is the log lines alone, the same as
a terminal's once the live line is taken out.  And the main demo's last line names every
file it wrote."""

import os
import re
import subprocess
import sys

import pytest

from demos._live import CLEAR, LiveLine

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIVE = re.compile(r"\r\x1b\[Kstep (\d+)/(\d+)  \d+\.\d steps/s  loss \d+\.\d{4}  \d+s left")
TIMES = re.compile(r" *\d+(?:\.\d+)? ?(?:s|tokens/s)\b")         # seconds and speeds differ run to run
TRAIN = ["demos.train", "--task", "reverse", "--steps", "12", "--eval-every", "5", "--max-len", "4", "--batch-size",
         "8", "--d-model", "16", "--heads", "2", "--d-ff", "16", "--layers", "1", "--beam-examples", "2"]
GPT = ["demos.gpt", "--data", "README.md", "--max-iters", "12", "--eval-every", "6", "--log-every", "4",
       "--eval-iters", "1", "--block-size", "8", "--batch-size", "2", "--layers", "1", "--d-model", "16", "--heads", "2",
       "--sample-tokens", "5"]


def run(command, out, terminal):
    """The demo's stdout, as a pipe or a pseudo-terminal (pty) gives it."""
    argv = [sys.executable, "-m", *command, "--out", str(out)]
    if not terminal:
        result = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=600)
        assert result.returncode == 0, result.stderr
        return result.stdout
    reader, writer = os.openpty()
    process = subprocess.Popen(argv, stdout=writer, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ROOT)
    os.close(writer)
    received = b""
    while chunk := _read(reader):
        received += chunk
    os.close(reader)
    assert process.wait(timeout=600) == 0, process.stderr.read().decode()
    return received.decode().replace("\r\n", "\n")       # a terminal ends lines with \r\n


def _read(reader):
    """The next bytes from a pty (b"" once the other end is closed: Linux says EIO)."""
    try:
        return os.read(reader, 65536)
    except OSError:
        return b""


def without_the_live_line(text):
    return LIVE.sub("", text).replace(CLEAR, "").replace("\x1b[0m", "")     # (matplotlib's reset at exit)


@pytest.mark.parametrize("command", [TRAIN, GPT], ids=["train", "gpt"])
def test_a_terminal_sees_the_live_line_and_a_pipe_the_log_alone(command, tmp_path):
    piped = run(command, tmp_path / "piped", terminal=False)
    terminal = run(command, tmp_path / "terminal", terminal=True)
    assert "\r" not in piped and "\x1b" not in piped and "steps/s" not in piped
    live = [(int(step), int(steps)) for step, steps in LIVE.findall(terminal)]
    assert live[0] == (1, 12) and live[-1] == (12, 12), terminal      # between them, at most ten a second
    assert [step for step, _ in live] == sorted(step for step, _ in live)
    for line in piped.splitlines():                       # every log line starts clean on the terminal
        if line.startswith(("step ", "iter ")):
            assert f"{CLEAR}{line.split()[0]} " in terminal
    strip = lambda text: TIMES.sub("_", text.replace(str(tmp_path / "piped"), "OUT").replace(str(tmp_path / "terminal"), "OUT"))
    assert strip(without_the_live_line(terminal)).strip() == strip(piped).strip()


class Screen:
    """A stream that says whether it is a terminal, and keeps what is written."""

    def __init__(self, tty):
        self.tty, self.text = tty, ""

    def isatty(self):
        return self.tty

    def write(self, text):
        self.text += text

    def flush(self):
        pass


@pytest.mark.parametrize("tty", [True, False])
def test_the_live_line_says_rate_loss_and_time_left(tty):
    screen = Screen(tty)
    history = {"loss": [4.0, 2.0, 3.0], "seconds": 12.0}
    with LiveLine(screen) as live:
        live.step(3, 10, history, since=(2, 10.0))        # steps 2 and 3 in 2 s: 1 step/s, 7 left
        live.log("a log line")
    expected = f"{CLEAR}step 3/10  1.0 steps/s  loss 3.0000  7s left{CLEAR}a log line\n" if tty else "a log line\n"
    assert screen.text == expected


def test_the_main_demos_last_line_names_every_file_it_wrote(tmp_path):
    printed = run(TRAIN, tmp_path, terminal=False).rstrip("\n").split("\n")
    files = sorted(os.listdir(tmp_path))
    assert {"loss.png", "metrics.json", "checkpoint.npz", "best.npz", "step-12.npz"} <= set(files)
    assert sum(name.startswith("attention_") for name in files) == 3
    assert printed[-1] == f"wrote to {tmp_path}: {', '.join(files)}"
