"""How much classroom code one GPT training step runs: the distinct lines a learner could step through.

    NUMBA_DISABLE_JIT=1 python -m demos.bench.lines [--layers 1] [--d-model 16] [--json out.json]

Builds a small GPT (composed attention: the ops a learner steps through), runs one warm-up
training step (forward, backward, clipping, AdamW), then traces one more with sys.settrace
and counts the distinct (file, line) pairs it executes in this project's files outside
autograd/engine_room/, and separately those in autograd/engine.py.  With the JIT off the
registry chooses the loops tier, whose kernels run as the Python they are, so their lines
count too.  The model's size changes how often lines run, not which: a small one is enough.
"""

import os
import sys

import numpy as np

from demos._flags import a_file_to_write, command_line
from demos._results import write_json

PROJECT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINE_ROOM = os.path.join(PROJECT, "autograd", "engine_room") + os.sep
ENGINE = os.path.join(PROJECT, "autograd", "engine.py")
THIS = os.path.abspath(__file__)


def parse_args(argv=None):
    parser = command_line("demos.bench.lines", __doc__)
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--d-model", type=int, default=16)
    parser.add_argument("--block-size", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--json", type=a_file_to_write)
    return parser.parse_args(argv)


def gpt_step(args):
    """One training step of a small seeded GPT on one fixed batch, as a function."""
    from autograd import manual_seed
    from transformer.families.decoder_only import DecoderOnly, gpt_config
    from transformer.training.lm import LMTrainConfig, step_functions

    cfg = LMTrainConfig(block_size=args.block_size, batch_size=args.batch_size)
    manual_seed(cfg.seed)
    vocab = 11
    model = DecoderOnly(gpt_config(vocab, args.block_size, args.layers, args.heads, args.d_model, attention="composed"))
    step = step_functions(model, cfg)[0]
    rng = np.random.default_rng(0)
    x, y = (rng.integers(0, vocab, (args.batch_size, args.block_size)) for _ in range(2))
    return lambda: step(x, y, cfg.lr)


def lines_run(step):
    """{file: set of line numbers} of this project's files that step() executes."""
    seen = {}

    def trace(frame, event, arg):
        path = frame.f_code.co_filename
        if not path.startswith(PROJECT + os.sep) or "site-packages" in path or path == THIS:
            return None                                  # not ours (a venv inside the project is not): callees trace anew
        if event == "line":
            seen.setdefault(path, set()).add(frame.f_lineno)
        return trace

    sys.settrace(trace)
    try:
        step()
    finally:
        sys.settrace(None)
    return seen


def count(seen):
    """The figures: distinct lines outside the engine room, their files, those in engine.py."""
    classroom = {path: lines for path, lines in seen.items() if not path.startswith(ENGINE_ROOM)}
    return {"lines": sum(map(len, classroom.values())), "files": len(classroom),
            "engine_py_lines": len(classroom.get(ENGINE, ())),
            "by_file": {os.path.relpath(path, PROJECT): len(lines) for path, lines in sorted(classroom.items())}}


def main(argv=None):
    args = parse_args(argv)
    import numba
    from autograd import kernels
    if not numba.config.DISABLE_JIT or kernels.tier() != "loops":
        sys.exit("demos.bench.lines: run with NUMBA_DISABLE_JIT=1 (the loops tier, as a learner steps through it)")
    step = gpt_step(args)
    step()                                               # warm-up: what only a first step does is not counted
    result = count(lines_run(step))
    for path, lines in result["by_file"].items():
        print(f"  {lines:4d}  {path}")
    print(f"{result['lines']} distinct lines in {result['files']} files outside autograd/engine_room/; "
          f"{result['engine_py_lines']} in autograd/engine.py")
    if args.json:
        write_json(args.json, result)
    return result


if __name__ == "__main__":
    main()
