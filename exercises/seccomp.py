"""What a check's child may not ask the kernel for: the channels that outlive a task (Linux).

Everything a task writes is emptied or killed before the next task of its slot: /tmp and its
processes (exercises/child.py). Two kernel objects outlive processes and are
reached by name, not through a file: POSIX message queues (they live as long as the IPC
namespace, which is the zygote's, across tasks and students) and keys (a user's keyring is
the whole machine's, and outlives the grading run). A region could leave a solution its
check's child held in either, for a later task to read. So the zygote, before any student
code runs, installs a seccomp filter (inherited by every process it forks, impossible to
remove) that answers those system calls with EPERM:

    mq_open, mq_unlink, mq_timedsend, mq_timedreceive, mq_notify, mq_getsetattr,
    add_key, request_key, keyctl

Three more carry data without writing a file's bytes, on files a task may only read or on
its /tmp itself, which the clean-up keeps: record locks (`flock`, and `fcntl`'s lock and
lease commands: where a lock starts on a read-only file the whole machine shares, another
slot's child, or any process of the machine, can ask), extended attributes (set or removed)
and a file's times (`utime`, `utimes`, `futimesat`, `utimensat`). No check needs them.

Two more observe, without writing anything, what the other job slot's child does to the
files both may read: inotify (`inotify_init`, `inotify_init1`, `inotify_add_watch`: an open
of one of 34 stdlib files spells a half-byte, and a hostile trial carried a whole solution
that way between two tasks running at once) and fanotify (`fanotify_init`, `fanotify_mark`);
and `mincore`, which tells which pages of a shared file another process has read.

Hostile trial 10 found more: `preadv2` with RWF_NOWAIT (fails on a page not in memory: the
page cache as a readable, persistent mark), `posix_fadvise` and `readahead` (which evict or
load a shared file's pages at will), `madvise`'s MADV_COLD and MADV_PAGEOUT (reclaim them:
refused for those two advices only, as malloc calls madvise), and `cachestat`; io_uring
(`io_uring_setup`, `io_uring_enter`, `io_uring_register`), whose operations are system calls
this filter never sees (an extended attribute was set through it); `perf_event_open`;
`sysinfo` (the machine's free and shared memory, a counter another slot moves); and
`sched_setaffinity`, with which two children pinned to one core signal through its time.

Hostile trial 11: System V IPC (`shmget`, `semget`, `msgget`: their ids count up from task to
task, 16 bits each for the next task to read, and detached shared memory outlived the memory
limit), kernel AIO (`io_setup` and the rest: the machine's AIO events, shared by every slot
and container). Trial 12: every call that makes a pipe, a socket or a memfd (`pipe`, `pipe2`,
`socket`, `socketpair`, `memfd_create`), as each takes an inode number from one counter of
the whole machine, which the next task can read (and a loopback that is down still counted
the packets a socket sent). A task talks to its judge through the socket it was given.

Hostile trial 15: `sched_setattr` (a task set its zygote's time slice, which `lasting` does
not compare, and a later task read it back: 26 bits; `sched_setscheduler` and
`sched_setparam` with it), and futexes shared between processes: two slots' children both
map the same library file, so a wait on an address in its pages is woken by the other slot
(a whole solution at 2 kbit/s, with --jobs 2). A futex call whose operation lacks
FUTEX_PRIVATE_FLAG may only wake (no one ever waits on a shared one, so a wake says
nothing); any other is answered EAGAIN, which C libraries take as "look again" (pthread_join
then spins instead of sleeping); the newer futex calls (`futex_waitv`, `futex_wait`,
`futex_wake`, `futex_requeue`), which no C library here uses, are refused.

and every call made as another architecture's (x86-64's 32-bit calls through `int 0x80`,
its x32 ABI: the same calls under other numbers). A filter is a small program the kernel
runs on each system call: load the call's architecture (not this machine's: refused), then
its number, and compare. On a machine the table does not know, nothing is installed.
"""

