"""The numpy definitions the checks compare with, and the classic wrong answers.

Teacher-only: a student copy does not hold this file (it would give the solutions away);
it holds their results, recorded (exercises/checks/expected.py).
"""

import numpy as np
