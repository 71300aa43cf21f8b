"""Every notebook of notebooks/ runs top to bottom without an error: in a Jupyter kernel when
the notebooks extra is installed (as in CI), else as the plain script a percent-format
notebook also is; and each is kept as jupytext percent-format source, with no outputs."""
import glob
import importlib.util
import os
import subprocess
import sys

import pytest

from tests.helpers import ENGINE_ROOM, ENGINE_ROOM_ABSENT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.py")))
HAS_JUPYTER = all(importlib.util.find_spec(name) for name in ("jupytext", "nbclient", "ipykernel"))


def test_the_learning_path_has_five_notebooks_in_percent_format():
    assert len(NOTEBOOKS) >= 5
    for path in NOTEBOOKS:
        with open(path) as f:
            text = f.read()
        assert "format_name: percent" in text or "formats: py:percent" in text, path
        assert text.count("# %%") >= 5, f"{path}: too few cells"


def run_in_kernel(path):
    """The notebook executed in a fresh kernel; returns the executed notebook."""
    import jupytext
    from nbclient import NotebookClient
    notebook = jupytext.read(path)
    NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": ROOT}}).execute()
    return notebook


TRAINING = ("04_transformer_on_reverse.py", "05_gpt_on_text.py")       # each trains a model for hundreds of steps
TOO_SLOW_ON_THE_LOOPS = pytest.mark.skipif(not ENGINE_ROOM, reason=ENGINE_ROOM_ABSENT + ", where this notebook's "
                                           "training outlasts a cell's 10 minutes")


@pytest.mark.parametrize("path", [pytest.param(path, marks=TOO_SLOW_ON_THE_LOOPS if os.path.basename(path) in TRAINING
                                                else ()) for path in NOTEBOOKS], ids=os.path.basename)
def test_notebook_runs_top_to_bottom(path):
    if HAS_JUPYTER:
        notebook = run_in_kernel(path)           # raises CellExecutionError, with the cell, on any error
        outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
        assert not [o for o in outputs if o.output_type == "error"]
        assert any("image/png" in o.get("data", {}) for o in outputs), "every notebook shows a picture"
    else:
        run = subprocess.run([sys.executable, path], cwd=ROOT, capture_output=True, text=True,
                             env={**os.environ, "MPLBACKEND": "Agg"})
        assert run.returncode == 0, run.stderr[-3000:]
