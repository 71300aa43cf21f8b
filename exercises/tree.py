"""What a check's child is shown: its tree (the project's texts, every exercise cut, and the
child's own modules, read-only), and the rest of the machine it may see (exercises/jail.py
shows it the libraries and Python, of the installed packages only numpy, numba and
llvmlite, and hides the site-packages and the teacher's project)."""

import hashlib
import importlib.util
import os
import sys

PACKAGES = ("numpy", "numba", "llvmlite")        # all a child may import besides the tree and the standard library
RUNTIME = ("__init__.py", "child.py", "jail.py", "seccomp.py", "lasting.py", "wire.py", "probes.py", "stand_ins.py",
           "hotpatch.py", "overrides.py", "readable.py")


def _within(path, folders):
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


def layout(hide):
    """The folders a zygote is shown: binds, those shown empty, the packages shown inside them."""
    binds = [p for p in dict.fromkeys(("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/etc/ld.so.cache",
                                       sys.base_prefix, sys.prefix)) if os.path.lexists(p)]
    packages, places = [], []
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        folder = os.path.dirname(spec.origin)
        parent = os.path.dirname(folder)
        places.append(parent)
        packages += [folder] + [os.path.join(parent, n) for n in sorted(os.listdir(parent))
                                if n.startswith(name) and n.endswith(".libs")]
    places = list(dict.fromkeys(places))
    hidden = [p for p in dict.fromkeys(places + [os.path.realpath(h) for h in hide]) if _within(p, binds)]
    stdlib = [p for p in sys.path if p and os.path.exists(p) and not _within(p, places) and _within(p, binds)]
    tests = [os.path.join(p, "test") for p in stdlib if os.path.isdir(os.path.join(p, "test"))]   # Python's own: 120 MB
    return {"binds": binds, "hidden": hidden + tests, "packages": packages, "packages_path": places, "stdlib": stdlib}


def write_tree(folder, texts):
    """The child's tree: the project's texts {file: text} (every exercise cut) and the child's
    own modules; read-only. Returns its fingerprint (fingerprint())."""
    here = os.path.dirname(os.path.abspath(__file__))
    for path, text in texts.items():
        os.makedirs(os.path.dirname(os.path.join(folder, path)), exist_ok=True)
        with open(os.path.join(folder, path), "w", encoding="utf-8") as f:
            f.write(text)
    os.makedirs(os.path.join(folder, "exercises"), exist_ok=True)
    for name in RUNTIME:
        with open(os.path.join(here, name), encoding="utf-8") as f:
            text = f.read() if name != "__init__.py" else '"""A check\'s child: the modules it runs."""\n'
        with open(os.path.join(folder, "exercises", name), "w", encoding="utf-8") as f:
            f.write(text)
    for place, folders, files in os.walk(folder):
        for name in files:
            os.chmod(os.path.join(place, name), 0o444)
        os.chmod(place, 0o555)
    return fingerprint(folder)


def fingerprint(folder):
    """A hash of every file's path, mode and bytes under folder."""
    digest = hashlib.sha256()
    for place, folders, files in sorted(os.walk(folder)):
        folders.sort()
        for name in sorted(files):
            path = os.path.join(place, name)
            digest.update(f"{os.path.relpath(path, folder)} {os.lstat(path).st_mode}\n".encode())
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as f:
                    digest.update(f.read())
    return digest.hexdigest()
