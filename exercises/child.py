"""The child side of a check: where a student's regions run, apart from the judge.

The grader (exercises/sandbox.py) starts `python -S -m exercises.child CONFIG` afresh (never
forked from the grader), in namespaces of its own where Linux allows (exercises/jail.py).
This process, the *zygote*, imports numpy and the project from its tree, a copy of the
project with every exercise cut (it holds no solution at all), then waits for tasks on its
control socket. A task is one exercise of one student: the texts of the files that hold the
student's regions of it (and the solutions of the exercises its check needs), and a socket
of its own. For each task the zygote forks a task child, which

1. closes the zygote's socket, starts a session of its own, takes its limits (memory, CPU
   time, file size, processes, open files);
2. puts the texts in: each changed function is given its new code (exercises/hotpatch.py),
   or, where that cannot be done, the project is imported afresh from the texts;
3. answers the judge's calls, `{"call": probe, "args": [...]}`, each by running a probe
   (exercises/probes.py: the student's code called on the judge's inputs) and sending back
   `{"value": data}` or `{"raised": {"type", "message", "where", "name"}}`, until `{"end": 1}`.

When the task child has ended, the zygote kills every process left in its namespace (a
fork, a daemon), empties /tmp and reports `{"ended": status}`, with `"retire": true` if the
task changed what a later one would inherit (exercises/lasting.py). Everything the child
sends is data in the format of exercises/wire.py; nothing of the judge is in this process.
"""

import json
import os
import signal
import socket
import sys

PRELOADED = ("autograd", "nn", "nn.functional", "transformer", "transformer.attention", "transformer.decoding",
             "transformer.families.decoder_only", "transformer.masks", "transformer.positional", "transformer.scores",
             "autograd.kernels.loops", "autograd.kernels.reference", "autograd.engine", "autograd.scalar",
             "autograd.ops", "exercises.probes")


def _limit(kind, value):
    import resource
    hard = resource.getrlimit(kind)[1]
    value = value if hard == resource.RLIM_INFINITY else min(value, hard)
    resource.setrlimit(kind, (value, value))


def _take_limits(limits):
    """The task child's limits: address space, CPU seconds, bytes a file may reach, processes
    (its own user's, whole: it cannot fork much), open files, no core dumps."""
    import resource
    _limit(resource.RLIMIT_AS, int(limits["memory_mb"] * 2 ** 20))
    _limit(resource.RLIMIT_CPU, int(limits["cpu_seconds"]))
    _limit(resource.RLIMIT_FSIZE, limits["file_mb"] * 2 ** 20)
    _limit(resource.RLIMIT_NOFILE, 64)
    _limit(resource.RLIMIT_CORE, 0)
    _limit(resource.RLIMIT_NPROC, limits["processes"])


def _module_name(path):
    return path[:-len(".py")].replace("/", ".").removesuffix(".__init__")


def _put_texts_in(root, overrides):
    """Give the imported project the texts {file: text}: function code swapped where it can be,
    else the project imported afresh from the texts (an error there is the task's answer)."""
    from exercises.hotpatch import patch
    from exercises.overrides import OverrideFinder
    with_code = all(patch(_module_name(path), os.path.join(root, path), _read(root, path), text)
                    for path, text in overrides.items())
    if with_code:
        return None
    for module in [m for m in sys.modules if m.split(".")[0] in ("autograd", "nn", "transformer")]:
        del sys.modules[module]
    sys.meta_path.insert(0, OverrideFinder({os.path.join(root, f): t for f, t in overrides.items()}))
    import importlib
    for path in overrides:
        try:
            importlib.import_module(_module_name(path))
        except BaseException as err:                     # noqa: BLE001  the student's module may raise anything
            return f"importing {path} raised {type(err).__name__}: {err}"
    return None


def _read(root, path):
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return f.read()


def _serve(channel, root, task):
    from exercises import probes, wire
    failed = _put_texts_in(root, task["overrides"])
    if failed:
        wire.send(channel, {"import_failed": failed})
        return
    wire.send(channel, {"ready": 1})
    while True:
        request = wire.receive(channel)
        if "end" in request:
            return
        try:
            data = wire.encode({"value": probes.run(request["call"], request["args"])})
        except BaseException as err:                     # noqa: BLE001  reported to the judge, as data
            data = wire.encode({"raised": probes.describe(err, root)})
        wire.write_all(channel, data)


