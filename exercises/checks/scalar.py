"""The checks of the scalar engine (autograd/scalar.py): Value's product rule and the
topological order, on graphs where values are used more than once, asymmetrically, and
upstream gradients are not 1."""

import numpy as np

from exercises.checks.expected import expect
from exercises.checks.feedback import FRESH, Judge, Wrong, mistake
from exercises.zygote import Crashed

# (case, leaf values, program: ("mul" | "add", i, j) or ("tanh", i) over the values so far)
GRAPHS = [
    ("a * b, a = 2, b = -3", (2.0, -3.0), (("mul", 0, 1),)),
    ("(a * b) * c, so a * b gets upstream gradient c = 5", (2.0, -3.0, 5.0), (("mul", 0, 1), ("mul", 3, 2))),
    ("(a * b + a) + b, a = 2, b = -3: each factor also used by a sum", (2.0, -3.0),
     (("mul", 0, 1), ("add", 2, 0), ("add", 3, 1))),
    ("x * x at x = 3", (3.0,), (("mul", 0, 0),)),
    ("(a * b) * a + b, a = 1.5, b = -0.7: each used twice, asymmetrically", (1.5, -0.7),
     (("mul", 0, 1), ("mul", 2, 0), ("add", 3, 1))),
    ("tanh((a * b) * (a + c)), a = 0.4, b = -1.2, c = 0.9", (0.4, -1.2, 0.9),
     (("mul", 0, 1), ("add", 0, 2), ("mul", 3, 4), ("tanh", 5))),
    ("y * y with y = x + x, x = 0.5: one Value is both factors", (0.5,), (("add", 0, 0), ("mul", 1, 1))),
    ("a * b, a = 0, b = 4: a factor of 0", (0.0, 4.0), (("mul", 0, 1),)),
]
REUSED, TANH, SQUARED = GRAPHS[4], GRAPHS[5], GRAPHS[6]
ASSIGNED = ("= instead of +=", "a Value used twice gets both contributions: add (+=) into .grad")
LEFT_OUT = ("one factor left out", "both factors get a gradient")
MUL_MISTAKES = {"assign": ASSIGNED, "assign_first": ASSIGNED, "assign_second": ASSIGNED,
                "no_upstream": ("out.grad dropped", "the chain rule multiplies by the gradient arriving at the product"),
                "own_factor": ("own factor instead of the other", "d(a*b)/da is b: each factor gets the OTHER's data"),
                "one_factor": LEFT_OUT, "other_factor_only": LEFT_OUT,
                "grad_not_data": ("grad used instead of data", "d(a*b)/da is b's value, other.data; other.grad is "
                                  "the gradient arriving at b, not b"),
                "out_data": ("out.data for out.grad", "the chain rule multiplies by the gradient arriving at the "
                             "product, out.grad, not by its value out.data"),
                "same_once": ("x * x counted once", "x * x uses x as both factors: run both updates even when self "
                              "is other, so d(x*x)/dx = 2x")}
VALUE_IN_GRAD = mistake("a Value added to .grad", "multiply by the factor's number, other.data: other itself is a "
                        "Value, and .grad holds a plain float")
DIVIDED = mistake("divided by a factor", "d(a*b)/da is b itself; out.data / a is the same only while a != 0, and "
                  "divides by zero at a = 0")


def check_value_mul(task):
    judge = Judge()
    for case, leaves, program in GRAPHS + [_random_dag(seed) for seed in FRESH]:
        try:
            found = task.call("value_grads", leaves, program, False)
        except ZeroDivisionError:
            raise Wrong(f"d(output)/d(each leaf) through the product rule, {case}: {DIVIDED}") from None
        if found["value_in_grad"]:
            raise Wrong(f"d(output)/d(each leaf) through the product rule, {case}: {VALUE_IN_GRAD}")
        judge.compare("d(output)/d(each leaf) through the product rule", case, found["grads"],
                      expect("scalar_grads", leaves, program, "right"),
                      [(*MUL_MISTAKES[k], expect("scalar_grads", leaves, program, k)) for k in MUL_MISTAKES])
    return "eight graphs: upstream gradients other than 1, a Value used twice, asymmetric reuse, a zero factor"


NO_VISITED_SET = mistake("no visited set", "a Value reached by two paths is listed twice: keep a set of the Values "
                         "already visited")
ROOT_LEFT_OUT = mistake("output left out", "the order ends with the Value backward starts from, the output itself")
LEAVES_LEFT_OUT = mistake("leaves left out", "the leaves (Values with no parents) belong in the order too")
BREADTH_FIRST = mistake("reversed breadth-first order", "reversing a breadth-first walk can put a Value before a "
                        "parent reached by a longer path: walk depth-first and append a Value once all its parents "
                        "are in")
