"""Fails when a Function subclass anywhere in the project has no gradcheck case."""

import importlib
import pkgutil

import autograd
from autograd import Function

TEST_MODULES_WITH_CASES = ["tests.autograd.test_ops_gradcheck"]
PACKAGES = ["autograd", "nn", "transformer"]


def _all_subclasses(cls):
    found = set()
    for sub in cls.__subclasses__():
        found.add(sub)
        found |= _all_subclasses(sub)
    return found


def _import_package(name):
    try:
        package = importlib.import_module(name)
    except ModuleNotFoundError:
        return
    for info in pkgutil.walk_packages(package.__path__, name + "."):
        importlib.import_module(info.name)


def test_every_function_subclass_has_a_gradcheck_case():
    for name in PACKAGES:
        _import_package(name)
    covered = set()
    for module_name in TEST_MODULES_WITH_CASES:
        covered |= set(importlib.import_module(module_name).CASES)
    project_ops = {cls.__name__ for cls in _all_subclasses(Function)
                   if cls.__module__.split(".")[0] in PACKAGES}
    missing = sorted(project_ops - covered)
    assert not missing, f"ops without a gradcheck case: {missing}"
    assert autograd.Function is Function
