"""The README states what the demos wrote: every claim `python -m demos.figures` recorded
in docs/figures.json is in README.md word for word, and every image it shows exists."""

import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(*path):
    with open(os.path.join(ROOT, *path)) as f:
        return f.read()


def test_every_recorded_figure_is_stated_in_the_readme():
    from demos.figures import GROUPS
    record, readme = json.loads(read("docs", "figures.json")), read("README.md")
    assert set(record["groups"]) == set(GROUPS), "run python -m demos.figures for the missing groups"
    missing = [f"{group}/{key}: {text}" for group, entry in record["groups"].items()
               for key, text in entry["claims"].items() if text not in readme]
    assert not missing, "README.md differs from the demos' figures (python -m demos.figures):\n" + "\n".join(missing)


def test_every_image_the_readme_shows_exists_and_comes_from_a_demo():
    record, readme = json.loads(read("docs", "figures.json")), read("README.md")
    shown = set(re.findall(r"docs/images/([\w.-]+\.png)", readme))
    produced = {name for entry in record["groups"].values() for name in entry["images"]}
    assert shown, "the README shows no images?"
    assert all(os.path.exists(os.path.join(ROOT, "docs", "images", name)) for name in shown)
    assert shown <= produced, f"images no demo group produces: {sorted(shown - produced)}"
