"""Bounding a check's processes together: a Linux control group for each grading slot.

The limits a task child sets on itself (exercises/child.py) hold per process, so a task that
forks eight children could hold eight times `--memory`. A control group bounds a slot's
zygote and everything it forks at once: their memory together (swap included) and the
number of their processes. The grader makes one per slot where the machine lets it: as root,
with the cgroup file system writable, version 2 (`memory.max`, `pids.max`) or version 1
(the memory and pids hierarchies). Elsewhere (a teacher's own user; a container that mounts
/sys/fs/cgroup read-only) `make` returns None and the per-process limits stand alone.
"""

import os
import re
import secrets
import signal
import time

ROOT = "/sys/fs/cgroup"
NAME = re.compile(r"exercises-(\d+)-[0-9a-f]{8}")            # exercises-GRADER'S PID-random


def _write(path, value):
    with open(path, "w") as f:
        f.write(str(value))


def _v2_folders(name):
    if not os.path.exists(os.path.join(ROOT, "cgroup.controllers")):
        return None
    _write(os.path.join(ROOT, "cgroup.subtree_control"), "+memory +pids")
    return {"memory": os.path.join(ROOT, name), "pids": os.path.join(ROOT, name)}


def _v1_folders(name):
    if not all(os.path.isdir(os.path.join(ROOT, kind)) for kind in ("memory", "pids")):
        return None
    return {kind: os.path.join(ROOT, kind, name) for kind in ("memory", "pids")}


def _sweep(parents):
    """Remove the groups a grader that is gone left (killed before it could remove them)."""
    for parent in parents:
        for name in os.listdir(parent):
            found = NAME.fullmatch(name)
            if found and not os.path.exists(f"/proc/{found[1]}"):
                Group({"left": os.path.join(parent, name)}, 0).remove()


class Group:
    """A control group (one folder in version 2, one per controller in version 1) whose
    processes share one memory bound and one process count."""

    def __init__(self, folders, version):
        self.folders, self.version = folders, version

    @classmethod
    def make(cls, memory_bytes, processes):
        """A new group bounding memory (bytes, swap included) and processes, or None where
        this machine does not let the grader make one."""
        if os.geteuid() != 0:
            return None
        name = f"exercises-{os.getpid()}-{secrets.token_hex(4)}"
        for version, folders_of in ((2, _v2_folders), (1, _v1_folders)):
            group = None
            try:
                folders = folders_of(name)
                if folders is None:
                    continue
                group = cls(folders, version)
                _sweep({os.path.dirname(folder) for folder in folders.values()})
                for folder in set(folders.values()):
                    os.mkdir(folder)
                group._bound(memory_bytes, processes)
                return group
            except OSError:
                if group is not None:
                    group.remove()
        return None

    def _bound(self, memory_bytes, processes):
        memory, pids = self.folders["memory"], self.folders["pids"]
        if self.version == 2:
            _write(os.path.join(memory, "memory.max"), memory_bytes)
            _write(os.path.join(memory, "memory.swap.max"), 0)
        else:
            _write(os.path.join(memory, "memory.limit_in_bytes"), memory_bytes)
            if os.path.exists(os.path.join(memory, "memory.memsw.limit_in_bytes")):
                _write(os.path.join(memory, "memory.memsw.limit_in_bytes"), memory_bytes)
        _write(os.path.join(pids, "pids.max"), processes)

    def joined(self, command):
        """The command run so that its process, and all it starts, are in the group from the
        first instruction (a shell that moves itself in, then execs the command)."""
        procs = " ".join(f"'{os.path.join(folder, 'cgroup.procs')}'" for folder in sorted(set(self.folders.values())))
        return ["/bin/sh", "-c", f'for f in {procs}; do echo $$ > "$f" || exit 111; done; exec "$@"', "sh", *command]

    def memory_kills(self):
        """How many of the group's processes the kernel has killed for its memory bound."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            with open(os.path.join(self.folders["memory"], name)) as f:
                return next((int(line.split()[1]) for line in f if line.startswith("oom_kill ")), 0)
        except (OSError, ValueError):
            return 0

    def remove(self):
        """Kill what is left in the group and remove it."""
        for _ in range(50):
            left = set()
            for folder in set(self.folders.values()):
                try:
                    with open(os.path.join(folder, "cgroup.procs")) as f:
                        left |= {int(pid) for pid in f.read().split()}
                except OSError:
                    pass
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                for folder in set(self.folders.values()):
                    if os.path.isdir(folder):
                        os.rmdir(folder)
                return
            except OSError:
                time.sleep(0.02)
