"""The judge's side of a check's child: the zygote process, started afresh, and the task
child it forks for each exercise (exercises/child.py is the other side).

`Zygote` starts `python -I -S -B -c ... exercises.child` in the tree, in namespaces of its own
where the machine allows (`unshare`), and waits for it to say it is ready. `Zygote.task`
sends it the texts of one task and a socket of the task's own; `Task.call` asks the task child
to run a probe and returns the data it answers, or raises the student's exception again here
(as a plain exception of that builtin type, or `Raised`, holding only its text). A child that
dies, outlives its time, or writes what is not an answer is `Crashed`, whose verdict is the
grade's message; the zygote must then be killed unless it reported the death itself.
"""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

from exercises import wire
from exercises.jail import unused_user
from exercises.child_text import mark, marked, place, plain
from exercises.tree import layout

CHECK_ENVIRONMENT = {"AUTOGRAD_KERNELS": "numpy", "NUMBA_DISABLE_JIT": "1", "MPLBACKEND": "Agg", "NUMBA_NUM_THREADS": "1",
                     "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
ENVIRONMENT = {**CHECK_ENVIRONMENT, "NUMBA_CACHE_DIR": "/tmp", "HOME": "/tmp", "PATH": "/usr/bin:/bin"}
STARTUP_SECONDS = 120
GRACE_SECONDS = 10


class Crashed(Exception):
    """The task child died, sent what is not an answer, or outlived its time: the verdict is the message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.verdict = (status, message)


class Raised(Exception):
    """An exception of the student's code that is not one of Python's own: its type's name and message."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind


def rebuilt(raised, memory_mb):
    """The child's exception, {"type", "message", "where", "name", "memory"}, raised here again
    as a plain exception of that builtin type (or Raised) holding only its text, marked as
    the child's (exercises/child_text.py), and its place if that is a file of the project."""
    import builtins
    kind, message = plain(raised.get("type", "Exception"))[:80], mark(raised.get("message", ""), 4000)
    if raised.get("memory"):
        return Crashed("not yet", f"used more than {memory_mb:g} MB of memory (the limit is --memory)")
    cls = getattr(builtins, kind, None)
    if cls is KeyError:                                  # its str() is its text's repr, not the text
        cls = None
    try:
        err = cls(message) if isinstance(cls, type) and issubclass(cls, Exception) else Raised(mark(kind, 80), message)
    except TypeError:                                    # a builtin exception that takes other arguments
        err = Raised(kind, message)
    err.where = place(raised.get("where") or "")
    if isinstance(err, NameError):
        err.name = plain(raised.get("name")) if isinstance(raised.get("name"), str) else None
    return err


class Zygote:
    """One child process, started afresh, that forks a task child per exercise."""

    def __init__(self, tree, scratch, mode, hide=(), group=None, as_user=True):
        """group: the control group (exercises/cgroup.py) it and its tasks run in, if any.
        as_user: by process only, as root, whether it becomes a user of its own (unused_user)."""
        self.mode, self.scratch, self.group, self.as_user = mode, scratch, group, as_user
        self.memory_mb, self.memory_kills = 0, 0
        ours, theirs = socket.socketpair()
        config = {"tree": tree, "isolation": mode, "control_fd": theirs.fileno(), "scratch": scratch,
                  "new_root": os.path.join(scratch, "root"), "scratch_mb": 16, "environment": ENVIRONMENT,
                  "user": unused_user() if mode == "root" or (
                      mode == "process" and as_user and os.geteuid() == 0 and sys.platform == "linux") else None, **layout(hide)}
        os.makedirs(config["new_root"], exist_ok=True)
        command = [sys.executable, "-I", "-S", "-B", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                   "from exercises.child import main; main()", tree, wire.json.dumps(config)]
        if mode != "process":
            command = ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--net", "--ipc", "--uts"] + \
                (["--user", "--map-root-user"] if mode == "userns" else []) + command
        if group is not None:
            command = group.joined(command)
        self.errors = tempfile.TemporaryFile()
        self.retired = False                            # see ended()
        self.process = subprocess.Popen(command, cwd=tree, pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                        stdout=subprocess.DEVNULL, stderr=self.errors, start_new_session=True,
                                        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"})
        theirs.close()
        self.control = ours
        try:
            hello = wire.receive(ours.fileno(), time.monotonic() + STARTUP_SECONDS)
        except (TimeoutError, EOFError, wire.WireError) as err:
            self.errors.seek(0)
            said = self.errors.read()[-2000:].decode(errors="replace")
            self.kill()
            raise RuntimeError(f"the check's child did not start ({mode}): {type(err).__name__}; {said}") from None
        if hello != {"zygote": mode}:
            self.kill()
            raise RuntimeError(f"the check's child did not start: it said {str(hello)[:200]}")

    def task(self, overrides, limits, deadline):
        """A Task: a task child of this zygote holding the texts {file: text}."""
        judge_end, child_end = socket.socketpair()
        socket.send_fds(self.control, [wire.TASK], [child_end.fileno()])
        child_end.close()
        judge_end.settimeout(max(deadline - time.monotonic(), 0.1))
        judge_end.sendall(wire.encode({"overrides": overrides, "limits": limits}))   # to the task child only
        judge_end.settimeout(None)
        self.memory_mb, self.memory_kills = limits["memory_mb"], self.group.memory_kills() if self.group else 0
        return Task(self, judge_end, deadline, limits["memory_mb"])

    def death(self, status):
        """The verdict's message for a task child that died (status None: the zygote too):
        its memory, if the control group's bound killed one of its processes, else how."""
        if self.group is not None and self.group.memory_kills() > self.memory_kills:
            return (f"used more than {self.memory_mb:g} MB of memory with the processes it started (the limit is "
                    "--memory)")
        return "crashed: the check's child died" if status is None else _death(status)

    def ended(self, deadline):
        """The status the zygote reports once a task child has ended (its processes killed)."""
        report = wire.receive(self.control.fileno(), deadline)
        if not isinstance(report, dict) or not isinstance(report.get("ended"), int):
            raise wire.WireError("the zygote's report is not a status")
        self.retired = report.get("retire") is True     # a task changed the zygote's limits: it takes no more
        return report["ended"]

    def kill(self):
        for target in (lambda: os.killpg(self.process.pid, signal.SIGKILL), self.process.kill):
            try:
                target()
            except (ProcessLookupError, PermissionError):
                pass
        self.process.wait()
        self.control.close()
        self.errors.close()


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _death(status):
    if os.WIFSIGNALED(status):
        return f"crashed: killed by {_signal_name(os.WTERMSIG(status))}"
    return f"crashed: the process exited with status {os.waitstatus_to_exitcode(status)}"


class Task:
    """The judge's side of one task child: `call` a probe, get data back (or the student's
    exception raised again here), `finish` when the check is done."""

    def __init__(self, zygote, channel, deadline, memory_mb):
        self.zygote, self.channel, self.deadline, self.memory_mb = zygote, channel, deadline, memory_mb
        self.broken = self.over = False

    def ready(self):
        """Wait for the task child to have put the texts in; Crashed if that failed."""
        first = self._receive()
        if "import_failed" in first:
            raise Crashed("not yet", mark(first["import_failed"], 4000))
        if "raised" in first and isinstance(first["raised"], dict):
            err = rebuilt(first["raised"], self.memory_mb)
            raise err if isinstance(err, Crashed) else Crashed("not yet", f"crashed: {type(err).__name__}: {err}"[:4000])
        if first != {"ready": 1}:
            raise self._broken(wire.WireError("the child did not say it was ready"))

    def _broken(self, err):
        """The Crashed verdict for a channel that failed (the zygote must go, unless it reports
        the child's death)."""
        self.broken = True
        if isinstance(err, TimeoutError):
            return Crashed("timed out", "timed out after {:g} s, the time a check may take (an endless loop, or far slower than it need be?)")
        if isinstance(err, (EOFError, ConnectionError)):
            try:
                status = self.zygote.ended(time.monotonic() + GRACE_SECONDS)
            except (TimeoutError, EOFError, wire.WireError, OSError):
                return Crashed("not yet", self.zygote.death(None))
            self.broken, self.over = False, True
            return Crashed("not yet", self.zygote.death(status))
        return Crashed("not yet", f"crashed: the check's child broke the protocol (a {type(err).__name__}: what it "
                                  "sent is not an answer the format allows)")

    def _receive(self):
        try:
            answer = wire.receive(self.channel.fileno(), self.deadline)
        except (TimeoutError, EOFError, ConnectionError, wire.WireError) as err:
            raise self._broken(err) from None
        if not isinstance(answer, dict) or len(answer) != 1:
            raise self._broken(wire.WireError("an answer is one key"))
        return answer

    def call(self, probe, *args):
        """The probe's value, run by the task child on args (its strings marked as the child's:
        exercises/child_text.py); the student's exception raised here again."""
        self._send({"call": probe, "args": list(args)})
        answer = self._receive()
        if "raised" in answer and isinstance(answer["raised"], dict):
            raise rebuilt(answer["raised"], self.memory_mb)
        if "value" not in answer:
            raise self._broken(wire.WireError("neither a value nor an exception"))
        return marked(answer["value"])

    def _send(self, message):
        """Send a message to the task child by the deadline: a child that reads none of what
        it is sent fills the socket, and a plain write would then wait for ever (hostile trial
        15 stalled a whole class's grade so); past the deadline it is timed out."""
        self.channel.settimeout(max(self.deadline - time.monotonic(), 0.001))
        try:
            self.channel.sendall(wire.encode(message))
        except TimeoutError as err:
            raise self._broken(err) from None
        except OSError as err:
            raise self._broken(EOFError(str(err))) from None
        finally:
            self.channel.settimeout(None)

    def finish(self):
        """End the task child; True if the zygote can take the next task."""
        if not self.broken and not self.over:
            try:
                self._send({"end": 1})
            except Crashed:
                pass
        self.channel.close()
        if self.broken or self.over:
            return not self.broken and not self.zygote.retired
        try:
            self.zygote.ended(time.monotonic() + GRACE_SECONDS)
            return not self.zygote.retired
        except (TimeoutError, EOFError, wire.WireError, OSError):
            return False
