"""What a check says when an answer is wrong: the property checked, the smallest failing
case, expected against got and, when the answer is a classic wrong one, that mistake by
name ("[mistake: NAME] why"). A mistake is named only when the answer equals what that
mistake gives on this very case, and that differs from the right answer."""

import numpy as np

from exercises.child_text import mark


def said(value):
    """A number or shape of the child's answer, quoted in a message: marked as the child's
    (exercises/child_text.py), so that the teacher's grade shows it as "…" where the child
    held solutions (an answer's shape can spell text as well as an exception can)."""
    return mark(str(value), 200)


class Wrong(Exception):
    """The learner's answer is wrong; the message says how."""


# Seeds drawn anew for each teacher's grading run (exercises/grading.py): every check adds cases
# from them after its fixed ones, so that no table of answers to the fixed cases (a copy holds
# their results, exercises/checks/expected.npz) can pass. Empty in a copy and when recording.
FRESH = []


def cases(seeds=(0, 1, 2)):
    """One seeded generator per seed: every check tries several."""
    return [np.random.default_rng(seed) for seed in seeds]


def with_fresh(items, again=-1):
    """[(seed, item)]: each item with its index as its seed, then the item `again` once more
    with each seed drawn for this grading run (FRESH)."""
    return list(enumerate(items)) + [(seed, items[again]) for seed in FRESH]


def _as_array(got, what, case):
    try:
        return np.asarray(got.data if hasattr(got, "data") and not isinstance(got, np.ndarray) else got, dtype=float)
    except (TypeError, ValueError):
        raise Wrong(f"{what}, {case}: returned {type(got).__name__}, expected an array of numbers") from None


def _same(a, b, atol, rtol):
    return a.shape == b.shape and np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True)


def tolerance(x):
    """The compare tolerances for a case whose inputs are x: float64's own precision for
    float64 inputs (an answer computed in float32 and returned as float64 is wrong there by
    about 1e-7, as much as the default tolerances allow), the defaults for float32."""
    return {"atol": 1e-12, "rtol": 1e-9} if np.asarray(x).dtype == np.float64 else {}


def mistake(name, why):
    return f"[mistake: {name}] {why}"


def untouched(what, case, found):
    """found["out"], from a probe that also said whether the code wrote into its inputs
    (found["changed"]): raising Wrong if it did, as a kernel's inputs are its caller's arrays,
    still in use after the call."""
    if found["changed"]:
        raise Wrong(f"{what}, {case}: " + mistake("input changed in place", "the caller still uses the arrays it "
                                                  "passes in: compute into new arrays, not into them"))
    return found["out"]


def require_dtype(what, case, got, dtype):
    """Raise Wrong unless got (an array or a Tensor) has the given dtype."""
    found = np.asarray(got.data if hasattr(got, "data") and not isinstance(got, np.ndarray) else got).dtype
    if found != dtype:
        raise Wrong(f"{what}, {case}: " + mistake("dtype changed", f"{np.dtype(dtype)} in, {found} out: keep the "
                                                  "input's dtype (a float32 model stays float32)"))


class Judge:
    """Compares a check's cases in turn, smallest first. A case the answer gets right rules
    out every mistake that would have got it wrong, so a later failure names a mistake only
    if the answer is consistent with it on every case so far, and it alone matches. (A
    mistake may come in several spellings, listed under one name: each is ruled out alone.)"""

    def __init__(self):
        self.ruled_out = set()

    def compare(self, what, case, got, expected, mistakes=(), atol=1e-6, rtol=1e-5):
        """Raise Wrong unless got equals expected. mistakes: [(name, why, the value that
        mistake gives on this case)]."""
        got, expected = _as_array(got, what, case), np.asarray(expected, dtype=float)
        mistakes = [((what, position, name), why, np.asarray(value, dtype=float))
                    for position, (name, why, value) in enumerate(mistakes)]       # one name, several spellings
        if _same(got, expected, atol, rtol):
            self.ruled_out |= {key for key, _, value in mistakes if not _same(value, expected, atol, rtol)}
            return
        matching = [(key[2], why) for key, why, value in mistakes if key not in self.ruled_out
                    and _same(got, value, atol, rtol) and not _same(value, expected, atol, rtol)]
        if len({name for name, _ in matching}) == 1:
            raise Wrong(f"{what}, {case}: {mistake(*matching[0])}")
        raise Wrong(f"{what}, {case}: {difference(got, expected, atol, rtol)}")


def difference(got, expected, atol=1e-6, rtol=1e-5):
    """'expected shape ..., got ...' or 'k of n elements differ; the worst, at i: expected e, got g'."""
    if got.shape != expected.shape:
        return f"expected shape {expected.shape}, got {said(got.shape)}"
    close = np.isclose(got, expected, atol=atol, rtol=rtol, equal_nan=True)
    errors = np.where(np.isnan(got) != np.isnan(expected), np.inf, np.abs(np.nan_to_num(got - expected)))
    worst = np.unravel_index(np.argmax(np.where(close, -1, errors)), got.shape)
    return (f"{int((~close).sum())} of {got.size} elements differ; the worst, at {tuple(map(int, worst))}: "
            f"expected {expected[worst]:.6g}, got {said(format(got[worst], '.6g'))}")
