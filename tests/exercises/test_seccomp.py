"""The seccomp filter a check's zygote installs: no message queue, no key, nothing asked as
another architecture (x86-64's 32-bit `int 0x80`), and everything else as before."""
import platform
import subprocess
import sys

import pytest

from exercises.seccomp import call_number
from tests.exercises.helpers import ROOT

pytestmark = pytest.mark.skipif(call_number("keyctl") is None,
                                reason="the seccomp table does not know this machine's system calls")

# getpid asked as a 32-bit program asks it (eax = 20, int 0x80) from executable memory below 4 GB
INT80_GETPID = """
import ctypes, mmap, os
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
page = libc.mmap(None, 4096, 7, 0x22 | 0x40, -1, 0)       # RWX, private anonymous, MAP_32BIT
code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])      # mov eax, 20; int 0x80; ret
ctypes.memmove(page, code, len(code))
print(ctypes.CFUNCTYPE(ctypes.c_int)(page)(), os.getpid())
"""


def _run(code, filtered):
    prologue = "from exercises.seccomp import forbid_lasting_channels\nforbid_lasting_channels()\n" if filtered else ""
    return subprocess.run([sys.executable, "-c", prologue + code], cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_queues_and_keys_are_refused_and_the_rest_still_works():
    code = (f"import ctypes, os\nimport numpy as np\nlibc = ctypes.CDLL(None, use_errno=True)\n"
            f"key = libc.syscall({call_number('add_key')}, b'user', b'exercises-test', b'x', 1, -4)\n"
            "queue = libc.mq_open(b'/exercises-test', os.O_CREAT | os.O_RDWR, 0o600, None)\n"
            "print(key, queue, ctypes.get_errno(), np.ones((3, 4)).sum(), os.getpid() > 0)")
    run = _run(code, filtered=True)
    assert run.stdout.split() == ["-1", "-1", "1", "12.0", "True"], run.stdout + run.stderr


@pytest.mark.skipif(platform.machine() != "x86_64", reason="int 0x80 is x86-64's way to ask as a 32-bit program")
def test_a_call_asked_as_a_32_bit_program_is_refused():
    free = _run(INT80_GETPID, filtered=False)
    answer, pid = map(int, free.stdout.split())
    if answer != pid:
        pytest.skip("this kernel runs no 32-bit calls (no IA32 emulation): nothing to refuse")
    answer, pid = map(int, _run(INT80_GETPID, filtered=True).stdout.split())
    assert answer == -1                                   # -EPERM, not the process id


LOCKS_XATTRS_TIMES = """
import fcntl, os, struct, sys
results = []
with open(sys.argv[1], "rb") as f:                      # a file this process may only read
    for attempt in (lambda: fcntl.lockf(f, fcntl.LOCK_SH | fcntl.LOCK_NB, 6, 123456),
                    lambda: fcntl.fcntl(f, fcntl.F_GETLK, struct.pack("hhqqi", fcntl.F_RDLCK, 0, 0, 0, 0)),
                    lambda: fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB),
                    lambda: os.setxattr(sys.argv[2], "user.note", b"x"),
                    lambda: os.utime(sys.argv[2], (3333333333, 3333333333))):
        try:
            attempt()
            results.append("allowed")
        except OSError as err:
            results.append(err.errno)
    results.append(fcntl.fcntl(f, fcntl.F_GETFD) >= 0)   # its other commands still work
print(*results)
"""


def test_locks_extended_attributes_and_times_are_refused(tmp_path):
    """A read lock's place on a file every slot reads carried six bytes of a solution a lock to
    another slot's child, extended attributes and times on /tmp to a later task."""
    readable, own = tmp_path / "shared.py", tmp_path / "own"
    readable.write_text("x = 1\n")
    own.mkdir()
    free = subprocess.run([sys.executable, "-c", LOCKS_XATTRS_TIMES, str(readable), str(own)], capture_output=True,
                          text=True, timeout=60)
    assert free.stdout.split()[:3] == ["allowed"] * 3 and free.stdout.split()[-1] == "True", free.stdout + free.stderr
    run = _run(LOCKS_XATTRS_TIMES.replace("sys.argv[1]", repr(str(readable))).replace("sys.argv[2]", repr(str(own))),
               filtered=True)
    assert run.stdout.split() == ["1", "1", "1", "1", "1", "True"], run.stdout + run.stderr


WATCHES = """
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
results = []
for ask in (lambda: libc.inotify_init1(0), lambda: libc.inotify_init(),
            lambda: libc.fanotify_init(0, 0)):
    answer = ask()
    results.append(ctypes.get_errno() if answer < 0 else "allowed")
with open(sys.argv[1], "rb") as f:
    vector = ctypes.create_string_buffer(1)
    libc.mmap.restype = ctypes.c_void_p
    mapped = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
    answer = libc.mincore(ctypes.c_void_p(mapped), 4096, vector)
    results.append(ctypes.get_errno() if answer < 0 else "allowed")
print(*results)
"""


def test_watching_another_process_s_opens_and_the_page_cache_is_refused(tmp_path):
    """inotify on a stdlib file both job slots read carried a whole solution from one slot's
    child to the other's, an open a half-byte; mincore would show which pages another read."""
    shared = tmp_path / "shared.py"
    shared.write_text("x = 1\n" * 1000)
    free = subprocess.run([sys.executable, "-c", WATCHES, str(shared)], capture_output=True, text=True, timeout=60)
    assert free.stdout.split()[:2] == ["allowed"] * 2 and free.stdout.split()[-1] == "allowed", free.stdout + free.stderr
    run = _run(WATCHES.replace("sys.argv[1]", repr(str(shared))), filtered=True)
    assert run.stdout.split() == ["1", "1", "1", "1"], run.stdout + run.stderr


ASKING = """
import ctypes, mmap, os, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
number = {NUMBERS}
results = []
def asked(answer):
    results.append(str(ctypes.get_errno()) if answer == -1 else "allowed")
"""     # what each trial's script starts with: the numbers of its calls, and how an answer is noted

TRIAL_10 = ASKING + """fd = os.open(sys.argv[1], os.O_RDONLY)
buffer = ctypes.create_string_buffer(4096)
iov = (ctypes.c_void_p * 2)(ctypes.cast(buffer, ctypes.c_void_p), 4096)
asked(libc.syscall(number["preadv2"], fd, iov, 1, ctypes.c_long(0), 8))               # RWF_NOWAIT
asked(libc.syscall(number["fadvise64"], fd, ctypes.c_long(0), ctypes.c_long(0), 4))    # POSIX_FADV_DONTNEED
asked(libc.syscall(number["readahead"], fd, ctypes.c_long(0), ctypes.c_size_t(4096)))
params = ctypes.create_string_buffer(120)
asked(libc.syscall(number["io_uring_setup"], 4, params))
asked(libc.syscall(number["perf_event_open"], ctypes.create_string_buffer(128), 0, -1, -1, 0))
asked(libc.syscall(number["sysinfo"], ctypes.create_string_buffer(128)))
mask = ctypes.c_ulong(1)
asked(libc.syscall(number["sched_setaffinity"], 0, ctypes.sizeof(mask), ctypes.byref(mask)))
libc.mmap.restype = ctypes.c_void_p
mapped = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_PRIVATE, fd, 0)
asked(libc.madvise(ctypes.c_void_p(mapped), 4096, 21))                                # MADV_PAGEOUT
asked(libc.madvise(ctypes.c_void_p(mapped), 4096, 4))                                 # MADV_DONTNEED: malloc's
asked(os.pread(fd, 16, 0) and 0)                                                      # a plain read
print(*results)
"""


def test_hostile_trial_10_s_page_cache_marks_io_uring_and_machine_counters_are_refused(tmp_path):
    """preadv2's RWF_NOWAIT and fadvise marked a shared file's pages for a later task to read,
    io_uring set an extended attribute past the filter, sysinfo and a pinned core carried bits
    between slots: refused (EPERM, 1), where madvise's other advices and plain reads still work."""
    shared = tmp_path / "shared.bin"
    shared.write_bytes(bytes(8192))
    names = ("preadv2", "fadvise64", "readahead", "io_uring_setup", "perf_event_open", "sysinfo", "sched_setaffinity")
    code = TRIAL_10.replace("{NUMBERS}", repr({name: call_number(name) for name in names}))
    free = subprocess.run([sys.executable, "-c", code, str(shared)], capture_output=True, text=True, timeout=60)
    said = free.stdout.split()
    assert len(said) == 10 and said[0] == said[1] == said[5] == said[6] == said[8] == said[9] == "allowed", \
        free.stdout + free.stderr                 # these work unfiltered (io_uring, perf may be off by sysctl)
    run = _run(code.replace("sys.argv[1]", repr(str(shared))), filtered=True)
    assert run.stdout.split() == ["1"] * 8 + ["allowed", "allowed"], run.stdout + run.stderr


TRIAL_11 = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
number = {NUMBERS}
results = []
def asked(answer, removed=lambda made: None):                           # what was made is removed at once
    results.append(str(ctypes.get_errno()) if answer == -1 else "allowed")
    if answer != -1:
        removed(answer)
asked(libc.syscall(number["shmget"], 0, 4096, 0o1600), lambda made: libc.shmctl(made, 0, None))   # IPC_RMID
asked(libc.syscall(number["semget"], 0, 1, 0o1600), lambda made: libc.semctl(made, 0, 0))
asked(libc.syscall(number["msgget"], 0, 0o1600), lambda made: libc.msgctl(made, 0, None))
context = ctypes.c_ulong(0)
asked(libc.syscall(number["io_setup"], 8, ctypes.byref(context)),
      lambda made: libc.syscall(number["io_destroy"], context))
asked(libc.socket(2, 2, 0))                                             # AF_INET, SOCK_DGRAM
asked(libc.socket(10, 2, 0))                                            # AF_INET6
asked(libc.socket(16, 3, 0))                                            # AF_NETLINK
asked(libc.socket(1, 1, 0))                                             # AF_UNIX
asked(libc.pipe((ctypes.c_int * 2)()))                                  # each takes an inode number of the machine's
asked(libc.syscall(number["memfd_create"], b"x", 0))
print(*results)
"""


def test_hostile_trials_11_and_12_s_counters_are_refused():
    """System V IPC ids counted up from task to task (a solution in their counters), kernel AIO
    is the machine's, and every pipe, socket and memfd takes an inode number from one counter
    of the whole machine (a down loopback also counted packets): refused."""
    names = ("shmget", "semget", "msgget", "io_setup", "io_destroy", "memfd_create")
    code = TRIAL_11.replace("{NUMBERS}", repr({name: call_number(name) for name in names}))
    free = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert free.stdout.split() == ["allowed"] * 10, free.stdout + free.stderr
    run = _run(code, filtered=True)
    assert run.stdout.split() == ["1"] * 10, run.stdout + run.stderr


TRIAL_15 = ASKING + """attributes = ctypes.create_string_buffer(56)                            # struct sched_attr, as the kernel fills it
ctypes.memmove(attributes, (56).to_bytes(4, "little"), 4)
asked(libc.syscall(number["sched_getattr"], 0, attributes, 56, 0))      # reading it stays allowed
asked(libc.syscall(number["sched_setattr"], 0, attributes, 0))          # the same values back: a write
asked(libc.syscall(number["sched_setscheduler"], 0, 0, ctypes.byref(ctypes.c_int(0))))
asked(libc.syscall(number["sched_setparam"], 0, ctypes.byref(ctypes.c_int(0))))
libc.mmap.restype = ctypes.c_void_p
with open(sys.argv[1], "rb") as f:                                      # a file both slots map
    page = libc.mmap(None, 4096, mmap.PROT_READ, mmap.MAP_SHARED, f.fileno(), 0)
word = ctypes.c_uint32.from_address(page).value
timeout = (ctypes.c_long * 2)(0, 1000000)                               # 1 ms
asked(libc.syscall(number["futex"], ctypes.c_void_p(page), 0, word, timeout))        # FUTEX_WAIT, shared
asked(libc.syscall(number["futex"], ctypes.c_void_p(page), 9, word, timeout, None, -1))   # FUTEX_WAIT_BITSET
asked(libc.syscall(number["futex"], ctypes.c_void_p(page), 1, 1))                    # FUTEX_WAKE, shared: 0 woken
asked(libc.syscall(number["futex_waitv"], None, 0, 0, None, 0))
own = ctypes.c_uint32(7)
asked(libc.syscall(number["futex"], ctypes.byref(own), 128, 8, timeout))            # private: EAGAIN (7 != 8)
thread = threading.Thread(target=lambda: None); thread.start(); thread.join()        # a thread's life still works
print(*results, os.getpid() > 0)
"""


def test_hostile_trial_15_s_time_slice_and_shared_futexes_are_refused(tmp_path):
    """A task set its zygote's time slice (sched_setattr) for a later one to read; two slots'
    children waited and woke on a futex in a library page both map (2 kbit/s): the writes of
    scheduling refused (EPERM, 1), a shared futex's wait answered EAGAIN (11) while its wake
    and every private futex still work, the newer futex calls refused."""
    shared = tmp_path / "library.bin"
    shared.write_bytes(bytes(8192))
    names = ("sched_getattr", "sched_setattr", "sched_setscheduler", "sched_setparam", "futex", "futex_waitv")
    code = TRIAL_15.replace("{NUMBERS}", repr({name: call_number(name) for name in names}))
    free = subprocess.run([sys.executable, "-c", code, str(shared)], capture_output=True, text=True, timeout=60)
    said = free.stdout.split()
    assert said[:4] == ["allowed"] * 4 and said[4:6] == ["110", "110"] and said[6] == "allowed", \
        free.stdout + free.stderr                          # unfiltered: the shared waits time out (ETIMEDOUT)
    run = _run(code.replace("sys.argv[1]", repr(str(shared))), filtered=True)
    assert run.stdout.split() == ["allowed", "1", "1", "1", "11", "11", "allowed", "1", "11", "True"], \
        run.stdout + run.stderr


PIDFDS = """
import ctypes, os, threading
from exercises.seccomp import call_number, forbid_pidfds
forbid_pidfds()
libc = ctypes.CDLL(None, use_errno=True)
results = []
try:
    os.close(os.pidfd_open(os.getpid()))
    results.append("allowed")
except OSError as err:
    results.append(str(err.errno))
answer = libc.syscall(call_number("clone"), 0x1000 | 17, None, None, None, None)   # CLONE_PIDFD | SIGCHLD
results.append(str(ctypes.get_errno()) if answer == -1 else "allowed")
if answer == 0:
    os._exit(0)
answer = libc.syscall(call_number("clone3"), None, 0)
results.append(str(ctypes.get_errno()) if answer == -1 else "allowed")
seen = []
thread = threading.Thread(target=lambda: seen.append(1)); thread.start(); thread.join()   # clone3 falls back to clone
child = os.fork()
if child == 0:
    os._exit(7)
results.append(str(os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])) + str(len(seen)))
print(*results)
"""


def test_a_task_gets_no_pidfd_and_still_starts_threads_and_forks():
    """A pidfd's inode number counts every process the machine makes: two slots' children read
    it and moved it (trial 16, 20-65 bits a second with --jobs 2). A task child's own filter
    refuses pidfd_open and clone's CLONE_PIDFD (EPERM, 1), answers clone3 ENOSYS (38) so that
    a C library falls back to clone; threads and forks still work."""
    run = _run(PIDFDS, filtered=True)
    assert run.stdout.split() == ["1", "1", "38", "71"], run.stdout + run.stderr
