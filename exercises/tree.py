"""What a check's child is shown: its tree (the project's texts, every exercise cut, and the
child's own modules, read-only), and the rest of the machine it may see (exercises/jail.py
shows it copies of the standard library and of numpy, numba and llvmlite, and the system's
shared library files they load; not the site-packages, nor the teacher's project)."""

import functools
import hashlib
import importlib.util
import os
import sys

PACKAGES = ("numpy", "numba", "llvmlite")        # all a child may import besides the tree and the standard library
RUNTIME = ("__init__.py", "child.py", "jail.py", "seccomp.py", "lasting.py", "wire.py", "probes.py", "stand_ins.py",
           "hotpatch.py", "overrides.py", "readable.py")


def _within(path, folders):
    return any(path == f or path.startswith(f.rstrip("/") + "/") for f in folders)


@functools.lru_cache(maxsize=None)
def libraries(folders):
    """The system's shared libraries that the loader would open for the .so files under folders
    (as `ldd` says: the files those load, and theirs), with its cache and the loader itself; None
    where there is no `ldd` (then the child is shown the system's library folders whole)."""
    import glob
    import shutil
    import subprocess
    if shutil.which("ldd") is None:
        return None
    found = {"/etc/ld.so.cache"} if os.path.exists("/etc/ld.so.cache") else set()
    objects = [path for folder in folders for path in glob.glob(os.path.join(folder, "**", "*.so*"), recursive=True)]
    for chunk in range(0, len(objects), 64):
        said = subprocess.run(["ldd", *objects[chunk:chunk + 64]], capture_output=True, text=True).stdout
        for line in said.splitlines():
            path = (line.split("=>", 1)[1] if "=>" in line else line).split("(")[0].strip()
            if path.startswith("/") and os.path.exists(path) and not _within(path, folders):
                found.add(path)
    return sorted(found)


def layout(hide):
    """What a zygote is shown (exercises/jail.py): binds, folders shown whole (only where there
    is no ldd); libraries, the system's shared library files its Python and packages load;
    mirrored, the folders shown as copies (the standard library, the three packages) but for
    left_out (the site-packages, Python's own tests, the teacher's project if it lies there)."""
    system = [p for p in dict.fromkeys(("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/etc/ld.so.cache",
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
    stdlib = [p for p in sys.path if p and os.path.isdir(p) and not _within(p, places) and _within(p, system)]
    unused = [os.path.join(p, name) for p in stdlib for name in ("test", "site-packages", "dist-packages")
              if os.path.isdir(os.path.join(p, name))]      # Python's own tests (120 MB), every installed package
    left_out = places + [os.path.realpath(h) for h in hide] + unused
    found = libraries(tuple(stdlib + packages))                  # ldd once a grading run, not once a zygote
    mirrored = [p for p in stdlib if not any(p != q and _within(p, [q]) for q in stdlib)] + packages  # lib-dynload once
    return {"binds": system if found is None else [], "libraries": found or [], "mirrored": mirrored,
            "left_out": left_out, "packages_path": places, "stdlib": stdlib}


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
