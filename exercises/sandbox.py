"""Running checks: the judge here, the student's code in a child isolated from it.

A check is judge code (exercises/checks/) that calls the code under check through a
`Task`: each call is a message to a child process and each answer is data (exercises/wire.py),
so nothing the student wrote runs in this process, and nothing that judges runs in the child.

The children are started afresh, never forked from here (exercises/child.py): one long-lived
*zygote* per job slot, which imports the project from a tree holding no solution and forks a
task child per exercise. Where Linux allows, the zygote runs in namespaces of its own
(exercises/jail.py: its own PID, mount, network, IPC and UTS namespaces, a root that shows
only the libraries, the tree read-only and a small private /tmp, no capability; as a user of
its own when the grader is root), and between tasks it kills every process left in its namespace.
Elsewhere isolation is by process only, and `ISOLATION_NOTE` says so in one line.

A task child that outlives the time limit, writes anything but a message, or more than the
size limit, is ended with its whole zygote (a new one takes its place); one that dies is a
crash named by its signal or exit status.
"""

import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from exercises.cgroup import Group
from exercises.tree import fingerprint
from exercises.zygote import Crashed, Zygote

MEMORY_MB = 2048       # a check's child, numpy and the project imported, peaks near 300 MB of address space
GROUP_PROCESSES = 32   # a slot's control group: unshare, the zygote, a task child and the processes it may start
ISOLATION_NOTE = {"process": "isolation by process only: this system does not let the grader put checks in namespaces "
                             "of their own (Linux with unprivileged user namespaces, or root, does), so a submission's "
                             "code runs with this user's rights and can read its files",
                  "as root": "and as root: this Python cannot run as another user (it lies in a folder only root may "
                             "read), so a submission's code runs as root; install Python where every user may read it"}


def isolation():
    """How this machine can isolate a check's child: "root" (namespaces, then a user of its own), "userns"
    (namespaces in a user namespace), or "process". EXERCISES_ISOLATION=process asks for the
    last; =userns, as root, for a user namespace all the same (to test it)."""
    asked = os.environ.get("EXERCISES_ISOLATION")
    if not sys.platform.startswith("linux") or not shutil.which("unshare") or asked == "process":
        return "process"
    mode = "userns" if os.geteuid() != 0 or asked == "userns" else "root"
    command = ["unshare", "--pid", "--fork", "--mount", "--net", "true"]
    if mode == "userns":
        command[1:1] = ["--user", "--map-root-user"]
    return mode if subprocess.run(command, capture_output=True, timeout=30).returncode == 0 else "process"


class Unisolated(RuntimeError):
    """Grading would run submissions' code less isolated than it must: the grader refuses."""


def first_zygote(tree, scratch, hide, notes, group, as_root):
    """The first zygote, in the strongest isolation this machine allows; a note where that is
    by process only. as_root: whether a child may run less isolated than the machine allows (by
    process only where its namespaces fail; as root where Python cannot run as another user):
    a student checking their own code may; a class's grade may not, and refuses (Unisolated)."""
    mode, failed = isolation(), ""
    if mode != "process":
        try:
            return Zygote(tree, os.path.join(scratch, "0"), mode, hide, group)
        except RuntimeError as err:
            if not as_root:                  # a broken setup must not grade a class with the teacher's rights
                raise Unisolated(f"not graded: this machine has namespaces, but the check's child did not start in "
                                 f"them ({err}). Mend that, or grade by process only knowingly: "
                                 "EXERCISES_ISOLATION=process") from None
            mode, failed = "process", f" (in namespaces, {err})"
    notes.append(ISOLATION_NOTE["process"] + failed)
    try:                   # as root, its child becomes a user of its own, if Python can run as one here
        return Zygote(tree, os.path.join(scratch, "0"), mode, hide, group)
    except RuntimeError:
        if not as_root:
            raise Unisolated("not graded: every submission's code would run as root, isolated by process only "
                             f"(no namespaces here{failed}, and this Python lies in a folder only root may read, so "
                             "a child cannot become another user). Install Python where every user may read it, "
                             "or grade as a user who is not root") from None
        notes.append(ISOLATION_NOTE["as root"])
        return Zygote(tree, os.path.join(scratch, "0"), mode, hide, group, as_user=False)


