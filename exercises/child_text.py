"""Text that came from a check's child: marked where it enters the judge, shown or hidden
where the grade's message is made.

The judge composes every message of a grade itself, except where it quotes what the
student's code said: an exception's message and its type's name. In the teacher's grade the
child also held the solutions of the exercises its check needs (grading.NEEDS), which its
code could read and spell into such a text in any encoding (the lines withheld from messages
catch only the plain ones). So the child's texts are marked when they arrive (`mark`), the
checks read them as usual (`plain`: naming a mistake from a numpy message still works), and
`shown` replaces them by "…" where the child held solutions, pointing to the student's own
check, which runs in their copy, with no solution but theirs, and shows them whole. The
judge marks the child's numbers it quotes too (an answer's shape, its worst value:
checks/feedback.said), and what its own code raised reading an answer. What still follows
from the child, counts, an index, the place of an exception (a file of the project and a
line number), carries some tens of bits a message, not a solution.
"""

import os
import re

START, END = "\u27e6", "\u27e7"                  # ⟦ ⟧: printable, so that a repr of the text keeps them too
MARKED = re.compile(f"{START}[^{END}]*(?:{END}|\\Z)")
PLACE = re.compile(r" \(in (\w[\w/]*\.py) line (\d{1,9})\)")
PROJECT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def mark(text, limit):
    """The child's text, cut to limit characters, marked as the child's."""
    return START + str(text)[:limit].replace(START, "").replace(END, "") + END


def marked(value):
    """The child's answer with every string in it marked (dict keys aside: the judge reads
    them by its own names), so that no message quotes one unmarked, whatever path it takes."""
    if isinstance(value, str):
        return mark(value, 4000)
    if isinstance(value, dict):
        return {key: marked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [marked(item) for item in value]
    return value


def plain(text):
    """The text with the marks taken out: what the child said, as it said it."""
    return str(text).replace(START, "").replace(END, "")


def place(where):
    """' (in FILE line N)' if the child's where names a file of the project (so it can carry
    no text of the child's choosing), else ''."""
    found = PLACE.fullmatch(str(where))
    return found[0] if found and os.path.isfile(os.path.join(PROJECT, found[1])) else ""


def shown(message, hide, exercise):
    """The message as the student sees it: the child's texts in it whole, or (hide: its child
    held other exercises' solutions) each as "…", said once where to read them."""
    if not hide or START not in message:
        return plain(message)
    return plain(MARKED.sub("…", message)) + (f" (…: what your code said, shown by your own check: "
                                               f"python -m exercises check {exercise})")
