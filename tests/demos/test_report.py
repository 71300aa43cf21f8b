"""demos/_report.py renders the results document and the README's blocks from a record alone."""
import pytest

from demos import _report

RECORD = {"groups": {
    "a": {"commands": ["python -m demos.a"], "machine": "CPU X, 2 cores", "collected": "2026-01-02",
          "headline": [["A learns", "99.0% exact match", "python -m demos.a"]],
          "items": [_report.table("Runs", ["seed", "exact"], [[0, "99.0%"], [1, "98.5%"]], "python -m demos.a --seed N",
                                  "A note."),
                    _report.code("Log", "step 1\nstep 2\n"), _report.image("Picture", "a.png")],
          "readme_log": "step 1\nstep 2"},
    "b": {"commands": ["python -m demos.b"], "machine": "CPU Y", "collected": "2026-01-03",
          "headline": [["B is fast", "0.90x", "python -m demos.b"]], "items": []}}}


def test_render_gives_each_group_its_stamp_commands_tables_logs_and_images():
    text = _report.render(RECORD, ["b", "a"], {"a": "Group A", "b": "Group B"})
    assert text.index("## Group B") < text.index("## Group A")
    assert "Measured on CPU X, 2 cores, 2026-01-02. Commands:" in text
    assert "| seed | exact |\n|---|---|\n| 0 | 99.0% |\n| 1 | 98.5% |\n\nA note." in text
    assert "`python -m demos.a --seed N`" in text and "```\nstep 1\nstep 2\n```" in text
    assert "![Picture](images/a.png)" in text
    assert ("| B is fast | 0.90x | `python -m demos.b` | CPU Y, 2026-01-03 |\n"
            "| A learns | 99.0% exact match | `python -m demos.a` | CPU X, 2026-01-02 |") in text


def test_readme_blocks_are_spliced_between_their_markers_and_read_back():
    blocks = _report.readme_blocks(RECORD, ["a", "b"])
    assert blocks["log"] == "```\nstep 1\nstep 2\n```\nLogged on CPU X, 2 cores, 2026-01-02."    # the log's machine
    readme = ("intro\n" + _report.BEGIN.format("log") + "\nold\n" + _report.END.format("log") + "\noutro\n")
    spliced = _report.splice(readme, "log", blocks["log"])
    assert spliced.startswith("intro\n") and spliced.endswith("\noutro\n") and "old" not in spliced
    assert _report.read_block(spliced, "log") == blocks["log"]
    assert _report.splice(spliced, "log", blocks["log"]) == spliced


def test_splice_refuses_a_readme_without_the_block():
    with pytest.raises(SystemExit, match="no block"):
        _report.splice("no markers here\n", "headline", "| x |")
