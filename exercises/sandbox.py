"""Running checks: the judge here, the student's code in a child isolated from it.

A check is judge code (exercises/checks/) that calls the code under check through a
`Task`: each call is a message to a child process and each answer is data (exercises/wire.py),
so nothing the student wrote runs in this process, and nothing that judges runs in the child.

The children are started afresh, never forked from here (exercises/child.py): one long-lived
*zygote* per job slot, which imports the project from a tree holding no solution and forks a
task child per exercise. Where Linux allows, the zygote runs in namespaces of its own
(exercises/jail.py: its own PID, mount, network, IPC and UTS namespaces, a root that shows
only the libraries, the tree read-only and a small private /tmp, no capability; as nobody
when the grader is root), and between tasks it kills every process left in its namespace.
Elsewhere isolation is by process only, and `ISOLATION_NOTE` says so in one line.

A task child that outlives the time limit, writes anything but a message, or more than the
size limit, is ended with its whole zygote (a new one takes its place); one that dies is a
crash named by its signal or exit status.
"""

import hashlib
import importlib.util
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time

from exercises import wire

MEMORY_MB = 2048       # a check's child, numpy and the project imported, peaks near 300 MB of address space
CHECK_ENVIRONMENT = {"AUTOGRAD_KERNELS": "numpy", "NUMBA_DISABLE_JIT": "1", "MPLBACKEND": "Agg", "NUMBA_NUM_THREADS": "1",
                     "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
ENVIRONMENT = {**CHECK_ENVIRONMENT, "NUMBA_CACHE_DIR": "/tmp", "HOME": "/tmp", "PATH": "/usr/bin:/bin"}
PACKAGES = ("numpy", "numba", "llvmlite")        # all a child may import besides the tree and the standard library
RUNTIME = ("__init__.py", "child.py", "jail.py", "wire.py", "probes.py", "hotpatch.py", "overrides.py")
ISOLATION_NOTE = {"process": "isolation by process only: this system does not let the grader put checks in namespaces "
                             "of their own (Linux with unprivileged user namespaces, or root, does)"}
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
    as a plain exception of that builtin type (or Raised) holding only its text."""
    import builtins
    kind, message = str(raised.get("type", "Exception"))[:80], str(raised.get("message", ""))[:4000]
    if raised.get("memory"):
        return Crashed("not yet", f"used more than {memory_mb:g} MB of memory (the limit is --memory)")
    cls = getattr(builtins, kind, None)
    try:
        err = cls(message) if isinstance(cls, type) and issubclass(cls, Exception) else Raised(kind, message)
    except TypeError:                                    # a builtin exception that takes other arguments
        err = Raised(kind, message)
    err.where = str(raised.get("where") or "")[:300]
    if isinstance(err, NameError):
        err.name = raised.get("name") if isinstance(raised.get("name"), str) else None
    return err


def isolation():
    """How this machine can isolate a check's child: "root" (namespaces, then nobody), "userns"
    (namespaces in a user namespace), or "process" (also when EXERCISES_ISOLATION=process)."""
    if not sys.platform.startswith("linux") or not shutil.which("unshare") or \
            os.environ.get("EXERCISES_ISOLATION") == "process":
        return "process"
    command = ["unshare", "--pid", "--fork", "--mount", "--net", "true"]
    if os.geteuid() != 0:
        command[1:1] = ["--user", "--map-root-user"]
    ok = subprocess.run(command, capture_output=True, timeout=30).returncode == 0
    return ("root" if os.geteuid() == 0 else "userns") if ok else "process"


def _within(path, folders):
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def _layout(hide):
    """The folders a zygote is shown: binds, those shown empty, the packages shown inside them."""
    binds = [p for p in dict.fromkeys(("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/etc/ld.so.cache",
                                       sys.base_prefix, sys.prefix)) if os.path.lexists(p)]
    packages, places = [], []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        folder = os.path.dirname(spec.origin)
        parent = os.path.dirname(folder)
        places.append(parent)
        packages += [folder] + [os.path.join(parent, n) for n in sorted(os.listdir(parent))
                                if n.startswith(name) and n.endswith(".libs")]
    places = list(dict.fromkeys(places))
    hidden = [p for p in dict.fromkeys(places + [os.path.realpath(h) for h in hide]) if _within(p, binds)]
    stdlib = [p for p in sys.path if p and os.path.exists(p) and not _within(p, places) and _within(p, binds)]
    return {"binds": binds, "hidden": hidden, "packages": packages, "packages_path": places, "stdlib": stdlib}


def write_tree(folder, texts):
    """The child's tree: the project's texts {file: text} (every exercise cut) and the child's
    own modules; read-only. Returns its fingerprint (fingerprint())."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path, text in texts.items():
        os.makedirs(os.path.dirname(os.path.join(folder, path)), exist_ok=True)
        with open(os.path.join(folder, path), "w", encoding="utf-8") as f:
            f.write(text)
    os.makedirs(os.path.join(folder, "exercises"), exist_ok=True)
    for name in RUNTIME:
        with open(os.path.join(here, name), encoding="utf-8") as f:
            text = f.read() if name != "__init__.py" else '"""A check\'s child: the modules it runs."""\n'
        with open(os.path.join(folder, "exercises", name), "w", encoding="utf-8") as f:
            f.write(text)
    for place, folders, files in os.walk(folder):
        for name in files:
            os.chmod(os.path.join(place, name), 0o444)
        os.chmod(place, 0o555)
    return fingerprint(folder)


def fingerprint(folder):
    """A hash of every file's path, mode and bytes under folder."""
    digest = hashlib.sha256()
    for place, folders, files in sorted(os.walk(folder)):
        folders.sort()
        for name in sorted(files):
            path = os.path.join(place, name)
            digest.update(f"{os.path.relpath(path, folder)} {os.lstat(path).st_mode}\n".encode())
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    digest.update(f.read())
    return digest.hexdigest()


class Zygote:
    """One child process, started afresh, that forks a task child per exercise."""

    def __init__(self, tree, scratch, mode, hide=()):
        self.mode = mode
        ours, theirs = socket.socketpair()
        config = {"tree": tree, "isolation": mode, "control_fd": theirs.fileno(), "scratch": scratch,
                  "new_root": os.path.join(scratch, "root"), "scratch_mb": 16, "environment": ENVIRONMENT,
                  **_layout(hide)}
        os.makedirs(config["new_root"], exist_ok=True)
        command = [sys.executable, "-I", "-S", "-B", "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                   "from exercises.child import main; main()", tree, wire.json.dumps(config)]
        if mode != "process":
            command = ["unshare", "--pid", "--fork", "--kill-child", "--mount", "--net", "--ipc", "--uts"] + \
                (["--user", "--map-root-user"] if mode == "userns" else []) + command
        self.errors = tempfile.TemporaryFile()
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
        body = wire.encode({"overrides": overrides, "limits": limits})
        socket.send_fds(self.control, [body[:4]], [child_end.fileno()])
        self.control.sendall(body[4:])
        child_end.close()
        return Task(self, judge_end, deadline, limits["memory_mb"])

    def ended(self, deadline):
        """The status the zygote reports once a task child has ended (its processes killed)."""
        report = wire.receive(self.control.fileno(), deadline)
        if not isinstance(report, dict) or not isinstance(report.get("ended"), int):
            raise wire.WireError("the zygote's report is not a status")
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
            raise Crashed("not yet", str(first["import_failed"])[:4000])
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
            return Crashed("timed out", "timed out after {:g} s (an endless loop? the time limit is --timeout)")
        if isinstance(err, (EOFError, ConnectionError)):
            try:
                status = self.zygote.ended(time.monotonic() + GRACE_SECONDS)
            except (TimeoutError, EOFError, wire.WireError, OSError):
                return Crashed("not yet", "crashed: the check's child died")
            self.broken, self.over = False, True
            return Crashed("not yet", _death(status))
        return Crashed("not yet", f"crashed: the check's child broke the protocol ({err})"[:500])

    def _receive(self):
        try:
            answer = wire.receive(self.channel.fileno(), self.deadline)
        except (TimeoutError, EOFError, ConnectionError, wire.WireError) as err:
            raise self._broken(err) from None
        if not isinstance(answer, dict) or len(answer) != 1:
            raise self._broken(wire.WireError("an answer is one key"))
        return answer

    def call(self, probe, *args):
        """The probe's value, run by the task child on args; the student's exception raised here again."""
        try:
            wire.send(self.channel.fileno(), {"call": probe, "args": list(args)})
        except OSError as err:
            raise self._broken(EOFError(str(err))) from None
        answer = self._receive()
        if "raised" in answer and isinstance(answer["raised"], dict):
            raise rebuilt(answer["raised"], self.memory_mb)
        if "value" not in answer:
            raise self._broken(wire.WireError("neither a value nor an exception"))
        return answer["value"]

    def finish(self):
        """End the task child; True if the zygote can take the next task."""
        if not self.broken and not self.over:
            try:
                wire.send(self.channel.fileno(), {"end": 1})
            except OSError:
                pass
        self.channel.close()
        if self.broken or self.over:
            return not self.broken
        try:
            self.zygote.ended(time.monotonic() + GRACE_SECONDS)
            return True
        except (TimeoutError, EOFError, wire.WireError, OSError):
            return False


def first_zygote(tree, scratch, hide, notes):
    """The first zygote, in the strongest isolation this machine allows; a note where that is
    by process only."""
    mode = isolation()
    if mode != "process":
        try:
            return Zygote(tree, os.path.join(scratch, "0"), mode, hide)
        except RuntimeError:
            mode = "process"
    notes.append(ISOLATION_NOTE["process"])
    return Zygote(tree, os.path.join(scratch, "0"), mode, hide)


def run_jobs(tasks, tree, timeout, jobs, memory_mb=MEMORY_MB, hide=(), notes=None):
    """Run each task (key, overrides {file: text}, judge) with the texts put into a task child of
    a zygote on `tree` (write_tree), judge(task) in this process, `jobs` at a time; yields
    (key, (status, message)) as each ends. A task gets `timeout` seconds in all. notes: a list
    that gets one line if isolation is by process only."""
    tasks = list(tasks)
    if not tasks:
        return
    expected = fingerprint(tree)
    limits = {"memory_mb": memory_mb, "cpu_seconds": int(timeout) + 5, "file_mb": 8, "processes": 8}
    pending, done = queue.Queue(), queue.Queue()
    for task in tasks:
        pending.put(task)
    scratch = tempfile.mkdtemp(prefix="exercises-children-")
    os.chmod(scratch, 0o711)
    first = first_zygote(tree, scratch, hide, notes if notes is not None else [])
    mode = first.mode

    def worker(slot):
        zygote = first if slot == 0 else None
        while True:
            try:
                key, overrides, judge = pending.get_nowait()
            except queue.Empty:
                break
            try:
                zygote = zygote or Zygote(tree, os.path.join(scratch, str(slot)), mode, hide)
                verdict, keep = _judged(zygote, overrides, judge, limits, time.monotonic() + timeout, timeout)
            except BaseException as err:                 # noqa: BLE001  the grader's own failure, passed on
                done.put(("failed", err))
                break
            if not keep:
                zygote.kill()
                zygote = None
            done.put((key, verdict))
            if fingerprint(tree) != expected:
                done.put(("failed", RuntimeError("the child's tree changed during grading: isolation failed, "
                                                 "no grade of this run can be trusted")))
                break
        if zygote:
            zygote.kill()
        done.put(("worker done", None))

    workers = [threading.Thread(target=worker, args=(slot,), daemon=True) for slot in range(max(1, jobs))]
    for thread in workers:
        thread.start()
    try:
        finished = 0
        while finished < len(workers):
            key, verdict = done.get()
            if key == "worker done":
                finished += 1
            elif key == "failed":
                raise verdict
            else:
                yield key, verdict
    finally:
        while not pending.empty():
            pending.get_nowait()
        for thread in workers:
            thread.join()
        shutil.rmtree(scratch, ignore_errors=True)


def _judged(zygote, overrides, judge, limits, deadline, timeout):
    """(verdict, whether the zygote can go on) of one task."""
    try:
        task = zygote.task(overrides, limits, deadline)
    except OSError:
        return ("not yet", "crashed: the check's child could not be reached"), False
    try:
        task.ready()
        verdict = judge(task)
    except Crashed as crash:
        verdict = crash.verdict
    return _timed(verdict, timeout), task.finish()


def _timed(verdict, timeout):
    return (verdict[0], verdict[1].format(timeout)) if verdict[0] == "timed out" else verdict
