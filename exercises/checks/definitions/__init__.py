"""The definitions the checks compare with (teacher-only: not in a student copy).

numeric: the numpy definitions of the kernels (softmax, log-softmax, LayerNorm's backward, Adam)
and what each classic wrong answer gives; engine: the same for the scalar and tensor engines;
layers: for the layers and attention; decoding: reference decoders on the checks' stand-in
models; training: the end-to-end run's reference, a tiny model trained in numpy.
"""

from exercises.checks.definitions.decoding import *  # noqa: F401,F403
from exercises.checks.definitions.engine import *  # noqa: F401,F403
from exercises.checks.definitions.layers import *  # noqa: F401,F403
from exercises.checks.definitions.numeric import *  # noqa: F401,F403
from exercises.checks.definitions.training import *  # noqa: F401,F403