EXPANDED_TWICE = mistake("a Value listed twice", "a Value can be pushed twice before it is first visited (y * y "
                         "pushes y twice): when you pop a Value already visited, skip it")
MARKED_AT_PUSH = mistake("visited when pushed", "a Value reached again by another path, while a parent of it is "
                        "still on the stack, is listed before that parent: mark a Value visited when it is popped "
                        "and expanded, not when it is pushed")
REVERSED_PREORDER = mistake("reversed preorder", "listing a Value when it is first reached and reversing the list "
                           "works on trees, not where a Value is reached by two paths: list a Value once all its "
                           "parents are in (append it when its parents are done)")
FIRST_REACHED = mistake("listed when first reached", "a walk that lists a Value when it first reaches it lists the "
                        "output first and a Value before its parents: list a Value once all its parents are in "
                        "(append it when its parents are done), the output last")
CLASSIC_WALKS = {"breadth_first": BREADTH_FIRST, "marked_at_push": MARKED_AT_PUSH, "preorder": REVERSED_PREORDER,
                 "first_reached": FIRST_REACHED}
RECURSION = mistake("recursion", "backward must work on deep graphs (a chain of thousands of Values), and a recursive "
                    "walk overflows Python's stack there (about 1000 calls deep): use an explicit stack")


def _ladder(rungs):
    """x -> (x*2, x+1) -> product -> ... rungs diamonds deep: 2^rungs paths to the root (the
    constants 2 and 1 are leaves of their own)."""
    program, x = [], 0
    for _ in range(rungs):
        first = 3 + len(program)
        program += [("mul", x, 1), ("add", x, 2), ("mul", first, first + 1)]
        x = first + 2
    return (0.3, 2.0, 1.0), tuple(program)


def _chain(length):
    """0.5 + 1 + 1 + ... : a chain of `length` additions, deeper than Python's stack."""
    return (0.5, 1.0), tuple(("add", 2 + i - 1 if i else 0, 1) for i in range(length))


# Graphs where a Value is reused asymmetrically, so a walk that marks Values visited when it
# pushes them lists one before a parent still on the stack: s = a + a; s * (b * s) and kin.
REUSE_GRAPHS = [
    ("s * (b * s) with s = a + a, a = 0.7, b = -1.3", (0.7, -1.3), (("add", 0, 0), ("mul", 1, 2), ("mul", 2, 3))),
    ("(b * s) * s with s = a + a, a = 0.7, b = -1.3", (0.7, -1.3), (("add", 0, 0), ("mul", 1, 2), ("mul", 3, 2))),
    ("s + tanh(s * b) with s = a * c, a = 0.6, b = 1.1, c = -0.8", (0.6, 1.1, -0.8),
     (("mul", 0, 2), ("mul", 3, 1), ("tanh", 4), ("add", 3, 5))),
]


def _random_dag(seed, leaves=3, ops=12):
    """(case, leaf values, program) of a seeded random graph whose ops reuse earlier Values."""
    r = np.random.default_rng(seed)
    program = []
    for i in range(leaves, leaves + ops):
        op = ("mul", "add", "tanh")[r.integers(3)]
        program.append((op, *map(int, r.integers(max(0, i - 5), i, 2)))[: 2 if op == "tanh" else 3])
    values = tuple(round(float(v), 3) for v in r.uniform(-1, 1, leaves))
    return f"a random graph of {leaves} leaves and {ops} ops (seed {seed})", values, tuple(program)


RANDOM_GRAPHS = [_random_dag(seed) for seed in range(6)]
ORDER_CASES = [GRAPHS[0], ("a single Value", (1.0,), ()), TANH, REUSED, SQUARED, *REUSE_GRAPHS, *RANDOM_GRAPHS,
               ("24 diamonds in a row (16,777,216 paths to the root: a walk without a visited set follows each)",
                *_ladder(24)),
               ("a chain of 3000 additions", *_chain(3000))]
WALKED = len(ORDER_CASES) - 2                # the classic walks are compared on the graphs before these two


class Graph:
    """The judge's own picture of a program's graph: each Value as its index, its parents' indices, its data."""

    def __init__(self, leaves, program):
        self.parents = [()] * len(leaves) + [tuple(args) for _, *args in program]
        self.data = list(leaves)
        for op, *args in program:
            a = self.data[args[0]]
            self.data.append(a * self.data[args[1]] if op == "mul" else a + self.data[args[1]] if op == "add"
                             else float(np.tanh(a)))
        self.root = len(self.parents) - 1

    def name(self, i):
        return f"Value(data={self.data[i]:.4g})" if 0 <= i < len(self.data) else "a Value not in the graph"

    def reachable(self):
        seen, stack = set(), [self.root]
        while stack:
            node = stack.pop()
            if node not in seen:
                seen.add(node)
                stack.extend(self.parents[node])
        return seen

    def misplaced(self, order):
        """(a Value, a parent of it listed after it or not at all), or None."""
        position = {v: i for i, v in enumerate(order)}
        return next(((v, p) for v in order for p in (self.parents[v] if v >= 0 else ())
                     if position.get(p, len(order)) > position[v]), None)

    def shared(self):
        """Whether some Value is a parent more than once (reachable by two paths)."""
        uses = [p for v in self.reachable() for p in self.parents[v]]
        return len(uses) != len(set(uses))