import ctypes
import platform

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
LOAD_WORD, JUMP_IF_EQUAL, JUMP_IF_AT_LEAST, RETURN = 0x20, 0x15, 0x35, 0x06     # BPF opcodes
JUMP_IF_ANY_BIT, AND = 0x45, 0x54                                              # jump if A & k, A &= k
ALLOW, REFUSE, TRY_AGAIN = 0x7FFF0000, 0x00050000 | 1, 0x00050000 | 11         # RET_ALLOW, RET_ERRNO | EPERM, EAGAIN
NOT_HERE = 0x00050000 | 38                                                     # RET_ERRNO | ENOSYS
FIRST_ARGUMENT_OFFSET, CLONE_PIDFD = 16, 0x1000
ARCH_OFFSET, NUMBER_OFFSET = 4, 0                                               # in struct seccomp_data
SECOND_ARGUMENT_OFFSET, THIRD_ARGUMENT_OFFSET = 24, 32                          # (their low words)
X32 = 0x40000000
# {call: (its number on x86-64, on aarch64; None where that machine has no such call)}: the
# forbidden calls, ioprio_get and sched_getattr to read, fcntl, madvise and futex for their arguments
CALL_NUMBERS = {"mq_open": (240, 180), "mq_unlink": (241, 181), "mq_timedsend": (242, 182),
                "mq_timedreceive": (243, 183), "mq_notify": (244, 184), "mq_getsetattr": (245, 185),
                "add_key": (248, 217), "request_key": (249, 218), "keyctl": (250, 219), "ioprio_get": (252, 31),
                "sched_getattr": (315, 275),
                "flock": (73, 32), "fcntl": (72, 25), "setxattr": (188, 5), "lsetxattr": (189, 6),
                "fsetxattr": (190, 7), "removexattr": (197, 14), "lremovexattr": (198, 15),
                "fremovexattr": (199, 16), "utime": (132, None), "utimes": (235, None), "futimesat": (261, None),
                "utimensat": (280, 88), "inotify_init": (253, None), "inotify_init1": (294, 26),
                "inotify_add_watch": (254, 27), "fanotify_init": (300, 262), "fanotify_mark": (301, 263),
                "mincore": (27, 232), "preadv2": (327, 286), "pwritev2": (328, 287), "fadvise64": (221, 223),
                "readahead": (187, 213), "cachestat": (451, 451), "io_uring_setup": (425, 425),
                "io_uring_enter": (426, 426), "io_uring_register": (427, 427), "perf_event_open": (298, 241),
                "sysinfo": (99, 179), "sched_setaffinity": (203, 122), "madvise": (28, 233), "shmget": (29, 194),
                "semget": (64, 190), "msgget": (68, 186), "io_setup": (206, 0), "io_destroy": (207, 1),
                "io_getevents": (208, 4), "io_submit": (209, 2), "io_cancel": (210, 3), "io_pgetevents": (333, 292),
                "socket": (41, 198), "socketpair": (53, 199), "pipe": (22, None), "pipe2": (293, 59),
                "memfd_create": (319, 279), "sched_setattr": (314, 274), "sched_setscheduler": (144, 119),
                "sched_setparam": (142, 118), "futex": (202, 98), "futex_waitv": (449, 449), "futex_wake": (454, 454),
                "futex_wait": (455, 455), "futex_requeue": (456, 456), "pidfd_open": (434, 434), "clone3": (435, 435),
                "clone": (56, 220)}
# machine: (AUDIT_ARCH_*, {name: number}) of those calls the machine has
MACHINES = {machine: (audit_arch, {name: numbers[column] for name, numbers in CALL_NUMBERS.items()
                                   if numbers[column] is not None})
            for column, (machine, audit_arch) in enumerate((("x86_64", 0xC000003E), ("aarch64", 0xC00000B7)))}
FORBIDDEN = ("mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
             "add_key", "request_key", "keyctl", "flock", "setxattr", "lsetxattr", "fsetxattr", "removexattr",
             "lremovexattr", "fremovexattr", "utime", "utimes", "futimesat", "utimensat", "inotify_init",
             "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark", "mincore", "preadv2",
             "pwritev2", "fadvise64", "readahead", "cachestat", "io_uring_setup", "io_uring_enter",
             "io_uring_register", "perf_event_open", "sysinfo", "sched_setaffinity", "shmget", "semget", "msgget",
             "io_setup", "io_destroy", "io_getevents", "io_submit", "io_cancel", "io_pgetevents", "socket",
             "socketpair", "pipe", "pipe2", "memfd_create", "sched_setattr", "sched_setscheduler", "sched_setparam",
             "futex_waitv", "futex_wake", "futex_wait", "futex_requeue")
# calls refused for some values of one argument only: {call: (the argument's offset, values)}.
# fcntl's commands on record locks and leases: F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK, F_OFD_SETLK,
# F_OFD_SETLKW, F_SETLEASE, F_GETLEASE (its other commands, on descriptors' flags, stay allowed);
# madvise's MADV_COLD and MADV_PAGEOUT (its others, which malloc uses, stay allowed)
LOCK_COMMANDS = (5, 6, 7, 36, 37, 38, 1024, 1025)
BY_ARGUMENT = {"fcntl": (SECOND_ARGUMENT_OFFSET, LOCK_COMMANDS), "madvise": (THIRD_ARGUMENT_OFFSET, (20, 21))}
# futex's operation (its second argument): private (FUTEX_PRIVATE_FLAG set), or a wake of a shared one
FUTEX_PRIVATE_FLAG, FUTEX_COMMAND_MASK, FUTEX_WAKES = 128, 127, (1, 10)       # FUTEX_WAKE, FUTEX_WAKE_BITSET


class Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jump_true", ctypes.c_uint8), ("jump_false", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class Program(ctypes.Structure):
    _fields_ = [("length", ctypes.c_uint16), ("instructions", ctypes.POINTER(Instruction))]


def call_number(name):
    """The system call's number on this machine, or None where it is not known here."""
    machine = MACHINES.get(platform.machine())
    return machine[1].get(name) if machine else None


def _program(arch, numbers, by_argument=(), futex=None):
    """[Instruction]: refuse the calls `numbers`, and each call of `by_argument` [(number, the
    argument's offset, values)] when that argument is one of its values; every call of another
    architecture and, on x86-64, every x32 call; answer EAGAIN to a call of `futex` (its
    number) on a shared futex that is not a wake; allow the rest."""
    checks = [(JUMP_IF_AT_LEAST, X32)] if arch == MACHINES["x86_64"][0] else []
    checks += [(JUMP_IF_EQUAL, number) for number in numbers]
    program = [(LOAD_WORD, None, None, ARCH_OFFSET), (JUMP_IF_EQUAL, None, "refuse", arch),
               (LOAD_WORD, None, None, NUMBER_OFFSET)]
    program += [(test, "refuse", None, value) for test, value in checks]
    for index, (number, argument, values) in enumerate(by_argument):
        after = f"after {index}"                            # the next call's test, or the end: allowed
        program += [(JUMP_IF_EQUAL, None, after, number), (LOAD_WORD, None, None, argument)]
        program += [(JUMP_IF_EQUAL, "refuse", None, value) for value in values]
        program += [(RETURN, None, None, ALLOW), (f"label {after}", None, None, None)]
    if futex is not None:
        program += [(JUMP_IF_EQUAL, None, "allow", futex), (LOAD_WORD, None, None, SECOND_ARGUMENT_OFFSET),
                    (JUMP_IF_ANY_BIT, "allow", None, FUTEX_PRIVATE_FLAG), (AND, None, None, FUTEX_COMMAND_MASK)]
        program += [(JUMP_IF_EQUAL, "allow", None, command) for command in FUTEX_WAKES]
        program += [(RETURN, None, None, TRY_AGAIN)]
    program += [(RETURN, None, None, ALLOW), (RETURN, None, None, REFUSE)]
    labels, instructions = {}, []
    for code, true, false, k in program:                    # a label names the place of the next instruction
        if isinstance(code, str):
            labels[code[len("label "):]] = len(instructions)
        else:
            instructions.append((code, true, false, k))
    labels.update({"allow": len(instructions) - 2, "refuse": len(instructions) - 1})

    def offset(index, label):                               # a jump counts the instructions it skips
        return 0 if label is None else labels[label] - index - 1
    return [Instruction(code, offset(i, true), offset(i, false), k)
            for i, (code, true, false, k) in enumerate(instructions)]


def _no_pidfd_program(numbers):
    """[Instruction]: refuse pidfd_open, and clone asked for a pidfd (CLONE_PIDFD in its flags);
    answer clone3, whose flags lie in memory a filter cannot read, ENOSYS (C libraries then
    fall back to clone); allow the rest."""
    program = [(LOAD_WORD, 0, 0, NUMBER_OFFSET), (JUMP_IF_EQUAL, 5, 0, numbers["pidfd_open"]),
               (JUMP_IF_EQUAL, 5, 0, numbers["clone3"]), (JUMP_IF_EQUAL, 0, 2, numbers["clone"]),
               (LOAD_WORD, 0, 0, FIRST_ARGUMENT_OFFSET), (JUMP_IF_ANY_BIT, 1, 0, CLONE_PIDFD),
               (RETURN, 0, 0, ALLOW), (RETURN, 0, 0, REFUSE), (RETURN, 0, 0, NOT_HERE)]
    return [Instruction(*instruction) for instruction in program]


def _install(instructions):
    program = Program(len(instructions), (Instruction * len(instructions))(*instructions))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(program), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl: the seccomp filter was refused")


def forbid_pidfds():
    """In a task child, on top of the zygote's filter: no pidfd (its inode number counts every
    process the machine makes, which two slots' children read and moved to carry 20-65 bits a
    second in hostile trial 16). The zygote keeps pidfd_open, to wait for a task and its
    grader at once. False where the table does not know this machine."""
    machine = MACHINES.get(platform.machine())
    if machine is None:
        return False
    _install(_no_pidfd_program(machine[1]))
    return True


def forbid_lasting_channels():
    """Install the filter on this process and all it forks; False where this machine's
    architecture is not one the table knows (nothing installed)."""
    machine = MACHINES.get(platform.machine())
    if machine is None:
        return False
    arch, numbers = machine
    instructions = _program(arch, [numbers[name] for name in FORBIDDEN if name in numbers],
                            [(numbers[name], *BY_ARGUMENT[name]) for name in BY_ARGUMENT if name in numbers],
                            numbers.get("futex"))
    _install(instructions)
    return True
