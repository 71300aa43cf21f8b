"""What the README and the learning path count and claim, checked against the files and the code:
the number of steps, the notebooks listed, GPT-2's and Llama's configs' differences, and
which files of transformer/training/ to read and which to skip, and that the project's own words
are defined in docs/GLOSSARY.md, linked before a page first uses one."""

import dataclasses
import os
import re

import pytest

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


def glossary_terms():
    """The words docs/GLOSSARY.md defines, from its headings ("Exercise and region": both)."""
    headings = re.findall(r"^### (.+)$", read("docs", "GLOSSARY.md"), re.M)
    return sorted({word.lower() for heading in headings for word in heading.split(" and ")} - {"composed", "exercise"})


def test_the_glossary_defines_the_words_the_docs_use_of_their_own():
    terms = glossary_terms()
    assert {"classroom", "engine room", "tier", "kernel registry", "twin", "region", "quick lane", "task registry",
            "student copy", "judge"} <= set(terms), terms


@pytest.mark.parametrize("document", ["README.md", "docs/LEARNING_PATH.md", "docs/TEACHING.md", "docs/STUDENTS.md"])
def test_a_document_links_the_glossary_where_it_first_uses_one_of_its_words(document):
    """The first link to the glossary comes no later than the paragraph of the first word of
    ours a learner meets there (a word in `code` or in a path is not counted: it is a name)."""
    lines = read(*document.split("/")).split("\n")
    paragraph = [sum(not line.strip() for line in lines[:n]) for n in range(len(lines))]
    prose = [re.sub(r"`[^`]*`|\([^)\s]*\)|\[[^\]]*\]\([^)]*GLOSSARY[^)]*\)", "", line) for line in lines]
    used = [(n, term) for term in glossary_terms() for n, line in enumerate(prose)
            if re.search(rf"\b{re.escape(term)}s?\b", line, re.I)]
    linked = [n for n, line in enumerate(lines) if "GLOSSARY.md" in line]
    assert linked, f"{document} never links docs/GLOSSARY.md"
    first_use = min(used)
    assert paragraph[linked[0]] <= paragraph[first_use[0]], \
        f"{document} uses {first_use[1]!r} on line {first_use[0] + 1}, before its first glossary link " \
        f"(line {linked[0] + 1})"
