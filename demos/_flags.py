"""Command-line flags made from the configs (a config dataclass, or a function such as
gpt_config), so that every default lives once: in the config.  A flag the user did not give
is absent from the parsed arguments (its default shows in --help only), so that a resumed
run can tell what the user asked for."""

import argparse
import inspect
import json
import os
import re
import sys
import traceback
import typing


class CommandLine(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (a user's mistake: see fail), not the
    usage followed by the error."""

    def error(self, message):
        fail(self.prog, f"{message} (python -m {self.prog} --help lists the flags)")

    def parse_args(self, args=None, namespace=None):
        """The arguments; an --out that names a file, not a folder, is refused here, before
        anything runs (the demo would fail when it first writes, perhaps after training)."""
        parsed = super().parse_args(args, namespace)
        out = getattr(parsed, "out", None)
        if isinstance(out, str) and os.path.exists(out) and not os.path.isdir(out):
            fail(self.prog, f"--out: {out} is a file; expected a folder to write into (made if missing)")
        return parsed


def command_line(prog, doc):
    """The parser of the command `python -m prog`, its help the module's docstring."""
    return CommandLine(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def integer_at_least(low):
    """An argparse type: an integer >= low (a seed >= 0, a count >= 1)."""
    def integer(text):
        value = int(text)                          # argparse: "invalid integer value: 'x'"
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {value}")
        return value
    return integer


def a_path(text):
    """An argparse type: a path that is not empty (an empty --hf "" would read as a flag not
    given and fail later in a traceback)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    return text


def a_file_to_write(text):
    """An argparse type: a path to write a file to, refused at once if it is empty or a
    folder (else the run would fail only at its end, when it writes)."""
    if os.path.isdir(a_path(text)):
        raise argparse.ArgumentTypeError(f"{text} is a folder; give a file name in it")
    return text


def number(ok, expected):
    """An argparse type: a float for which ok(value) holds, e.g. number(lambda x: x > 0, "> 0")."""
    def parse(text):
        value = float(text)                        # argparse: "invalid parse value: 'x'"
        if not ok(value):
            raise argparse.ArgumentTypeError(f"must be {expected}, got {value}")
        return value
    return parse


def add_config_flags(parser, config, names, rename=None, choices=None, helps=None):
    """A --flag for each parameter of `config` (a dataclass or a function) named in `names`:
    its default is the parameter's, its type the annotation's (int for int | None; else the
    default's type); its
    name is the parameter's with '-' for '_', or rename[name]; a bool gets --flag / --no-flag."""
    parameters = inspect.signature(config).parameters
    rename, choices, helps = rename or {}, choices or {}, helps or {}
    for name in names:
        parameter = parameters[name]
        kind = type(parameter.default) if parameter.annotation is inspect.Parameter.empty else parameter.annotation
        kind = next((t for t in typing.get_args(kind) if t is not type(None)), kind)    # int | None: int
        flag = "--" + rename.get(name, name.replace("_", "-"))
        help_text = f"{helps[name]} " if name in helps else ""
        options = dict(dest=name, default=argparse.SUPPRESS, help=f"{help_text}(default: {parameter.default})")
        if kind is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, **options)
        else:
            parser.add_argument(flag, type=kind, choices=choices.get(name), **options)


def given(args, names):
    """{field: value} of the flags among `names` that the user gave."""
    return {name: getattr(args, name) for name in names if hasattr(args, name)}


def refuse_contradictions(prog, asked, saved, allowed, rename=None):
    """Exit (fail) if a flag in `asked` ({field: value}) contradicts the resumed run's
    `saved` config (a dict), unless the field is one of `allowed` (it may change on resume)."""
    rename = rename or {}
    for name, value in asked.items():
        if name not in allowed and name in saved and saved[name] != value:
            flag = "--" + rename.get(name, name.replace("_", "-"))
            fail(prog, f"{flag} {value} contradicts the resumed run's {name} = {saved[name]!r}; a resumed run "
                       f"goes on as it was saved (leave {flag} out, or start a new run with --out)")


def fail_config(prog, error, flags):
    """Exit (fail) with a config's error in the words of the command line (flags: {config
    field: flag name}): "TrainConfig: max_steps must be ..." becomes "--steps must be ...",
    and "d_model=30" becomes "--d-model 30"."""
    def flag(field):
        return f"--{flags[field]}" if field in flags else field

    message = re.sub(r"^\w+Config: ", "", str(error))
    message = re.sub(r"\b(\w+)=('[^']*'|[^\s,;)\]]+)",                        # field=value
                     lambda m: f"{flag(m[1])} {m[2].strip(chr(39))}" if m[1] in flags else m[0], message)
    fail(prog, re.sub(r"(?<![-\w])(\w+)(?= must | \d)", lambda m: flag(m[1]), message))   # field must / field 3


def refuse_finished(prog, flag, asked, state):
    """Exit (fail) if a resumed run is asked to stop at a step it has passed already (asked:
    the --steps / --max-iters the user gave, or None)."""
    done = len(json.loads(str(state["history"]))["step"])
    if asked is not None and asked <= done:
        fail(prog, f"{flag} {asked}: the resumed run has trained {done} already; give more to train on")


TRACEBACK_VARIABLE = "DEMOS_TRACEBACK"


def counted(count, noun):
    """'1 iteration', '2000 iterations': a count with its noun, in the plural unless 1."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def fail(prog, message):
    """A user's mistake: one line on stderr, exit status 2 (as argparse's own errors).

    With the environment variable DEMOS_TRACEBACK=1 the line is followed by the traceback
    of the exception being handled, for when the mistake may be a bug after all."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    if os.environ.get(TRACEBACK_VARIABLE) == "1" and sys.exc_info()[1] is not None:
        traceback.print_exc()
    sys.exit(2)
