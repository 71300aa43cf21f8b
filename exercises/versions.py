"""The version of each exercise: a short hash of its solution and its check.

A student copy records, on each region's BEGIN line, the version it was handed. When the
exercise's solution or check changes later, its version changes, and a copy made before
is graded on the exercises it has at their versions; the others are "not in that copy".
The hash names a version; nothing of the solution can be read back from it.
"""

import hashlib
import inspect

from exercises.regions import regions_of


def versions(root):
    """{exercise name: version} of the project at root (the teacher's), every region's solution
    and the source of its check hashed together."""
    from exercises.checks import CHECKS
    found = {}
    for name, places in regions_of(root).items():
        digest = hashlib.sha256(name.encode())
        for _, _, body in places:
            digest.update(body.encode())
        if name in CHECKS:
            digest.update(inspect.getsource(CHECKS[name]).encode())
        found[name] = digest.hexdigest()[:16]
    return found
