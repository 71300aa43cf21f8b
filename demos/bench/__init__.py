"""The benchmarks: our speed against numpy's BLAS and PyTorch on the CPU, measured in one run.

    python -m demos.bench.train [--size S|M|L] [--model gpt]   training steps, ours against PyTorch
    python -m demos.bench.kernels                              every kernel against numpy (and PyTorch)
    python -m demos.bench.attention                            fused against composed attention
    python -m demos.bench.threads                              one thread against two
    python -m demos.bench.generate [--threads 1|2]             SmolLM2-135M-shaped generation, ours against transformers

Each prints its figures with a baseline measured in the same run, and writes them with
--json; `python -m demos.figures` runs them all into docs/RESULTS.md.  PyTorch comes from
the optional extra: pip install -e ".[bench]".  All but demos.bench.bpe measure the engine
room (autograd/engine_room/), and say so in one line if it is absent, or if a student copy
cut kernels from it (those that answer exercises it hands out: exercises/twins.py).
"""

import glob
import importlib.util
import os
import re
import sys

CUT = re.compile(r"twin of exercise (\w+), cut from this copy")


def cut_from_this_copy(*paths):
    """The exercises a student copy cut code from these files for (exercises/twins.py),
    sorted, or []: read as text, importing nothing."""
    cut = set()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            cut.update(CUT.findall(f.read()))
    return sorted(cut)


def need_engine_room(prog):
    """Stop with one line if the engine room (autograd/engine_room/), which benchmark `prog`
    measures, is absent: without it the kernels run on the loops tier, and there is nothing
    of its speed to measure.  Looked for as a folder, importing nothing: importing autograd
    imports numpy, whose BLAS then starts its threads before the benchmark has fixed how
    many (demos/bench/_threads.py), and numpy's baseline would run on every core."""
    spec = importlib.util.find_spec("autograd")            # a top-level name: finding it imports nothing
    folders = (spec.submodule_search_locations or []) if spec else []
    rooms = [os.path.join(folder, "engine_room") for folder in folders
             if os.path.isfile(os.path.join(folder, "engine_room", "__init__.py"))]
    if not rooms:
        sys.exit(f"{prog} measures the engine room (autograd/engine_room/), which is absent here "
                 "(the kernels run on the loops tier): restore that folder to run this benchmark")
    if (cut := cut_from_this_copy(*sorted(glob.glob(os.path.join(rooms[0], "*.py"))))):
        sys.exit(f"{prog} measures the whole engine room, which needs the teacher's project: this student copy "
                 f"cuts its kernels that answer exercises {', '.join(cut)}")
