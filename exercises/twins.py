"""Twins: code outside an exercise's region that computes the exercise's answer too, cut
from a copy that hands the exercise out.

The faster kernel tiers compute what some regions ask (the loops tier's and the engine
room's softmax, the engine room's Adam step, ...): a learner could call them in place of
their own work. Each twin's code lies between `# BEGIN TWIN name [name...]` and
`# END TWIN`, naming the exercises it answers. A copy handing out one of them has the lines
between the markers replaced by

    raise NotImplementedError("twin of exercise NAME, cut from this copy, ...")

or, where the BEGIN line ends in "(dropped)", simply left out (a branch that takes a
faster path, such as the fused attention, is dropped and the code after it runs). The copy
names in autograd/kernels/twins_cut.py the kernels whose faster twins are cut
(catalog.TWIN_KERNELS), so that the kernel registry runs their numpy definitions
(autograd/kernels/reference.py, where the regions lie) whatever the tier. A copy that
hands none of them out keeps every twin, and the teacher's project is never changed.
"""

import os
import re

from exercises.catalog import TWIN_KERNELS, by_item
from exercises.regions import SKIPPED

BEGIN_TWIN = re.compile(r"^(\s*)# BEGIN TWIN ((?:\w+ ?)+?) ?(\(dropped\))?\s*$")
END_TWIN = re.compile(r"^\s*# END TWIN\s*$")
CUT_LIST = os.path.join("autograd", "kernels", "twins_cut.py")
CUT_SAYS = "twin of exercise {name}, cut from this copy, which hands the exercise out: write the exercise's region"


def cut_twins(text, handed_out):
    """text with each twin of an exercise in handed_out replaced by one line, at the BEGIN
    marker's indent, raising NotImplementedError that names the first such exercise (or
    left out, if marked "(dropped)"); the other twins keep their code and lose their markers."""
    out, twin = [], None
    for line in text.splitlines(keepends=True):
        if twin is None and (match := BEGIN_TWIN.match(line)):
            twin = (match.group(1), match.group(2).split(), match.group(3), [])
        elif twin is not None and END_TWIN.match(line):
            indent, names, dropped, lines = twin
            cut = [name for name in names if name in handed_out]
            if not cut:
                out += lines
            elif not dropped:
                out.append(f'{indent}raise NotImplementedError("{CUT_SAYS.format(name=cut[0])}")\n')
            twin = None
        elif twin is not None:
            twin[3].append(line)
        else:
            out.append(line)
    if twin is not None:
        raise ValueError(f"'# BEGIN TWIN {' '.join(twin[1])}' has no '# END TWIN'")
    return "".join(out)


def kernels_cut(handed_out):
    """{kernel name: [exercise]}: the kernels whose faster twins a copy handing out these is without."""
    return by_item(TWIN_KERNELS, handed_out)


def cut_twins_in_copy(copy, handed_out):
    """Cut the twins of the exercises handed out from every Python file of the copy, and
    write the list of kernels the registry then runs in numpy (only if there are any)."""
    for folder, subfolders, files in os.walk(copy):
        subfolders[:] = [s for s in subfolders if s not in SKIPPED]
        for name in files:
            path = os.path.join(folder, name)
            if not name.endswith(".py"):
                continue
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if "# BEGIN TWIN" in text:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(cut_twins(text, handed_out))
    if (kernels := kernels_cut(handed_out)):
        with open(os.path.join(copy, CUT_LIST), "w", encoding="utf-8") as f:
            f.write(cut_list(kernels))


def cut_list(kernels):
    """The text of CUT_LIST naming `kernels` ({kernel: [exercise]}), which the registry reads."""
    return (f'"""Written by `python -m exercises make`: the kernels whose faster twins this copy is without,\n'
            f'each with the exercises it answers (autograd/kernels/twins.py)."""\n\nTWINS_CUT = {kernels!r}\n')
