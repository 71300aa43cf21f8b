"""Shutting a check's child off from the teacher, the grader and the other students (Linux).

The grader starts each child process in new namespaces (`unshare`: its own PID, mount,
network, IPC and UTS namespaces, and, when the grader is not root, its own user namespace,
where it is root without any power outside). Before any student code runs, `enter` builds
the child a root of its own and moves into it:

    /              a tmpfs of its own, made read-only at the end, holding:
    Python's lib   copies of the standard library and of numpy, numba and llvmlite (files over
                   LARGE_FILE bound one by one, read-only), at their own paths (those under
                   /tmp, a venv there say, under /outside: see `shown`); no other package
    /lib...        the system's shared library files those load, bound one by one
    /grading/tree  a copy of the source the child imports: no solution of the exercise it checks
    (no folder of the machine is bound whole: the kernel remembers, for a shared file system,
    each name looked up and not found, and a child timing its own lookups could read what
    another looked up; a tmpfs remembers none)
    /tmp           a private tmpfs of a few MB and TMP_FILES files, the only place it can write
    /proc          its own PID namespace's: the grader and the other children are not there,
                   nor its zygote (hidepid=2: a process it may not trace, as the zygote is
                   undumpable; hostile trial 13 wrote 504 bits into the inode numbers of the
                   zygote's entries there, for every later task of the slot to read);
                   the machine's counters in it (MACHINE_WIDE: free memory, CPU times, load, open
                   files...) shown empty, as another slot's child moves them (hostile trial 10
                   carried a solution between slots in /proc/meminfo's shared memory)
    /dev           null, zero, random and urandom, read-only (the devices still work)

then gives up every capability (as root: becomes an unprivileged user of its own, see
`unused_user`; in a user namespace: drops them all), forbids gaining new ones, and makes
itself undumpable (no ptrace, no /proc/PID/mem). The teacher's project, the grader's files and the other
students' submissions are not in its root at all; the network has only a loopback that is
down; the processes it starts die with it.
"""

import ctypes
import os

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = \
    1, 2, 4, 8, 32, 4096, 16384, 1 << 18
KEPT_FLAGS = MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048 | 4096     # ... and the atime flags: locked in a user namespace
PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 4, 24, 38
OWN_USERS = range(1879048192, 2147483647)   # ids no system gives out (systemd's UIDS-GIDS.md: unused), below 2**31
TREE = "/grading/tree"
DEVICES = ("null", "zero", "random", "urandom")
OWN_PLACES = ("/tmp", "/dev", "/proc", "/grading")    # what enter mounts itself
OUTSIDE = "/outside"
TMP_FILES = 4096                   # the files and folders /tmp may hold (3 million by default: GBs of kernel memory)
LARGE_FILE = 256 * 1024            # a mirrored file larger than this is bound, not copied (_mirror)
ROOT_MB = 512                      # the root's tmpfs: the copies hold about 120 MB
MACHINE_WIDE = ("meminfo", "vmstat", "stat", "loadavg", "uptime", "zoneinfo", "buddyinfo", "pagetypeinfo", "slabinfo",
                "vmallocinfo", "diskstats", "interrupts", "softirqs", "schedstat", "swaps", "locks", "key-users", "keys",
                "cpuinfo", "pressure", "sys/fs/file-nr", "sys/fs/inode-nr", "sys/fs/inode-state", "sys/fs/dentry-state",
                "sys/fs/aio-nr", "sys/kernel/random/entropy_avail")   # under /proc: shown empty

_libc = ctypes.CDLL(None, use_errno=True)


def shown(path):
    """Where the child sees a bound path: at its own path, or under /outside where that path
    lies in a place the child has its own of (a venv in /tmp would be hidden by the child's /tmp)."""
    if any(path == place or path.startswith(place + "/") for place in OWN_PLACES):
        return OUTSIDE + path
    return path


def _check(result, what):
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _mount(source, target, kind, flags, data=None):
    _check(_libc.mount(source.encode() if source else None, target.encode(), kind.encode() if kind else None,
                       ctypes.c_ulong(flags), data.encode() if data else None), f"mount {target}")


def _mountpoint(path, is_file):
    if is_file:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        open(path, "a").close()
    else:
        os.makedirs(path, exist_ok=True)


def _bind(source, target, devices=False):
    """Bind source at target, read-only (keeping the flags a user namespace may not drop);
    devices: the device files of /dev, which must stay openable (no nodev)."""
    _mountpoint(target, not os.path.isdir(source))
    _mount(source, target, None, MS_BIND | MS_REC)
    kept = os.statvfs(source).f_flag & KEPT_FLAGS
    _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | (0 if devices else MS_NODEV) | kept)


def _tmpfs(target, megabytes, mode="755", files=None):
    """A tmpfs of `megabytes` at target, holding at most `files` files and folders (None: the
    kernel's default, a number of them that could hold far more kernel memory than its size)."""
    os.makedirs(target, exist_ok=True)
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={megabytes}m,mode={mode}" + (f",nr_inodes={files}" if files else ""))


def _drop_capabilities():
    """In a user namespace: no capability left, in any set, nor any to regain."""
    for capability in range(64):
        _libc.prctl(PR_CAPBSET_DROP, capability, 0, 0, 0)          # fails quietly past the last one

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                    ("inheritable", ctypes.c_uint32)]

    _check(_libc.capset(ctypes.byref(Header(0x20080522, 0)), (Data * 2)()), "capset")


