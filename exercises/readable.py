"""Only the files a check's child needs, each one already in memory (Linux's Landlock).

A child that holds a solution its check needs could read, page by page, a large file no
process reads (one of the thousands under /usr), and a later child time its own first reads
of those pages: fast where the first read them, slow where it did not. The page cache is
the machine's and outlives the run, so a hostile trial carried greedy_decode's solution from
one classmate's child to another's that way, reading about 12 kbit/s. Refusing reads is not
possible; making every page a child can read already warm is: then no read of the sender's
changes what a later child times.

So the zygote, before its first task, reads every file it will let its tasks read that is the
machine's (its tree, the standard library, numpy's, numba's and llvmlite's folders are copies
in its own tmpfs, but for their large files, bound one by one: about 230 MB, once a zygote,
from memory after the first time), then restricts itself and every process it
forks, for good, to those folders for reading, /tmp for writing, /dev, and /proc for reading
only (no setting of the zygote's or its namespaces' may be written there): a Landlock
ruleset (Linux 5.13 and later; an unprivileged process may install one, as it may a seccomp
filter). The rest of /usr is still mounted (the libraries the zygote loaded stay loaded) but
a task can open none of it. Where the kernel has no Landlock, nothing is installed, and
`keep_to` says so.

Landlock's rights (include/uapi/linux/landlock.h), as bits: execute, write a file, read a
file, read a folder, remove a folder or a file, make a device, a folder, a file, a socket,
a FIFO, a block device or a link (ABI 1); refer (2), truncate (3), ioctl on a device (5).
"""

import ctypes
import os

CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446       # the same on every architecture
RULESET_VERSION, RULE_PATH_BENEATH = 1, 1
EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1, 2, 4, 8
ABI_1 = (1 << 13) - 1                                         # the 13 rights of Landlock's first version
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
READ = EXECUTE | READ_FILE | READ_DIR
DEVICES = READ_FILE | WRITE_FILE | READ_DIR | IOCTL_DEV
CHUNK = 1 << 20


class RulesetAttributes(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64)]


class PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def handled(abi):
    """The rights a ruleset of Landlock version `abi` governs: all it knows."""
    return ABI_1 | (REFER if abi >= 2 else 0) | (TRUNCATE if abi >= 3 else 0) | (IOCTL_DEV if abi >= 5 else 0)


def warm(folders):
    """Read every file under folders (links not followed) that lies on another file system than
    its folder, so that each page is in memory: in the child's root (exercises/jail.py) those
    are the machine's files bound one by one; the copies beside them are in memory already."""
    for top in folders:
        for folder, _, files in os.walk(top):
            own = os.stat(folder).st_dev
            for name in files:
                path = os.path.join(folder, name)
                if os.path.isfile(path) and not os.path.islink(path) and os.stat(path).st_dev != own:
                    try:
                        with open(path, "rb", buffering=0) as f:
                            while f.read(CHUNK):
                                pass
                    except OSError:
                        pass


def version():
    """The kernel's Landlock version (0: none)."""
    return max(ctypes.CDLL(None, use_errno=True).syscall(CREATE_RULESET, None, 0, RULESET_VERSION), 0)


def keep_to(readable, writable="/tmp", devices="/dev", proc="/proc"):
    """Warm the folders `readable`, then let this process and all it forks read only beneath
    them (and /proc), write only beneath `writable`, and use the devices of `devices`.
    False, restricting nothing, where the kernel has no Landlock."""
    libc = ctypes.CDLL(None, use_errno=True)
    abi = version()
    if abi < 1:
        return False
    readable = [path for path in dict.fromkeys(readable) if os.path.isdir(path)]
    warm(readable)
    access = handled(abi)
    ruleset = libc.syscall(CREATE_RULESET, ctypes.byref(RulesetAttributes(access)),
                           ctypes.sizeof(RulesetAttributes), 0)
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for path, rights in [*((path, READ) for path in readable), (writable, access), (devices, DEVICES),
                             (proc, READ_FILE | READ_DIR)]:
            folder = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = PathBeneath(rights & access, folder)
                if libc.syscall(ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
            finally:
                os.close(folder)
        if libc.syscall(RESTRICT_SELF, ruleset, 0) != 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return True
