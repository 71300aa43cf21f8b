"""Importing some of the project's files from texts instead of from disk.

A check's child (exercises/child.py) gives the project a student's regions by swapping
function code (exercises/hotpatch.py); where that cannot be done (a region that reaches
module level, say), it imports the project afresh, the files holding the student's regions
read from their spliced texts by the finder below, every other file from the child's tree.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys


class OverrideFinder(importlib.abc.MetaPathFinder):
    """Imports the files named in `overrides` ({absolute path: source text}) from that text
    instead of from disk (whether or not the file is on disk), and none of those whose text
    is None (not in the project as made); every other module as usual."""

    def __init__(self, overrides):
        self.overrides = overrides

    def _origin(self, fullname, path):
        """The overridden file that would be module `fullname`, on disk or not, or None."""
        last = fullname.rpartition(".")[2]
        candidates = [os.path.join(entry, *parts) for entry in (path or sys.path)
                      for parts in ((last, "__init__.py"), (last + ".py",))]
        return next((c for c in candidates if c in self.overrides), None)

    def find_spec(self, fullname, path, target=None):
        origin = self._origin(fullname, path)
        if origin is None:
            return None                                   # the usual finders' business
        if self.overrides[origin] is None:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        package = [os.path.dirname(origin)] if origin.endswith("__init__.py") else None
        loader = TextLoader(fullname, origin, self.overrides[origin])
        return importlib.util.spec_from_file_location(fullname, origin, loader=loader,
                                                      submodule_search_locations=package)


class TextLoader(importlib.machinery.SourceFileLoader):
    """A source loader that reads a module's code from a string, never from a cached .pyc."""

    def __init__(self, fullname, path, text):
        super().__init__(fullname, path)
        self.text = text

    def get_code(self, fullname):
        return compile(self.text, self.path, "exec", dont_inherit=True)
