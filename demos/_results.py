"""Writing a benchmark's figures to the --json file it was given."""

import json
import os


def write_json(path, result):
    """result as indented JSON at path, creating its directory."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=2)
