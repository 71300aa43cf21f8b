"""Gradescope's autograder: the .zip a teacher uploads, and the two scripts in it.

Gradescope unpacks the uploaded .zip into /autograder/source of an Ubuntu image, runs its
`setup.sh` there once, as root, to build the image, and then, for each submission (the
student's files in /autograder/submission), runs `run_autograder` and reads
/autograder/results/results.json. So the .zip is this project (the teacher's, with the
checks' definitions: Gradescope never shows it to students; only what grading reads, its
packages and exercises/) and the two scripts:

    python -m exercises autograder autograder.zip --only softmax attention

`setup.sh` makes a Python of at least 3.11 (Ubuntu 24.04's own; on 22.04 the python3.11
package) and a virtual environment with the project installed; `run_autograder` grades the
exercises named (all, without --only) with `python -m exercises check`, whose isolation
(exercises/jail.py) makes the child an unprivileged user, the teacher's files out of its sight.
"""

import os
import zipfile

from exercises.handout import HANDOUT
from exercises.regions import SKIPPED

SETUP = """#!/usr/bin/env bash
# Gradescope runs this once, as root, in /autograder/source, to build the autograder's image:
# a Python of at least 3.11 (Ubuntu 24.04 has one; 22.04 gets python3.11) and a virtual
# environment, /autograder/venv, with this project and its dependencies installed.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive          # no apt question (a time zone's) may hang the image's build
python=""
for candidate in python3.13 python3.12 python3.11 python3; do
    if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
        python=$candidate; break
    fi
done
if [ -z "$python" ]; then
    apt-get update && apt-get install -y python3.11 python3.11-venv
    python=python3.11
fi
if ! "$python" -c 'import ensurepip' 2>/dev/null; then            # Debian and Ubuntu keep venv's pip apart
    apt-get update && apt-get install -y "$python-venv"
fi
"$python" -m venv /autograder/venv
/autograder/venv/bin/pip install --upgrade pip
/autograder/venv/bin/pip install -e /autograder/source
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this in its image for each submission: the teacher's project is
# /autograder/source (setup.sh installed it into /autograder/venv), the student's copy
# /autograder/submission. check writes results.json whatever the submission holds (an
# exercise not passed, no project found: exit 1 or 2, and the results say so); only a grader
# that failed before writing it leaves none, and then the results say that. Gradescope reads
# results.json: exit 0.
autograder=${AUTOGRADER:-/autograder}
python="$autograder/venv/bin/python"
[ -x "$python" ] || python=python
results="$autograder/results/results.json"
mkdir -p "$autograder/results" && rm -f "$results"
chmod -R go-rwx "$autograder/source"     # the checks' definitions: root's only, whatever isolation the container allows
(cd "$autograder/source" && "$python" -m exercises check EXERCISES --project "$autograder/submission" --gradescope "$results" LIKE)
if [ ! -s "$results" ]; then
    failed="The grader failed before grading this submission (the autograder output says why): tell your teacher."
    echo "{\\"score\\": 0.0, \\"tests\\": [], \\"output\\": \\"$failed\\"}" > "$results"
fi
exit 0
"""


LIKE = "like"                      # in the .zip: the handed-out copy's exercises/handout.json (its versions)


def run_autograder(names, like=False):
    """The run_autograder script grading the exercises `names` (like: against the versions of
    the copy handed out, shipped in the .zip under LIKE)."""
    return RUN_AUTOGRADER.replace("EXERCISES", " ".join(names)).replace(
        " LIKE)", f' --like "$autograder/source/{LIKE}")' if like else ")")


SHIPPED = ("pyproject.toml", "README.md", "autograd", "nn", "transformer", "exercises")   # all grading reads


def write_autograder(root, path, names, like=None):
    """Write the .zip to upload to Gradescope: what grading reads of the project at root (its
    packages and exercises/, never a folder of submissions kept beside them, nor caches) and,
    at its top, setup.sh and run_autograder grading `names`; with `like` (the copy handed out),
    that copy's exercises/handout.json under LIKE, which run_autograder grades against (a
    version edited on a BEGIN line is then 'not yet'). Returns how many files it holds."""
    files = [name for name in SHIPPED if os.path.isfile(os.path.join(root, name))]
    for package in (name for name in SHIPPED if os.path.isdir(os.path.join(root, name))):
        for folder, subfolders, names_here in os.walk(os.path.join(root, package)):
            subfolders[:] = sorted(s for s in subfolders if s not in SKIPPED)
            files += [os.path.relpath(os.path.join(folder, name), root) for name in sorted(names_here)]
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for script, text in (("setup.sh", SETUP), ("run_autograder", run_autograder(names, like is not None))):
            info = zipfile.ZipInfo(script, date_time=(2026, 1, 1, 0, 0, 0))
            info.external_attr = 0o100755 << 16                 # a regular file, executable
            archive.writestr(info, text)
        for relative in files:
            archive.write(os.path.join(root, relative), relative)
        if like is not None:
            archive.write(os.path.join(like, HANDOUT), f"{LIKE}/{HANDOUT}".replace(os.sep, "/"))
    return len(files) + 2 + (like is not None)
