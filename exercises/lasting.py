"""What a task child could change that outlives it: the zygote's state, compared after every task.

A task child is forked from the zygote and dies, but some of what it may write belongs to
the zygote, or to the namespaces the zygote and every later task of its slot share: the
zygote's resource limits, niceness, CPUs, scheduling, I/O priority and OOM score (prlimit,
setpriority... on its PID), its autogroup's nice and coredump filter (/proc/1/autogroup, ...),
and the settings of its namespaces under /proc/sys (in a user namespace the child is their
owner: the IPC limits shmmax, msgmnb, sem..., the message queues' limits, the PID
namespace's pid_max). A task could leave there a few bytes of a solution its child held, for
a later student's task to read, or a setting that starves it (pid_max 301: no thread can
start). So the zygote records, before its first task, `state()`: the values above, its
hostname and domain name, and every file under /proc/sys and of its own /proc entry that
its credentials (a task child's: the same user, no capability) may write and read, found as
an attacker would (os.access); after each task it compares, and any difference retires it
(a fresh zygote takes the slot). Files whose value changes by itself (the PID namespace's
last PID, the scheduler's statistics) are left out: `writable_settings` reads each twice
around a fork and keeps those that stay.

One of those moves with every process: the PID namespace's last PID. A task that started
and ended k processes or threads would tell the next task of its zygote k, in that task's
own PID; and /tmp's inode numbers, which tmpfs counts up file by file, the files it made
(hostile trial 11 read 16 bits in them). So after each task the zygote moves both counters
on to the next multiple of COUNTER_STEP (exercises/child.py: threads started and ended, files
made and removed), and the next task's PID and first inode number say only how many tasks
came before it. A task that used more than PIDS_PER_TASK PIDs or made more than
FILES_PER_TASK files would reach past that multiple: it retires the zygote.

Why not give each task fresh namespaces instead: the zygote holds no capability (it gave
them all up before its first task, exercises/jail.py) and lives in a chroot, where the
kernel refuses a new user namespace, so it cannot make any; keeping the power to would be
more for a task to reach. And a fresh IPC namespace would not cover the PID namespace's
pid_max, the zygote's autogroup or /tmp. Retiring covers all of them, at a zygote's start
(a few seconds) only when a task changed something, never for an honest one.
"""

import os

PLACES = ("/proc/sys", "/proc/self", "/proc/self/attr")    # /proc/sys walked whole; the process's entry, two levels
PIDS_PER_TASK = 32
FILES_PER_TASK = 32                # the same for /tmp's inode numbers, which tmpfs counts up file by file
COUNTER_STEP = 64                  # > either limit plus the clean-up's own: the counters' next multiple is unreached


def last_pid():
    """The last PID given out in this PID namespace (the zygote's, when it is PID 1)."""
    with open("/proc/sys/kernel/ns_last_pid") as f:
        return int(f.read())


def _value(path):
    """The file's text, or the name of the error reading it gives (itself a value to compare)."""
    try:
        with open(path, "rb") as f:
            return f.read(4096)
    except OSError as err:
        return type(err).__name__


def _files():
    found = []
    for place, folders, files in os.walk(PLACES[0]):
        found += [os.path.join(place, name) for name in files]
    for place in PLACES[1:]:
        try:
            found += [os.path.join(place, name) for name in os.listdir(place) if os.path.isfile(os.path.join(place, name))]
        except OSError:
            pass
    return found


def writable_settings():
    """The files under PLACES this process may write and read and whose value stays put."""
    found = [path for path in _files() if os.access(path, os.W_OK) and os.access(path, os.R_OK)]
    before = [_value(path) for path in found]
    child = os.fork()
    if child == 0:
        os._exit(0)
    os.waitpid(child, 0)
    return [path for path, value in zip(found, before) if _value(path) == value]


def state(settings):
    """What a task child could change of this process, or of the namespaces it shares with
    later tasks, that they would inherit: every resource limit, the niceness, CPUs, scheduling
    policy, I/O priority, OOM score, host and domain name, and the files `settings`."""
    import ctypes
    import resource

    from exercises.seccomp import call_number
    found = {name: resource.getrlimit(getattr(resource, name)) for name in dir(resource) if name.startswith("RLIMIT_")}
    found["nice"] = os.getpriority(os.PRIO_PROCESS, 0)
    found["cpus"] = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    found["policy"] = os.sched_getscheduler(0) if hasattr(os, "sched_getscheduler") else None
    ioprio_get = call_number("ioprio_get")                # ioprio_get(IOPRIO_WHO_PROCESS, this process)
    found["io_priority"] = None if ioprio_get is None else ctypes.CDLL(None).syscall(ioprio_get, 1, 0)
    found["oom_score_adj"] = _value("/proc/self/oom_score_adj")
    found["names"] = os.uname().nodename, _value("/proc/sys/kernel/domainname")
    found["settings"] = {path: _value(path) for path in settings}
    return found