class Slots:
    """`jobs` threads, each with a zygote of its own, taking tasks from one queue and putting
    (key, verdict) on another; ("failed", error) stops the run (the grader's own failure, or a
    tree that changed: then no grade of the run can be trusted)."""

    def __init__(self, tasks, tree, timeout, limits, hide, first, groups):
        self.tree, self.timeout, self.limits, self.hide, self.first = tree, timeout, limits, hide, first
        self.groups = groups                             # a control group per slot, or None each
        self.expected, self.scratch = fingerprint(tree), os.path.dirname(first.scratch)
        self.pending, self.done = queue.Queue(), queue.Queue()
        for task in tasks:
            self.pending.put(task)

    def work(self, slot):
        zygote = self.first if slot == 0 else None
        try:
            while not self.pending.empty():
                key, overrides, judge = self.pending.get_nowait()
                zygote = zygote or Zygote(self.tree, os.path.join(self.scratch, str(slot)), self.first.mode, self.hide,
                                          self.groups[slot], self.first.as_user)
                verdict, keep = _judged(zygote, overrides, judge, self.limits, time.monotonic() + self.timeout,
                                        self.timeout)
                if not keep:
                    zygote.kill()
                    zygote = None
                self.done.put((key, verdict))
                if fingerprint(self.tree) != self.expected:
                    raise RuntimeError("the child's tree changed during grading: isolation failed, no grade of this "
                                       "run can be trusted")
        except queue.Empty:
            pass
        except BaseException as err:                     # noqa: BLE001  passed on to the grader's thread
            self.done.put(("failed", err))
        finally:
            if zygote:
                zygote.kill()
            self.done.put(("slot done", None))


def run_jobs(tasks, tree, timeout, jobs, memory_mb=MEMORY_MB, hide=(), notes=None, as_root=False):
    """Run each task (key, overrides {file: text}, judge) with the texts put into a task child of
    a zygote on `tree` (write_tree), judge(task) in this process (task.ready() first, then its
    calls), `jobs` at a time; yields
    (key, (status, message)) as each ends. A task gets `timeout` seconds in all. notes: a list
    that gets one line if isolation is by process only. as_root: see first_zygote."""
    tasks = list(tasks)
    if not tasks:
        return
    scratch = tempfile.mkdtemp(prefix="exercises-children-")
    os.chmod(scratch, 0o711)
    limits = {"memory_mb": memory_mb, "cpu_seconds": int(timeout) + 5, "file_mb": 8, "processes": 8}
    slots, threads = None, []
    groups = [Group.make(memory_mb * 2 ** 20, GROUP_PROCESSES) for _ in range(max(1, jobs))]
    try:
        first = first_zygote(tree, scratch, hide, [] if notes is None else notes, groups[0], as_root)
        slots = Slots(tasks, tree, timeout, limits, hide, first, groups)
        threads = [threading.Thread(target=slots.work, args=(slot,), daemon=True) for slot in range(max(1, jobs))]
        for thread in threads:
            thread.start()
        finished = 0
        while finished < len(threads):
            key, verdict = slots.done.get()
            finished += key == "slot done"
            if key == "failed":
                raise verdict
            if key != "slot done":
                yield key, verdict
    finally:
        while slots and not slots.pending.empty():          # a failure: the other slots stop after their task
            slots.pending.get_nowait()
        for thread in threads:
            thread.join()
        for group in filter(None, groups):
            group.remove()
        shutil.rmtree(scratch, ignore_errors=True)


def _judged(zygote, overrides, judge, limits, deadline, timeout):
    """(verdict, whether the zygote can go on) of one task."""
    try:
        task = zygote.task(overrides, limits, deadline)
    except OSError:
        return ("not yet", "crashed: the check's child could not be reached"), False
    try:
        verdict = judge(task)
    except Crashed as crash:
        verdict = crash.verdict
    except Exception as err:                              # noqa: BLE001  an answer the judge could not read
        verdict = ("not yet", f"the check could not read the child's answer (a {type(err).__name__})")
    return _timed(verdict, timeout), task.finish()


def _timed(verdict, timeout):
    return (verdict[0], verdict[1].format(timeout)) if verdict[0] == "timed out" else verdict
