"""What a check's child may not ask the kernel for: the channels that outlive a task (Linux).

Everything a task writes is emptied or killed before the next task of its slot: /tmp, its
processes, System V IPC (exercises/child.py). Two kernel objects outlive processes and are
reached by name, not through a file: POSIX message queues (they live as long as the IPC
namespace, which is the zygote's, across tasks and students) and keys (a user's keyring is
the whole machine's, and outlives the grading run). A region could leave a solution its
check's child held in either, for a later task to read. So the zygote, before any student
code runs, installs a seccomp filter (inherited by every process it forks, impossible to
remove) that answers those system calls with EPERM:

    mq_open, mq_unlink, mq_timedsend, mq_timedreceive, mq_notify, mq_getsetattr,
    add_key, request_key, keyctl

and every call made as another architecture's (x86-64's 32-bit calls through `int 0x80`,
its x32 ABI: the same calls under other numbers). A filter is a small program the kernel
runs on each system call: load the call's architecture (not this machine's: refused), then
its number, and compare. On a machine the table does not know, nothing is installed.
"""

import ctypes
import platform

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
LOAD_WORD, JUMP_IF_EQUAL, JUMP_IF_AT_LEAST, RETURN = 0x20, 0x15, 0x35, 0x06     # BPF opcodes
ALLOW, REFUSE = 0x7FFF0000, 0x00050000 | 1                                     # RET_ALLOW, RET_ERRNO | EPERM
ARCH_OFFSET, NUMBER_OFFSET = 4, 0                                              # in struct seccomp_data
X32 = 0x40000000
# machine: (AUDIT_ARCH_*, {name: number}) of the forbidden calls; ioprio_get for child.py's state
MACHINES = {
    "x86_64": (0xC000003E, {"mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242, "mq_timedreceive": 243,
                            "mq_notify": 244, "mq_getsetattr": 245, "add_key": 248, "request_key": 249,
                            "keyctl": 250, "ioprio_get": 252}),
    "aarch64": (0xC00000B7, {"mq_open": 180, "mq_unlink": 181, "mq_timedsend": 182, "mq_timedreceive": 183,
                             "mq_notify": 184, "mq_getsetattr": 185, "add_key": 217, "request_key": 218,
                             "keyctl": 219, "ioprio_get": 31}),
}
FORBIDDEN = ("mq_open", "mq_unlink", "mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
             "add_key", "request_key", "keyctl")


class Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jump_true", ctypes.c_uint8), ("jump_false", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class Program(ctypes.Structure):
    _fields_ = [("length", ctypes.c_uint16), ("instructions", ctypes.POINTER(Instruction))]


def call_number(name):
    """The system call's number on this machine, or None where it is not known here."""
    machine = MACHINES.get(platform.machine())
    return machine[1].get(name) if machine else None


def _program(arch, numbers):
    """[Instruction]: refuse the calls `numbers`, every call of another architecture and, on
    x86-64, every x32 call; allow the rest."""
    checks = [(JUMP_IF_AT_LEAST, X32)] if arch == MACHINES["x86_64"][0] else []
    checks += [(JUMP_IF_EQUAL, number) for number in numbers]
    program = [(LOAD_WORD, 0, 0, ARCH_OFFSET), (JUMP_IF_EQUAL, 0, len(checks) + 2, arch),   # else to REFUSE
               (LOAD_WORD, 0, 0, NUMBER_OFFSET)]
    for index, (test, value) in enumerate(checks):
        program.append((test, len(checks) - index, 0, value))      # to REFUSE, past the rest and ALLOW
    program += [(RETURN, 0, 0, ALLOW), (RETURN, 0, 0, REFUSE)]
    return [Instruction(*instruction) for instruction in program]


def forbid_lasting_channels():
    """Install the filter on this process and all it forks; False where this machine's
    architecture is not one the table knows (nothing installed)."""
    machine = MACHINES.get(platform.machine())
    if machine is None:
        return False
    arch, numbers = machine
    instructions = _program(arch, [numbers[name] for name in FORBIDDEN])
    program = Program(len(instructions), (Instruction * len(instructions))(*instructions))
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0) != 0 or \
            libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(program), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl: the seccomp filter was refused")
    return True