def _task(control, root, channel):
    """In the forked task child: nothing of the zygote's but its imports; read the task from
    its own channel (so that the zygote, whose memory later children inherit, never holds a
    task's texts), run, then exit."""
    control.close()
    _own_standard_streams()
    from exercises.seccomp import forbid_pidfds
    forbid_pidfds()
    os.setsid()
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    from exercises import wire
    out_of_memory = wire.encode({"raised": {"type": "MemoryError", "message": "", "memory": True}})
    code = 0
    try:
        task = wire.receive(channel)
        _take_limits(task["limits"])
        _serve(channel, root, task)
    except MemoryError:
        wire.write_all(channel, out_of_memory)
        code = 1
    except BaseException as err:                         # noqa: BLE001  told to the judge, if it can be
        from exercises.probes import describe
        try:
            wire.send(channel, {"raised": describe(err, root)})
        except BaseException:                            # noqa: BLE001  then the judge sees the channel close
            pass
        code = 1
    os._exit(code)


def _own_standard_streams():
    """Give the task child a /dev/null of its own on 0, 1 and 2. The zygote's are one open
    file that every task would share, whose flags (O_APPEND, the signal of F_SETSIG) one task
    could set for a later one to read (hostile trial 15 carried 8 bits a task that way)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _ended_or_orphaned(child, pid_one, control):
    """Wait for the task child to end; if the grader goes first (the control socket closes, or
    fails: it was killed, say, while a task stalled), kill the task child's processes and end
    the zygote too, so that nothing of the run outlives it."""
    import select
    try:
        ending = os.pidfd_open(child)
    except (AttributeError, OSError):                     # no pidfd (Linux before 5.3): wait only
        return
    try:
        if ending not in select.select([ending, control], [], [])[0]:
            try:
                gone = not control.recv(1, socket.MSG_PEEK)
            except OSError:
                gone = True
            if gone:
                _kill_task(child, pid_one, reaped=False)
                os._exit(0)
    finally:
        os.close(ending)


def _kill_task(child, pid_one, reaped):
    """Kill every process the task child started: as PID 1 of our namespace, all but us; else
    its session's process group; and, not yet reaped, the child itself (if it had not made its
    group yet; once reaped its PID may be another process's)."""
    kills = [(lambda: os.kill(-1, signal.SIGKILL)) if pid_one else (lambda: os.killpg(child, signal.SIGKILL))]
    for kill in kills + ([] if reaped else [lambda: os.kill(child, signal.SIGKILL)]):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass


def _clean_up(child, pid_one, control):
    """Reap the task child (ending the zygote if the grader is gone: _ended_or_orphaned); kill
    whatever it left (in our PID namespace: everything but us); empty /tmp. The exit status
    of the task child."""
    _ended_or_orphaned(child, pid_one, control)
    _, status = os.waitpid(child, 0)
    _kill_task(child, pid_one, reaped=True)
    while pid_one:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    if pid_one:
        _empty_tmp()
    return status


def _empty_tmp():
    """Remove everything in /tmp, first giving back the write permission a task may have
    taken from it and its folders (a folder made read-only would otherwise survive; in a
    user namespace the task owns /tmp itself). What still survives retires the zygote."""
    import shutil
    try:
        os.chmod("/tmp", 0o1777)
    except PermissionError:                               # as root, /tmp is root's: not the task's to change
        pass
    for place, folders, files in os.walk("/tmp"):
        for name in folders:
            path = os.path.join(place, name)
            if not os.path.islink(path):
                os.chmod(path, 0o700)
    for name in os.listdir("/tmp"):
        path = os.path.join("/tmp", name)
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) and not os.path.islink(path) else os.unlink(path)


def _tmp_mark():
    """Make and remove a file in /tmp: /tmp's times become ours, not a time a task chose to
    leave there; returns the file's inode number, which tmpfs counts up file by file (so a
    task that made many files moves it: see _zygote)."""
    mark = "/tmp/.emptied"
    with open(mark, "w") as f:
        number = os.fstat(f.fileno()).st_ino
    os.unlink(mark)
    return number


def _warm_up_numba():
    """Compile one small loop kernel of its own (doubling a matrix: no exercise's) once, so that
    a task child that compiles a student's kernel finds Numba and LLVM already set up."""
    import numba
    import numpy as np

    def doubled(matrix, out):
        for row in range(out.shape[0]):
            for col in range(out.shape[1]):
                out[row, col] = 2.0 * matrix[row, col]
    numba.config.DISABLE_JIT = False
    numba.njit(doubled)(np.ones((1, 1)), np.zeros((1, 1)))
    numba.config.DISABLE_JIT = True