def _walks_matching(leaves, program, order, candidates):
    """The classic wrong walks among candidates, (walk, parents reversed?), that give exactly order."""
    walks = {(walk, reverse): expect("walk_order", leaves, program, walk, reverse)   # every walk's, so that a
             for walk in CLASSIC_WALKS for reverse in (False, True)}                  # copy records them all
    return {key for key in candidates if np.array_equal(order, walks[key])}


def _judge_order(case, graph, order, shared_passed, walks):
    """Raise Wrong unless order is a topological order of the graph; shared_passed: an
    earlier graph with a Value reachable by two paths came out right (so a visited set exists);
    walks: the classic wrong walks, (walk, parents reversed?), that gave the orders of
    every graph they are compared on."""
    where = f"topological order of {case}"
    if len(order) != len(set(order)):
        raise Wrong(f"{where}: {EXPANDED_TWICE if shared_passed else NO_VISITED_SET}")
    if -1 in order:
        raise Wrong(f"{where}: it lists a Value that is not in the graph (only the Values reachable from the output)")
    missing = sorted(graph.reachable() - set(order))
    if missing == [graph.root] and graph.parents[graph.root]:
        raise Wrong(f"{where}: {ROOT_LEFT_OUT}")
    if missing and all(not graph.parents[v] and v != graph.root for v in missing):
        raise Wrong(f"{where}: {LEAVES_LEFT_OUT}")
    if missing:
        raise Wrong(f"{where}: {len(missing)} reachable Values are missing, e.g. {graph.name(missing[0])}")
    if graph.misplaced(order) is None and order[-1] == graph.root:
        return
    if len({walk for walk, _ in walks}) == 1:
        raise Wrong(f"{where}: {CLASSIC_WALKS[next(iter(walks))[0]]}")
    if graph.misplaced(order[::-1]) is None:
        raise Wrong(f"{where}: {mistake('order reversed', 'parents come before their children, the output last')}")
    child, parent = graph.misplaced(order) or (graph.root, order[-1])
    raise Wrong(f"{where}: {graph.name(child)} is listed before its parent {graph.name(parent)} (every Value must "
                "come after its parents, the output last)")


def _orders(task, cases):
    """Each case's topological order from the child, or the exception it raised (raised again
    when that case's turn comes)."""
    found = []
    for _, leaves, program in cases:
        try:
            found.append([int(i) for i in task.call("order", leaves, program)])
        except Crashed:
            raise
        except Exception as err:                 # noqa: BLE001
            found.append(err)
    return found


def _judge_case(case, leaves, program, order, shared_passed, walks):
    """Judge one case's order (raising its exception, if it raised); whether the graph shares a Value."""
    if isinstance(order, RecursionError):
        raise Wrong(f"topological order of {case}: {RECURSION}")
    if isinstance(order, Exception):
        raise order
    graph = Graph(leaves, program)
    _judge_order(case, graph, order, shared_passed, walks)
    return shared_passed or graph.shared()


def check_topological_sort(task):
    cases = ORDER_CASES + [_random_dag(seed) for seed in FRESH]
    walked = _orders(task, cases[:WALKED])       # every walked graph's order first: all of them name a wrong walk
    walks = {(walk, reverse) for walk in CLASSIC_WALKS for reverse in (False, True)}
    for (_, leaves, program), order in zip(cases[:WALKED], walked):
        walks = _walks_matching(leaves, program, order, walks) if isinstance(order, list) else set()
    shared_passed = False
    for (case, leaves, program), order in zip(cases[:WALKED], walked):
        shared_passed = _judge_case(case, leaves, program, order, shared_passed, walks)
    for case in cases[WALKED:]:                  # the deep graphs one at a time: without a visited set, a time-out
        shared_passed = _judge_case(*case, _orders(task, [case])[0], shared_passed, set())
    judge = Judge()
    for case, leaves, program in (REUSED, TANH, SQUARED, *REUSE_GRAPHS, *RANDOM_GRAPHS, *map(_random_dag, FRESH)):
        judge.compare("gradients through backward(), which runs in reverse topological order (each product's "
                      "through your value_mul)", case,
                      task.call("value_grads", leaves, program)["grads"], expect("scalar_grads", leaves, program, "right"))
    return "sixteen graphs (one Value, asymmetric reuse, y * y, random graphs, 2^24 paths, a chain of 3000): order " \
        "and gradients"
