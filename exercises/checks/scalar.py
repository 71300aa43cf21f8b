"""The checks of the scalar engine (autograd/scalar.py): Value's product rule and the
topological order, on graphs where values are used more than once, asymmetrically, and
upstream gradients are not 1."""


from exercises.checks.expected import expect
from exercises.checks.feedback import Judge, Wrong, mistake

# (case, leaf values, program: ("mul" | "add", i, j) or ("tanh", i) over the values so far)
GRAPHS = [
    ("a * b, a = 2, b = -3", (2.0, -3.0), (("mul", 0, 1),)),
    ("(a * b) * c, so a * b gets upstream gradient c = 5", (2.0, -3.0, 5.0), (("mul", 0, 1), ("mul", 3, 2))),
    ("x * x at x = 3", (3.0,), (("mul", 0, 0),)),
    ("(a * b) * a + b, a = 1.5, b = -0.7: each used twice, asymmetrically", (1.5, -0.7),
     (("mul", 0, 1), ("mul", 2, 0), ("add", 3, 1))),
    ("tanh((a * b) * (a + c)), a = 0.4, b = -1.2, c = 0.9", (0.4, -1.2, 0.9),
     (("mul", 0, 1), ("add", 0, 2), ("mul", 3, 4), ("tanh", 5))),
]
ASSIGNED = ("= instead of +=", "a Value used twice gets both contributions: add (+=) into .grad")
LEFT_OUT = ("one factor left out", "both factors get a gradient")
MUL_MISTAKES = {"assign": ASSIGNED, "assign_first": ASSIGNED, "assign_second": ASSIGNED,
                "no_upstream": ("out.grad dropped", "the chain rule multiplies by the gradient arriving at the product"),
                "own_factor": ("own factor instead of the other", "d(a*b)/da is b: each factor gets the OTHER's data"),
                "one_factor": LEFT_OUT, "other_factor_only": LEFT_OUT}


def build(leaves, program):
    """The Values of the program, leaves first."""
    from autograd.scalar import Value
    values = [Value(x) for x in leaves]
    for op, *args in program:
        values.append(values[args[0]] * values[args[1]] if op == "mul" else values[args[0]] + values[args[1]]
                      if op == "add" else values[args[0]].tanh())
    return values


def check_value_mul():
    judge = Judge()
    for case, leaves, program in GRAPHS:
        values = build(leaves, program)
        values[-1].backward()
        judge.compare("d(output)/d(each leaf) through the product rule", case, [v.grad for v in values[: len(leaves)]],
                      expect("scalar_grads", leaves, program, "right"),
                      [(*MUL_MISTAKES[k], expect("scalar_grads", leaves, program, k)) for k in MUL_MISTAKES])
    return "five graphs: upstream gradients other than 1, a Value used twice, asymmetric reuse"


NO_VISITED_SET = mistake("no visited set", "a Value reached by two paths is listed twice: keep a set of the Values "
                         "already visited")
LEAVES_LEFT_OUT = mistake("leaves left out", "the leaves (Values with no parents) belong in the order too")
BREADTH_FIRST = mistake("reversed breadth-first order", "reversing a breadth-first walk can put a Value before a "
                        "parent reached by a longer path: walk depth-first and append a Value once all its parents "
                        "are in")
RECURSION = mistake("recursion", "a recursive walk overflows Python's stack on a long chain: use an explicit stack")


def _ladder(rungs):
    """x -> (x*2, x+1) -> product -> ... rungs diamonds deep: 2^rungs paths to the root."""
    from autograd.scalar import Value
    x = start = Value(0.3)
    for _ in range(rungs):
        x = (x * 2.0) * (x + 1.0)
    return start, x


def _order_cases():
    from autograd.scalar import Value
    chain = Value(0.5)
    for _ in range(3000):
        chain = chain + 1.0
    return [("a single Value", Value(1.0)), (GRAPHS[0][0], build(*GRAPHS[0][1:])[-1]),
            (GRAPHS[3][0], build(*GRAPHS[3][1:])[-1]), (GRAPHS[4][0], build(*GRAPHS[4][1:])[-1]),
            ("12 diamonds in a row (4096 paths to the root)", _ladder(12)[1]), ("a chain of 3000 additions", chain)]


def _reversed_breadth_first(root):
    seen, queue, order = {id(root)}, [root], []
    while queue:
        node = queue.pop(0)
        order.append(node)
        for p in node.parents:
            if id(p) not in seen:
                seen.add(id(p))
                queue.append(p)
    return order[::-1]


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


def _judge_order(case, root, order):
    where = f"topological order of {case}"
    if len(order) != len({id(v) for v in order}):
        raise Wrong(f"{where}: {NO_VISITED_SET}")
    listed = {id(v) for v in order}
    missing = [v for i, v in _reachable(root).items() if i not in listed]
    if missing and all(not v.parents for v in missing):
        raise Wrong(f"{where}: {LEAVES_LEFT_OUT}")
    if missing:
        raise Wrong(f"{where}: {len(missing)} reachable Values are missing, e.g. {missing[0]!r}")
    if _valid(order) is None and order[-1] is root:
        return
    if [id(v) for v in order] == [id(v) for v in _reversed_breadth_first(root)]:
        raise Wrong(f"{where}: {BREADTH_FIRST}")
    if _valid(order[::-1]) is None:
        raise Wrong(f"{where}: {mistake('order reversed', 'parents come before their children, the output last')}")
    child, parent = _valid(order) or (root, order[-1])
    raise Wrong(f"{where}: {child!r} is listed before its parent {parent!r} (every Value must come after its parents, "
                "the output last)")


def check_topological_sort():
    from autograd.scalar import topological_order
    for case, root in _order_cases():
        try:
            order = list(topological_order(root))
        except RecursionError:
            raise Wrong(f"topological order of {case}: {RECURSION}") from None
        _judge_order(case, root, order)
    judge = Judge()
    for case, leaves, program in GRAPHS[3:]:
        values = build(leaves, program)
        values[-1].backward()
        judge.compare("gradients through backward(), which runs in reverse topological order", case,
                      [v.grad for v in values[: len(leaves)]], expect("scalar_grads", leaves, program, "right"))
    return "six graphs (one Value, asymmetric reuse, 4096 paths, a chain of 3000): order and gradients"