def _state(settings, pid_one):
    """What a later task would inherit (exercises/lasting.py), and /tmp's mode, what is left in
    it and its extended attributes (set through io_uring, past the filter, in a hostile trial)."""
    from exercises.lasting import state
    found = state(settings)
    if pid_one:
        try:
            marks = sorted(os.listxattr("/tmp"))
        except OSError as err:
            marks = type(err).__name__
        found["tmp"] = os.stat("/tmp").st_mode, sorted(os.listdir("/tmp")), marks
    return found


def _prepared(config, control):
    """Import what every task needs and warm Numba, then keep the tasks to reading what is warm
    (exercises/readable.py); False, said to the grader, if that failed."""
    from exercises import wire
    try:
        for module in PRELOADED:
            __import__(module)
        _warm_up_numba()
        if config["isolation"] != "process":
            from exercises.readable import keep_to
            keep_to(sys.path)
    except Exception as err:                              # no student code has run: say why to the grader
        wire.send(control.fileno(), {"failed": f"{type(err).__name__}: {err}"[:300]})
        return False
    return True


def _zygote(config, root):
    from exercises import wire
    from exercises.lasting import FILES_PER_TASK, PIDS_PER_TASK, last_pid, writable_settings
    control = socket.socket(fileno=config["control_fd"])
    if not _prepared(config, control):
        return
    pid_one = os.getpid() == 1
    settings = writable_settings()
    before = _state(settings, pid_one)
    inode = _counters_moved_on(_tmp_mark()) if pid_one else 0
    wire.send(control.fileno(), {"zygote": config["isolation"]})
    while True:
        try:
            marker, fds, _, _ = socket.recv_fds(control, 4, 1)
        except OSError:
            return
        if marker != wire.TASK or len(fds) != 1:
            return
        pids = last_pid() if pid_one else 0
        child = os.fork()
        if child == 0:
            _task(control, root, fds[0])
        os.close(fds[0])
        status = _clean_up(child, pid_one, control)
        used = last_pid() - pids if pid_one else 0
        mark = _tmp_mark() if pid_one else 0
        files = mark - inode - 1 if pid_one else 0                         # the files the task made in /tmp
        if _state(settings, pid_one) != before or not 0 <= used <= PIDS_PER_TASK or not 0 <= files <= FILES_PER_TASK:
            wire.send(control.fileno(), {"ended": status, "retire": True})
            return
        if pid_one:
            inode = _counters_moved_on(mark)
        wire.send(control.fileno(), {"ended": status})


def _counters_moved_on(mark):
    """Start and end threads until the PID namespace's last PID, and make and remove files in
    /tmp until its last inode number (mark, the clean-up's), are multiples of COUNTER_STEP: the
    next task's PID and inode numbers then tell it how many tasks came before, not what they
    did (exercises/lasting.py). Returns the last inode number."""
    import threading
    from exercises.lasting import COUNTER_STEP, last_pid
    while last_pid() % COUNTER_STEP:
        thread = threading.Thread(target=int, name="counter")      # named: threading's own count stays put
        thread.start()
        thread.join()
    while mark % COUNTER_STEP:
        mark = _tmp_mark()
    return mark


def main():
    config = json.loads(sys.argv[-1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)          # as PID 1, a child could otherwise interrupt us
    root, shown = config["tree"], str                     # where the child sees a path of the grader's
    if config["isolation"] != "process":
        from exercises import jail
        shown = jail.shown
        jail.enter(config["new_root"], config["binds"], config["libraries"], config["mirrored"], config["left_out"],
                   root, config["scratch_mb"], config["user"])
        root = jail.TREE
        import exercises                                  # imported from the tree's path outside the new root
        exercises.__path__[:] = [os.path.join(root, "exercises")]
        sys.path_importer_cache.clear()
    else:
        os.chdir(config["scratch"])
        if config["user"] is not None:                    # root, in no namespace (a container refused them): not root
            from exercises import jail
            jail.become(config["user"])
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    os.environ.clear()
    os.environ.update(config["environment"])
    from exercises.seccomp import forbid_lasting_channels
    forbid_lasting_channels()                             # no message queue, no key: nothing outlives a task
    sys.path[:] = [root, *map(shown, [*config["packages_path"], *config["stdlib"]])]
    sys.dont_write_bytecode = True
    _zygote(config, root)


if __name__ == "__main__":
    main()
