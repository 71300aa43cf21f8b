"""An exercise's version changes with its contract (what its solution computes, what its
check asks), never with a comment, a docstring, blank lines or a reflowed line: tidying a
solution keeps every copy already handed out valid."""
import importlib.util
import os
import shutil
import textwrap

import pytest

from exercises.regions import SKIPPED, SOURCES, read, regions_of, rewrite
from exercises.versions import check_contract, definitions_in, normal_form, versions
from tests.exercises.helpers import ROOT

SOLUTION = '''\
        rows = x.reshape(-1, x.shape[-1])                       # (N, in)
        out = kernels.matmul(rows, weight.T)
        if bias is not None:
            out += bias * 0.001
        return np.where(out > 0, out, "zero")
'''
# the same meaning, laid out differently
SAME = {
    "a comment line and a trailing comment": SOLUTION.replace("        if bias", "        # the bias, broadcast\n"
                                                              "        if bias  ").replace("0.001", "0.001  # tiny"),
    "blank lines": SOLUTION.replace("\n", "\n\n"),
    "a docstring and a string statement": '        """Rows times W^T, plus b."""\n' + SOLUTION.replace(
        "        if bias", '        "then the bias"\n        if bias'),
    "a call reflowed over lines": SOLUTION.replace("kernels.matmul(rows, weight.T)",
                                                   "kernels.matmul(\n            rows,\n   weight.T,\n        )"),
    "another indentation": textwrap.indent(textwrap.dedent(SOLUTION), "  "),
    "the same number and string spelled otherwise": SOLUTION.replace("0.001", "1e-3").replace('"zero"', "'zero'"),
}
# a different meaning
CHANGED = {
    "an operator": SOLUTION.replace("out += bias", "out -= bias"),
    "a number": SOLUTION.replace("0.001", "0.01"),
    "an int for a float": SOLUTION.replace("x.shape[-1]", "x.shape[-1.0]"),
    "an argument": SOLUTION.replace("weight.T", "weight"),
    "a string": SOLUTION.replace('"zero"', '"nil"'),
    "a comparison": SOLUTION.replace("is not None", "is None"),
    "two statements swapped": "".join(SOLUTION.splitlines(keepends=True)[i] for i in (1, 0, 2, 3, 4)),
    "a line moved into the block": SOLUTION.replace("        return np.where", "            return np.where"),
}


@pytest.mark.parametrize("how", SAME)
def test_layout_comments_and_docstrings_keep_the_normal_form(how):
    assert SAME[how] != SOLUTION
    assert normal_form(SAME[how]) == normal_form(SOLUTION)


@pytest.mark.parametrize("how", CHANGED)
def test_a_changed_meaning_changes_the_normal_form(how):
    assert CHANGED[how] != SOLUTION
    assert normal_form(CHANGED[how]) != normal_form(SOLUTION)


LEAVING_ITS_BLOCK = '''\
        for _ in range(max_len):
            ys = step(ys)
            if done.all():
                break
    return ys[:, 1:]
'''


def test_a_region_that_goes_back_out_of_its_block_is_parsed_not_compared_as_text():
    tree = normal_form(LEAVING_ITS_BLOCK)
    assert tree.startswith("Module(") and "Return(" in tree and "For(" in tree
    assert normal_form(LEAVING_ITS_BLOCK.replace("    return", "    # done\n\n    return")) == tree
    assert normal_form(LEAVING_ITS_BLOCK.replace("break", "continue")) != tree
    assert normal_form(LEAVING_ITS_BLOCK.replace("    return", "        return")) != tree       # now inside the loop


def test_code_that_does_not_parse_is_compared_without_blanks_or_comments():
    broken = "    x = (1,\n"
    assert normal_form(broken) == "x = (1,"
    assert normal_form("    # why\n\n" + broken + "   \n") == "x = (1,"
    assert normal_form("    x = (2,\n") != normal_form(broken)


def _copy_sources(destination):
    for package in SOURCES:
        shutil.copytree(os.path.join(ROOT, package), destination / package,
                        ignore=lambda _, names: [n for n in names if n in SKIPPED])


def _edit_regions(root, edit):
    """Rewrite every region body of the copy at root with edit(name, index, indent, body) -> body."""
    seen = {}

    def replace(indent, name, version, lines):
        index = seen[name] = seen.get(name, -1) + 1
        return [lines[0], edit(name, index, indent, "".join(lines[1:-1])), lines[-1]]

    for path in dict.fromkeys(f for places in regions_of(root).values() for f, _, _ in places):
        text = rewrite(read(root, path), replace)
        with open(os.path.join(root, path), "w") as f:
            f.write(text)


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    """A copy of the teacher's source packages and its versions."""
    root = tmp_path_factory.mktemp("teacher")
    _copy_sources(root)
    return root, versions(str(root))


def test_comments_blank_lines_and_string_statements_in_every_region_keep_every_version(teacher, tmp_path):
    root, before = teacher
    _copy_sources(tmp_path)

    def tidy(name, index, indent, body):
        return (f"{indent}# {name}: a hint for the reader, added later\n\n{indent}'''and a note'''\n"
                + body.replace("\n", "  # ...\n", 1) + "\n")

    _edit_regions(tmp_path, tidy)
    assert read(tmp_path, "autograd/scalar.py") != read(root, "autograd/scalar.py")
    assert len(before) == len(regions_of(ROOT)) and versions(str(tmp_path)) == before


