"""The figures are generated, never typed: docs/RESULTS.md is exactly what `python -m
demos.figures --collect` renders from docs/figures.json, the README's headline table and
log are that record's blocks, every headline figure appears in RESULTS.md, and the
hand-written docs stay short and carry no story of a machine's load."""

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
        "docs/RESULTS.md was edited by hand or not regenerated: python -m demos.figures --collect"


def test_readme_blocks_are_the_records_and_each_headline_figure_is_in_the_results(record):
    readme, results = read("README.md"), read("docs", "RESULTS.md")
    for name, body in _report.readme_blocks(record, figures.ORDER).items():
        assert _report.read_block(readme, name) == body, f"README's block {name!r} differs from docs/figures.json"
    headline = _report.read_block(readme, "headline").splitlines()[2:]
    assert len(headline) >= 5
    for row in headline:
        figure = row.split(" | ")[1]
        assert figure in results, f"headline figure {figure!r} is not in docs/RESULTS.md"


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
    found = [line for line in read(document).splitlines() if ANECDOTE.search(line)]
    assert not found, f"{document} describes a machine or its load (the results document's stamp does):\n" + \
        "\n".join(found)
