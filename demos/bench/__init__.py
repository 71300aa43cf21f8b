"""The benchmarks: our speed against numpy's BLAS and PyTorch on the CPU, measured in one run.

    python -m demos.bench.train [--size S|M|L] [--model gpt]   training steps, ours against PyTorch
    python -m demos.bench.kernels                              every kernel against numpy (and PyTorch)
    python -m demos.bench.attention                            fused against composed attention
    python -m demos.bench.threads                              one thread against two

Each prints its figures with a baseline measured in the same run, and writes them with
--json; `python -m demos.figures` runs them all into docs/RESULTS.md.  PyTorch comes from
the optional extra: pip install -e ".[bench]".  All but demos.bench.bpe measure the engine
room (autograd/engine_room/), and say so in one line if it is absent.
"""

import importlib.util
import sys


def need_engine_room(prog):
    """Stop with one line if the engine room (autograd/engine_room/), which benchmark `prog`
    measures, is absent: without it the kernels run on the loops tier, and there is nothing
    of its speed to measure."""
    if importlib.util.find_spec("autograd.engine_room") is None:
        sys.exit(f"{prog} measures the engine room (autograd/engine_room/), which is absent here "
                 "(the kernels run on the loops tier): restore that folder to run this benchmark")
