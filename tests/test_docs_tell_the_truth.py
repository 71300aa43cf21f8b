"""What the README and the learning path count and claim, checked against the files and the code:
the number of steps, the notebooks listed, GPT-2's and Llama's configs' differences, and
which files of transformer/training/ to read and which to skip."""

import dataclasses
import os
import re

from transformer.families.decoder_only import gpt_config, llama_config

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUMBERS = {word: n for n, word in enumerate("zero one two three four five six seven eight nine ten eleven twelve "
                                            "thirteen fourteen fifteen".split())}


def read(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as f:
        return f.read()


def section(text, heading):
    """The text under the Markdown heading that starts with `heading`, up to the next of its level."""
    level = heading.split(" ")[0]
    return text.split(f"\n{heading}", 1)[1].split(f"\n{level} ", 1)[0]


def test_the_readme_counts_and_lists_the_learning_paths_steps():
    steps = [int(n) for n in re.findall(r"^## (\d+)\. ", read("docs", "LEARNING_PATH.md"), re.M)]
    assert steps == list(range(1, len(steps) + 1)) and len(steps) >= 10
    readme = section(read("README.md"), "## The learning path")
    said = re.search(r"takes (\w+) steps", readme).group(1)
    assert NUMBERS[said] == len(steps), f"the README says {said} steps; docs/LEARNING_PATH.md has {len(steps)}"
    assert [int(n) for n in re.findall(r"^(\d+)\. ", readme, re.M)] == steps


def test_the_readme_lists_every_notebook():
    notebooks = sorted(name for name in os.listdir(os.path.join(ROOT, "notebooks")) if name.endswith(".py"))
    listed = re.findall(r"\]\(notebooks/([\w.]+)\)", section(read("README.md"), "## Notebooks"))
    assert listed == notebooks, f"the README lists {listed}; notebooks/ holds {notebooks}"


def test_the_llama_step_names_every_field_where_the_configs_differ():
    gpt, llama = dataclasses.asdict(gpt_config(10)), dataclasses.asdict(llama_config(10))
    differ = {field for field in gpt if gpt[field] != llama[field]}
    assert {"norm", "activation", "feed_forward", "positional", "tie_weights"} <= differ     # the step's subject
    text = section(read("docs", "LEARNING_PATH.md"), "## 10. ")
    diff = text.split("```diff", 1)[1].split("```", 1)[0]
    for field in differ - {"d_ff"}:                       # d_ff follows from SwiGLU, said in its paragraph
        assert f"{field}={gpt[field]!r}".replace("'", '"') in diff, field
        assert f"{field}={llama[field]!r}".replace("'", '"') in diff, field
    assert "d_ff" in text and not any(gpt[field] != llama[field] for field in ("bias", "head_bias"))
    assert "Llama has no biases" not in text                # not a difference: gpt_config has none either


def test_transformer_training_says_which_files_to_read_and_which_to_skip():
    import transformer.training
    doc = transformer.training.__doc__
    reading, skipping = doc.split("Read, in this order")[1].split("Interop, to skip")
    files = {name for name in os.listdir(os.path.join(ROOT, "transformer", "training"))
             if name.endswith(".py") and name != "__init__.py"}
    named_to_read = set(re.findall(r"^\s+(\w+\.py) ", reading, re.M))
    named_to_skip = set(re.findall(r"^\s+(\w+\.py) ", skipping, re.M))
    assert {"loop.py", "seq2seq.py", "lm.py"} <= named_to_read and not named_to_read & named_to_skip
    assert named_to_read | named_to_skip == files, f"named: {sorted(named_to_read | named_to_skip)}; there: {sorted(files)}"
