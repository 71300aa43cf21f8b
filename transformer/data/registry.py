"""Every task the encoder-decoder training loop knows, by name.

A task is a data set object with: `src_vocab`, `tgt_vocab`, `max_output_len`,
`stream(batch_size, seed)` (an endless iterator of tasks.Batch with a `.rng`),
`heldout(size, seed)` (a Batch), `src_label(token)` / `tgt_label(token)` (how tokens are
written) and `encode_source(text)` (a typed source as token ids, for `demos.train --decode`).
tasks.ToyTask and scan.ScanTask are the two kinds.

Adding a task:
- a toy task over the symbols a, b, c, ...: `register_toy_task("sort", np.sort)`; the
  answer may have any length;
- any other data: `register_task(name, make)` with make(train_config) -> a task object.
Then `python -m demos.train --task my_module:NAME` imports my_module (from the current
folder, or anywhere on the Python path), which registers NAME, and trains on it; or add the
registration here to make `--task NAME` work without the module part.
"""

import importlib

from transformer.data import scan, tasks

TASKS = {}


def register_task(name, make):
    """Make `name` trainable: make(train_config) returns the task object."""
    TASKS[name] = make


def register_toy_task(name, answer):
    """A toy task whose answer to the source symbols (an int array) is answer(symbols)."""
    tasks.ANSWERS[name] = answer
    register_task(name, lambda cfg: tasks.ToyTask(name, cfg.num_symbols, cfg.min_len, cfg.max_len))


def find_task(spec):
    """The maker of the task `spec` names: a registered name, or 'module:name' for a task
    that `module` registers when imported."""
    module, _, name = spec.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise ValueError(f"task {spec!r}: cannot import module {module!r} ({err})") from None
        if name not in TASKS:
            raise ValueError(f"task {spec!r}: importing {module!r} registered no task {name!r}; registered tasks: "
                             f"{sorted(TASKS)}")
    elif name not in TASKS:
        raise ValueError(f"unknown task {spec!r}; expected one of {sorted(TASKS)}, or my_module:name for a task "
                         "your module registers")
    return TASKS[name]


def make_task(cfg):
    """The task object for a TrainConfig (cfg.task names it: see find_task)."""
    return find_task(cfg.task)(cfg)


for _name, _answer in list(tasks.ANSWERS.items()):
    register_toy_task(_name, _answer)
for _split in scan.SPLITS:
    register_task(f"scan-{_split}", lambda cfg, split=_split: scan.ScanTask(split, cfg.seed))
