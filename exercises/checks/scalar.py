"""The checks of the scalar engine (autograd/scalar.py): Value's product rule and the
topological order, on graphs where values are used more than once, asymmetrically, and
upstream gradients are not 1."""

import numpy as np

from exercises.checks.expected import expect
from exercises.checks.feedback import Judge, Wrong, mistake

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


def build(leaves, program):
    """The Values of the program, leaves first."""
    from autograd.scalar import Value
    values = [Value(x) for x in leaves]
    for op, *args in program:
        values.append(values[args[0]] * values[args[1]] if op == "mul" else values[args[0]] + values[args[1]]
                      if op == "add" else values[args[0]].tanh())
    return values


def check_value_mul():
    from autograd.scalar import Value
    judge = Judge()
    for case, leaves, program in GRAPHS:
        values = build(leaves, program)
        try:
            values[-1].backward()
        except ZeroDivisionError:
            raise Wrong(f"d(output)/d(each leaf) through the product rule, {case}: {DIVIDED}") from None
        if any(isinstance(v.grad, Value) for v in values):
            raise Wrong(f"d(output)/d(each leaf) through the product rule, {case}: {VALUE_IN_GRAD}")
        judge.compare("d(output)/d(each leaf) through the product rule", case, [v.grad for v in values[: len(leaves)]],
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
CLASSIC_WALKS = {"breadth_first": BREADTH_FIRST, "marked_at_push": MARKED_AT_PUSH, "preorder": REVERSED_PREORDER}
RECURSION = mistake("recursion", "backward must work on deep graphs (a chain of thousands of Values), and a recursive "
                    "walk overflows Python's stack there (about 1000 calls deep): use an explicit stack")


def _ladder(rungs):
    """x -> (x*2, x+1) -> product -> ... rungs diamonds deep: 2^rungs paths to the root."""
    from autograd.scalar import Value
    x = start = Value(0.3)
    for _ in range(rungs):
        x = (x * 2.0) * (x + 1.0)
    return start, x


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


def _order_cases():
    """[(case, its Values, the output last, leaves, program)], leaves and program None where no
    program makes the graph."""
    from autograd.scalar import Value
    chain = Value(0.5)
    for _ in range(3000):
        chain = chain + 1.0
    programs = [GRAPHS[0], ("a single Value", (1.0,), ()), TANH, REUSED, SQUARED, *REUSE_GRAPHS, *RANDOM_GRAPHS]
    return [(case, build(leaves, program), leaves, program) for case, leaves, program in programs] + [
        ("12 diamonds in a row (4096 paths to the root)", [_ladder(12)[1]], None, None),
        ("a chain of 3000 additions", [chain], None, None)]


def _walks_matching(case, order, candidates):
    """The classic wrong walks among candidates, (walk, parents reversed?), that give exactly
    order on the case's graph; none where no program makes the graph."""
    _, values, leaves, program = case
    if program is None:
        return set()
    walks = {(walk, reverse): expect("walk_order", leaves, program, walk, reverse)   # every walk's, so that a
             for walk in CLASSIC_WALKS for reverse in (False, True)}                  # copy records them all
    index = {id(v): i for i, v in enumerate(values)}
    got = [index.get(id(v), -1) for v in order]
    return {key for key in candidates if np.array_equal(got, walks[key])}


def _reachable(root):
    seen, stack = {}, [root]
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen[id(node)] = node
            stack.extend(node.parents)
    return seen


def _valid(order):
    position = {id(v): i for i, v in enumerate(order)}
    return next(((v, p) for v in order for p in v.parents if position.get(id(p), len(order)) > position[id(v)]), None)


def _shared(root):
    """Whether some Value of the graph is a parent more than once (reachable by two paths)."""
    uses = [id(p) for v in _reachable(root).values() for p in v.parents]
    return len(uses) != len(set(uses))


def _judge_order(case, root, order, shared_passed, walks):
    """Raise Wrong unless order is a topological order of root's graph; shared_passed: an
    earlier graph with a Value reachable by two paths came out right (so a visited set exists);
    walks: the classic wrong walks, (walk, parents reversed?), that gave this order and
    every earlier one."""
    where = f"topological order of {case}"
    if len(order) != len({id(v) for v in order}):
        raise Wrong(f"{where}: {EXPANDED_TWICE if shared_passed else NO_VISITED_SET}")
    listed = {id(v) for v in order}
    missing = [v for i, v in _reachable(root).items() if i not in listed]
    if len(missing) == 1 and missing[0] is root and root.parents:
        raise Wrong(f"{where}: {ROOT_LEFT_OUT}")
    if missing and all(not v.parents and v is not root for v in missing):
        raise Wrong(f"{where}: {LEAVES_LEFT_OUT}")
    if missing:
        raise Wrong(f"{where}: {len(missing)} reachable Values are missing, e.g. {missing[0]!r}")
    if _valid(order) is None and order[-1] is root:
        return
    if len({walk for walk, _ in walks}) == 1:
        raise Wrong(f"{where}: {CLASSIC_WALKS[next(iter(walks))[0]]}")
    if _valid(order[::-1]) is None:
        raise Wrong(f"{where}: {mistake('order reversed', 'parents come before their children, the output last')}")
    child, parent = _valid(order) or (root, order[-1])
    raise Wrong(f"{where}: {child!r} is listed before its parent {parent!r} (every Value must come after its parents, "
                "the output last)")


def check_topological_sort():
    from autograd.scalar import topological_order
    shared_passed, walks = False, {(walk, reverse) for walk in CLASSIC_WALKS for reverse in (False, True)}
    for graph in _order_cases():
        case, root = graph[0], graph[1][-1]
        try:
            order = list(topological_order(root))
        except RecursionError:
            raise Wrong(f"topological order of {case}: {RECURSION}") from None
        walks = _walks_matching(graph, order, walks)
        _judge_order(case, root, order, shared_passed, walks)
        shared_passed = shared_passed or _shared(root)
    judge = Judge()
    for case, leaves, program in (REUSED, TANH, SQUARED, *REUSE_GRAPHS, *RANDOM_GRAPHS):
        values = build(leaves, program)
        values[-1].backward()
        judge.compare("gradients through backward(), which runs in reverse topological order", case,
                      [v.grad for v in values[: len(leaves)]], expect("scalar_grads", leaves, program, "right"))
    return "sixteen graphs (one Value, asymmetric reuse, y * y, random graphs, 4096 paths, a chain of 3000): order " \
        "and gradients"