CONTRACT_CHANGES = [("value_mul", 0, "self.grad += other.data", "self.grad += self.data"),
                    ("softmax", 0, "axis=-1", "axis=0"),
                    ("linear", 0, "out += bias", "out -= bias"),
                    ("causal_mask", 0, "np.tril", "np.triu"),
                    ("attention", 1, "1.0 / math.sqrt", "2.0 / math.sqrt")]


@pytest.mark.parametrize("name, which, old, new", CONTRACT_CHANGES)
def test_a_changed_expression_in_a_region_changes_that_exercise_s_version_only(teacher, tmp_path, name, which,
                                                                               old, new):
    root, before = teacher
    _copy_sources(tmp_path)

    def change(region, index, indent, body):
        if (region, index) != (name, which):
            return body
        assert old in body, f"{old!r} is no longer in {name}'s solution: update the test"
        return body.replace(old, new, 1)

    _edit_regions(tmp_path, change)
    after = versions(str(tmp_path))
    assert after[name] != before[name]
    assert {n: v for n, v in after.items() if n != name} == {n: v for n, v in before.items() if n != name}


CHECK_MODULE = '''\
"""Checks of a made-up exercise."""
CASES = [(1, 2), (3, 4)]
TOLERANCE = 1e-6


def expect(name, *args):
    return args


def twice(x):
    return x * 2


def unrelated():
    return "not used by the check"


def check_thing(task):
    """Each case: twice a plus b, against the definition."""
    for a, b in CASES:
        assert task.call("probe_doubled", a) + b > TOLERANCE, expect("doubled", twice(a))
    return "ok"
'''
PROBES = '''\
def probe_doubled(x):
    from project import double
    return double(x)


def doubled(x):
    return "a probe of the same name as a definition"


def probe_unused(x):
    return x
'''
DEFINITIONS = '''\
def doubled(x):
    return 2 * x


def tripled(x):
    return 3 * x
'''
# (file, old, new): a rewording keeps the check's contract; an edit below REWORDED asks something else
CHECK_EDITS = {
    "the check's docstring": ("check", '"""Each case: twice a plus b, against the definition."""', '"""Reworded."""'),
    "a comment in the check": ("check", '    return "ok"', '    # all cases passed\n    return "ok"'),
    "a function the check does not use": ("check", '"not used by the check"', '"still not used"'),
    "a definition the check does not name": ("definitions", "3 * x", "x * 3"),
    "a probe the check does not name": ("probes", "return x\n", "return [x]\n"),
    "a case list reflowed": ("check", "CASES = [(1, 2), (3, 4)]", "CASES = [\n    (1, 2),\n    (3, 4),\n]"),
    "the check's code": ("check", "a) + b", "a) - b"),
    "its cases": ("check", "(3, 4)", "(3, 5)"),
    "its tolerance": ("check", "1e-6", "1e-5"),
    "a helper it calls": ("check", "return x * 2\n", "return x * 2.0\n"),
    "the definition it names by a string": ("definitions", "2 * x", "2 * x + 1"),
    "the probe it names by a string": ("probes", "return double(x)", "return double(x + 0.5)"),
    "a probe named as a definition it names": ("probes", "a probe of the", "another probe of the"),
}
REWORDED = list(CHECK_EDITS)[:6]


def _contract(folder, edit=None):
    """check_contract of check_thing in a module written to folder (with edit (file, old, new) applied)."""
    texts = {"check": CHECK_MODULE, "definitions": DEFINITIONS, "probes": PROBES}
    if edit:
        file, old, new = edit
        assert old in texts[file]
        texts[file] = texts[file].replace(old, new)
    os.makedirs(folder / "definitions")
    (folder / "definitions" / "numeric.py").write_text(texts["definitions"])
    (folder / "checks_of_thing.py").write_text(texts["check"])
    (folder / "probes.py").write_text(texts["probes"])
    spec = importlib.util.spec_from_file_location(f"checks_of_thing_{abs(hash(str(folder)))}",
                                                  folder / "checks_of_thing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return check_contract(module.check_thing, definitions_in(str(folder / "definitions"), str(folder / "probes.py")))


@pytest.mark.parametrize("how", CHECK_EDITS)
def test_a_check_reworded_keeps_its_contract_and_one_asking_something_else_changes_it(tmp_path, how):
    same = _contract(tmp_path / "edited", CHECK_EDITS[how]) == _contract(tmp_path / "as-was")
    assert same == (how in REWORDED), f"{how}: {'kept' if same else 'changed'} the contract"


def test_every_exercise_has_a_version_of_sixteen_hex_digits_and_every_region_is_parsed(teacher):
    root, found = teacher
    unparsed = [(name, path) for name, places in regions_of(ROOT).items() for path, _, body in places
                if not normal_form(body).startswith("Module(")]
    assert unparsed == []
    assert set(found) == set(regions_of(ROOT))
    assert all(len(v) == 16 and int(v, 16) >= 0 for v in found.values())
    assert len(set(found.values())) == len(found)