def _devices(target):
    """The few devices a child needs, in a /dev it cannot write (no note left for the next task)."""
    _tmpfs(target, 1)
    for device in DEVICES:
        _bind("/dev/" + device, f"{target}/{device}", devices=True)
    _mount(None, target, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def unused_user():
    """A user id for one zygote and its tasks, as root: one in OWN_USERS that has no passwd
    entry and no process on this machine, drawn at random (two grading runs, or two slots,
    do not share one). Per user the kernel counts processes (RLIMIT_NPROC): had every child
    the same user (nobody), a task holding its eight would stop a classmate's task in the
    other slot from starting a thread."""
    import grp
    import pwd
    import secrets
    while True:
        user = OWN_USERS.start + secrets.randbelow(len(OWN_USERS))
        if _named(pwd.getpwuid, user) or _named(grp.getgrgid, user):
            continue
        if not any(_owner(f"/proc/{pid}") == user for pid in os.listdir("/proc") if pid.isdigit()):
            return user


def _named(lookup, number):
    try:
        lookup(number)
        return True
    except KeyError:
        return False


def _owner(path):
    try:
        return os.stat(path).st_uid
    except OSError:
        return None


def _hide_machine_counters(new_root):
    """An empty, read-only file (or folder) over each of /proc's MACHINE_WIDE entries there is."""
    empty = new_root + "/.empty"
    open(empty, "w").close()
    for name in MACHINE_WIDE:
        target = f"{new_root}/proc/{name}"
        if os.path.isdir(target):
            _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k")
        elif os.path.exists(target):
            _mount(empty, target, None, MS_BIND)
            kept = os.statvfs(empty).f_flag & KEPT_FLAGS
            _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | kept)


def _hide_own_entry(new_root):
    """An empty, read-only folder over this process's own /proc entry (the zygote's, PID 1 of
    its namespace): hidepid hides it from a task of another user, but in a user namespace
    task and zygote are one user, and a task read there the counters of the zygote (its
    children's page faults, its context switches) that an earlier task had moved."""
    _mount("tmpfs", f"{new_root}/proc/{os.getpid()}", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, "size=4k")


def _mirror(source, target, left_out=()):
    """source's folders made again at target, in the root's own tmpfs: each file up to
    LARGE_FILE a copy, each larger one the machine's, bound read-only; links as links;
    left_out (folders) not at all. Looking up a name that is not there then reaches no file
    system the machine shares: the kernel remembers such misses for a shared one, for anyone
    to time (hostile trial 12 carried a solution so), and tmpfs remembers none."""
    import shutil
    for folder, folders, files in os.walk(source):
        there = os.path.join(target, os.path.relpath(folder, source))
        os.makedirs(there, exist_ok=True)
        for name in [*files, *folders]:
            path, copy = os.path.join(folder, name), os.path.join(there, name)
            if os.path.islink(path):
                os.symlink(os.readlink(path), copy)
            elif os.path.isfile(path):
                _bind(path, copy) if os.path.getsize(path) > LARGE_FILE else shutil.copy2(path, copy)
        folders[:] = [name for name in folders if not os.path.islink(os.path.join(folder, name))
                      and os.path.join(folder, name) not in left_out]


def enter(new_root, binds, libraries, mirrored, left_out, tree, scratch_mb, user):
    """Build the child's root in new_root (an empty folder), move into it, give up every power.
    binds: folders to show whole, read-only (the system's, only where no list of `libraries`
    could be made); libraries: files to show read-only at their own paths (the shared
    libraries Python and the packages load); mirrored: folders shown as copies at their own
    paths (or where `shown` says: _mirror), but for `left_out`; tree: the folder shown
    (copied) as TREE; user: the user id to become (as root, with the same group id), or None
    (in a user namespace)."""
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _tmpfs(new_root, ROOT_MB)
    for path in binds:
        if os.path.islink(path):
            os.makedirs(os.path.dirname(new_root + shown(path)), exist_ok=True)
            target = os.readlink(path)
            os.symlink(shown(target) if os.path.isabs(target) else target, new_root + shown(path))
        elif os.path.exists(path):
            _bind(path, new_root + shown(path))
    for path in libraries:
        _bind(path, new_root + shown(path))
    for path in mirrored:
        _mirror(path, new_root + shown(path), left_out)
    _mirror(tree, new_root + TREE)
    _tmpfs(new_root + "/tmp", scratch_mb, "1777", files=TMP_FILES)
    _devices(new_root + "/dev")
    os.makedirs(new_root + "/proc", exist_ok=True)
    _mount("proc", new_root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
    _hide_machine_counters(new_root)
    _hide_own_entry(new_root)
    os.chroot(new_root)
    os.chdir("/tmp")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    if user is not None:
        become(user)
    else:
        _drop_capabilities()
        _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "undumpable")


def become(user):
    """Root becomes the user id `user` (unused_user's), in no group, for good: no set-user-id
    program can give a right back (no_new_privs), and no process of that user may read its
    memory (undumpable)."""
    os.setgroups([])
    os.setresgid(user, user, user)
    os.setresuid(user, user, user)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "undumpable")
