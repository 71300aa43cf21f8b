"""The figures are generated, never typed: docs/RESULTS.md is exactly what `python -m
demos.figures --render` renders from docs/figures.json, the README's headline table and
log are that record's blocks (the log with the machine it came from), every headline figure
appears in RESULTS.md, both say that bit for bit holds on one machine and why another CPU
differs, and the hand-written docs stay short, state no line count that has drifted, and
carry no story of a machine's load."""

import json
import os
import re

import pytest

from demos import _report, figures
from tests.helpers import ENGINE_ROOM

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAND_WRITTEN = ["README.md"] + (["autograd/engine_room/README.md"] if ENGINE_ROOM else []) + sorted(
    f"docs/{name}" for name in os.listdir(os.path.join(ROOT, "docs")) if name.endswith(".md") and name != "RESULTS.md")
ANECDOTE = re.compile(r"busier|quiet host|loaded host|busy host|shared host|this (?:project's )?machine|"
                      r"current machine|Ice Lake|Zen \d|EPYC|Xeon|previous stop|a busier day|host's load", re.I)


def read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


@pytest.fixture(scope="module")
def record():
    return json.loads(read("docs", "figures.json"))


def test_every_group_is_recorded_with_its_machine_and_date(record):
    assert set(record["groups"]) == set(figures.GROUPS), "run python -m demos.figures for the missing groups"
    for name, entry in record["groups"].items():
        assert entry["machine"] and re.fullmatch(r"\d{4}-\d\d-\d\d", entry["collected"]), name
        assert entry["items"], f"{name} records no figures"


def test_results_document_is_what_the_record_renders(record):
    assert read("docs", "RESULTS.md") == _report.render(record, figures.ORDER, figures.TITLES), \
        "docs/RESULTS.md was edited by hand or not regenerated: python -m demos.figures --render"


def test_readme_blocks_are_the_records_and_each_headline_figure_is_in_the_results(record):
    readme, results = read("README.md"), read("docs", "RESULTS.md")
    for name, body in _report.readme_blocks(record, figures.ORDER).items():
        assert _report.read_block(readme, name) == body, f"README's block {name!r} differs from docs/figures.json"
    headline = _report.read_block(readme, "headline").splitlines()[2:]
    assert len(headline) >= 5
    for row in headline:
        figure = row.split(" | ")[1]
        assert figure in results, f"headline figure {figure!r} is not in docs/RESULTS.md"


def test_the_readme_log_names_the_machine_it_came_from(record):
    """The quoted log ends with the CPU (and versions, and date) of the run that wrote it,
    as the record stamps it, and the README's own words say the log is one machine's."""
    readme = read("README.md")
    (entry,) = [entry for entry in record["groups"].values() if "readme_log" in entry]
    cpu = entry["machine"].split(",")[0]
    assert cpu and cpu[0].isalpha(), f"the record's machine stamp names no CPU: {entry['machine']!r}"
    last_line = _report.read_block(readme, "log").splitlines()[-1]
    assert last_line == f"Logged on {entry['machine']}, {entry['collected']}.", last_line
    prose = _without_generated_blocks(readme)
    assert "one machine's" in prose and "#bit-for-bit-on-one-machine" in prose


def test_results_and_readme_say_why_bits_differ_on_another_cpu():
    """RESULTS.md has the section the README links to, and it gives the reason: the vector
    kernels' summation order, and float addition's lack of associativity."""
    results = read("docs", "RESULTS.md")
    assert "\n## Bit for bit, on one machine\n" in results       # GitHub's anchor: #bit-for-bit-on-one-machine
    section = results.split("## Bit for bit, on one machine")[1].split("\n## ")[0]
    for claim in ("one machine", "kernels", "order", "not\nassociative"):
        assert claim in section, f"RESULTS.md's reproducibility section does not say {claim!r}"
    for document in ("README.md", "docs/RESULTS.md"):
        text = re.sub(r"\s+", " ", read(document))
        assert re.search(r"bit for bit on one machine (?:and|with one build of the) kernel", text), document


def test_every_image_shown_exists_and_comes_from_a_demo(record):
    produced = {item["image"].split("/")[-1] for entry in record["groups"].values()
                for item in entry["items"] if "image" in item}
    for document in ("README.md", "docs/RESULTS.md"):
        shown = set(re.findall(r"images/([\w.-]+\.png)", read(document)))
        assert shown, f"{document} shows no images?"
        assert all(os.path.exists(os.path.join(ROOT, "docs", "images", name)) for name in shown), document
        assert shown <= produced, f"{document} shows images no demo group produces: {sorted(shown - produced)}"


def test_readme_is_read_in_five_minutes():
    assert len(read("README.md").splitlines()) <= 250


@pytest.mark.parametrize("document", HAND_WRITTEN)
def test_hand_written_docs_tell_no_story_of_a_machine(document):
    """The generated blocks quote the record's machine stamp; the words around them name none."""
    found = [line for line in _without_generated_blocks(read(document)).splitlines() if ANECDOTE.search(line)]
    assert not found, f"{document} describes a machine or its load (the results document's stamp does):\n" + \
        "\n".join(found)


LINE_COUNT = re.compile(r"`([\w/]+\.py)`[^.`]*?\b(\d+) lines")


@pytest.mark.parametrize("document", HAND_WRITTEN + ["notebooks/" + name for name in sorted(
    os.listdir(os.path.join(ROOT, "notebooks"))) if name.endswith(".py")])
def test_a_files_length_stated_in_the_docs_is_its_length(document):
    """`path.py` ... N lines: within a tenth of the file's length today (better: no number)."""
    for path, stated in LINE_COUNT.findall(read(document)):
        actual = len(read(path).splitlines())
        assert abs(actual - int(stated)) <= actual / 10, f"{document} says {path} has {stated} lines; it has {actual}"


def test_the_line_count_pattern_finds_a_stated_length():
    assert LINE_COUNT.findall("read `autograd/scalar.py` (about 150 lines)") == [("autograd/scalar.py", "150")]


def _without_generated_blocks(text):
    """text with each block `python -m demos.figures` writes removed (markers and body)."""
    return re.sub(re.escape(_report.BEGIN.format("X")).replace("X", r"\w+") + r".*?" +
                  re.escape(_report.END.format("X")).replace("X", r"\w+"), "", text, flags=re.S)


@pytest.mark.parametrize("machine,cpu", [("AMD EPYC, 2 cores, 2 Numba threads", "AMD EPYC"),
                                         ("2-core Intel Xeon (Ice Lake, AVX-512), as recorded then",
                                          "2-core Intel Xeon (Ice Lake, AVX-512)"),
                                         ("Apple M2 (8 cores)", "Apple M2 (8 cores)")])
def test_the_headline_names_the_whole_cpu_with_its_parentheses(machine, cpu):
    assert _report.cpu_and_date({"machine": machine, "collected": "2026-12-01"}) == f"{cpu}, 2026-12-01"
