"""The kernels a student copy runs in numpy whatever the tier.

A copy of the project that hands out an exercise whose answer a faster tier computes too
(softmax in the loops tier and the engine room, Adam's step in the engine room, ...) is
made without that code (`python -m exercises make`: exercises/twins.py), and names those
kernels in twins_cut.py beside this file. The registry then runs their numpy definitions
(reference.py, where the exercises' regions lie), so that the learner's own code is what
runs. The teacher's project has no such file: every tier is whole.
"""


def kernels_cut():
    """{kernel name: [exercise]} of the kernels whose faster twins this copy is without ({} if none)."""
    try:
        from autograd.kernels.twins_cut import TWINS_CUT
    except ModuleNotFoundError:
        return {}
    return TWINS_CUT
