"""Library code that computes what an exercise asks now calls the exercise's region, so a
copy handing it out holds no second solution: each such function still gives what it gave
(teacher side), and in a copy handing everything out raises the exercise's
NotImplementedError (it really goes through the region); no causal mask is built by hand."""
import importlib.util
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from autograd import Tensor, no_grad
from autograd.kernels import reference
from transformer.families.decoder_only import DecoderOnly, gpt_config, llama_config


def generate_before(model, prompt, steps, use_cache):
    """DecoderOnly.generate's greedy loop as it was before it called greedy_decode (the reference)."""
    tokens, window, cache, logged = np.asarray(prompt), model.config.max_len, None, []
    with no_grad():
        for _ in range(steps):
            context = tokens[:, -window:]
            if not use_cache:
                logits = model(context)
            elif cache is None or tokens.shape[1] > window:
                cache = model.new_cache()
                logits = model(context, cache)
            else:
                logits = model(context[:, len(cache):], cache)
            logged.append(logits.data[:, -1])
            tokens = np.concatenate([tokens, logits.data[:, -1].argmax(-1)[:, None]], axis=1)
    return tokens, np.stack(logged, axis=1)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_generate_gives_the_tokens_and_logits_it_gave_before(seed, use_cache):
    r = np.random.default_rng(seed)
    make = gpt_config if seed % 2 == 0 else llama_config
    model = DecoderOnly(make(13, block_size=6, n_layer=2, n_head=2, n_embd=8, dropout=0.0))
    model.eval()
    prompt = r.integers(0, 13, (int(r.integers(1, 4)), int(r.integers(1, 6))))
    steps = int(r.integers(3, 11))                       # past block_size 6 on most seeds: the window slides
    tokens, logits = model.generate(prompt, steps, use_cache=use_cache, return_logits=True)
    want_tokens, want_logits = generate_before(model, prompt, steps, use_cache)
    assert tokens.shape == (len(prompt), prompt.shape[1] + steps)
    np.testing.assert_array_equal(tokens, want_tokens)
    np.testing.assert_array_equal(logits, want_logits)
    np.testing.assert_array_equal(model.generate(prompt, steps, temperature=0.7, top_k=1, use_cache=use_cache),
                                  want_tokens)          # top_k 1 is greedy too



def graph_nodes_before(root_node):
    """engine.graph_nodes as it was before it called the scalar engine's topological_order:
    depth-first by hand, into a node's last input first (the reference)."""
    def inputs_of(node):
        return iter([t._node for t in reversed(node.inputs) if t._node is not None])
    order, seen, path = [], {root_node}, [(root_node, inputs_of(root_node))]
    while path:
        node, inputs = path[-1]
        following = next((n for n in inputs if n not in seen), None)
        if following is None:
            order.append(node)
            path.pop()
        else:
            seen.add(following)
            path.append((following, inputs_of(following)))
    return order


def random_graph(r):
    """A Tensor built by 6..40 random ops over 1..4 leaves, each op taking one or two earlier
    Tensors (leaves or results, so that results are used several times, by one op twice too)."""
    made = [Tensor(r.standard_normal((2, 3)), requires_grad=i == 0 or bool(r.integers(0, 4)))
            for i in range(r.integers(1, 5))]
    ops = (lambda a, b: (a + b).tanh(), lambda a, b: a * b.tanh(), lambda a, b: a - b * 0.5,
           lambda a, b: (a @ b.transpose(0, 1)).tanh() @ a, lambda a, b: a.tanh() + b.sigmoid())
    for _ in range(r.integers(6, 41)):
        a, b = (made[int(i)] for i in r.integers(max(0, len(made) - 6), len(made), 2))
        made.append(ops[int(r.integers(len(ops)))](a, a if r.random() < 0.15 else b))
    return made[-1] + sum(made[int(i)] for i in r.integers(0, len(made), 3))       # several outputs feed the root


@pytest.mark.parametrize("seed", range(12))
def test_the_tensor_engine_s_order_is_the_one_it_had_node_for_node(seed):
    from autograd.engine import graph_nodes
    root = random_graph(np.random.default_rng(seed))
    want = graph_nodes_before(root._node)
    assert len(want) > 6
    assert graph_nodes(root._node) == want                  # the same nodes in the same order: the same sums


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("seed", range(3))
def test_log_sum_exp_from_log_softmax_is_bit_for_bit_the_shifted_formula(dtype, seed):
    """lse = max x - max log_softmax(x) is m + log sum exp(x - m), m the row max (0 for a row
    of -inf), to the bit: odd widths, logits spread to 1e4, masked entries and fully masked rows."""
    r = np.random.default_rng(seed)
    for width in (1, 2, 7, 33):
        x = (r.standard_normal((6, width)) * 10.0 ** r.integers(0, 5, (6, 1))).astype(dtype)
        x[r.random(x.shape) < 0.3] = -np.inf
        x[0] = -np.inf
        m = np.max(x, axis=-1, keepdims=True)
        m[m == -np.inf] = 0
        with np.errstate(divide="ignore"):
            want = (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[:, 0]
        np.testing.assert_array_equal(reference.log_sum_exp(x), want)
        got = Tensor(x).logsumexp(-1).data                  # the op: the chosen tier's log_softmax, its rounding
        np.testing.assert_allclose(got, want, rtol=1e-6 if dtype == np.float32 else 1e-13, atol=0)


PROBE = '''
import importlib.util, json, re, sys
import numpy as np
from autograd import Tensor, engine
from autograd.kernels import reference

r = np.random.default_rng(0)
q, k, v, dout = (r.standard_normal((2, 3, 4)) for _ in range(4))
mask = r.random((2, 3, 3)) < 0.7


def attention_weights():
    from transformer.attention import attention_weights
    attention_weights(q, k, mask)


def reference_attention_backward():
    reference.attention_backward(q, k, v, mask, 0.5, q, q[..., 0], dout)


def uniform_softmax(probe):
    def run():
        reference.softmax = lambda x: np.full_like(x, 1 / x.shape[-1])     # a stand-in, to get past softmax
        probe()
    return run


def past_the_scores(probe):
    def run():
        reference._masked_scores = lambda q, k, mask, scale: q @ np.swapaxes(k, -1, -2)   # a stand-in for attention's
        probe()                                                                          # twin, cut from the copy
    return run


def logsumexp():
    Tensor(q).logsumexp(-1)


def kv_cache_mask():
    from transformer.kv_cache import KVCache
    KVCache(1).extend(np.ones((2, 3), bool))


def greedy_generate():
    from transformer.families.decoder_only import DecoderOnly, gpt_config
    DecoderOnly(gpt_config(7, block_size=4, n_layer=1, n_head=1, n_embd=4)).generate(np.ones((1, 2), int), 3)


def sampling_probabilities():
    from transformer.families.decoder_only import pick_next_token
    pick_next_token(q[0], 1.0, None, np.random.default_rng(0))


def rms_norm_backward():
    from autograd.ops import RMSNormFn

    def depth_first(node, order=None, seen=None):        # a stand-in, to get past topological_sort
        order, seen = ([], set()) if order is None else (order, seen)
        seen.add(node)
        for parent in node.parents:
            if parent not in seen:
                depth_first(parent, order, seen)
        order.append(node)
        return order
    engine.topological_order = depth_first
    x = Tensor(q, requires_grad=True)
    RMSNormFn.apply(x, Tensor(np.ones(4))).backward(dout)


def bench_causal_mask():
    from demos.bench.train import pytorch
    pytorch("S")()


def tensor_backward():
    x = Tensor(q, requires_grad=True)
    (x * x).sum().backward()


def graph_printed():
    from autograd.graph import graph_nodes
    graph_nodes((Tensor(q, requires_grad=True) * 2)._node)


def dot_product_score():
    from transformer.scores import DotProductScore
    DotProductScore()(Tensor(q), Tensor(k))


def fused_attention():
    from transformer.attention import scaled_dot_product_attention
    scaled_dot_product_attention(Tensor(q), Tensor(k), Tensor(v), mask, fused=True)


PROBES = {"attention_weights": attention_weights,
          "reference.attention_forward": lambda: reference.attention_forward(q, k, v, mask, 0.5),
          "reference.attention_forward's scores": past_the_scores(lambda: reference.attention_forward(q, k, v, mask, 0.5)),
          "reference.attention_forward's lse": past_the_scores(uniform_softmax(
              lambda: reference.attention_forward(q, k, v, mask, 0.5))),
          "reference.attention_backward's scores": past_the_scores(reference_attention_backward),
          "reference.attention_backward's dscores": past_the_scores(uniform_softmax(reference_attention_backward)),
          "LogSumExp": logsumexp, "KVCache.extend": kv_cache_mask, "DecoderOnly.generate greedy": greedy_generate,
          "pick_next_token": sampling_probabilities, "RMSNormFn.backward": rms_norm_backward,
          "Tensor.backward": tensor_backward, "graph_nodes": graph_printed, "DotProductScore": dot_product_score,
          "fused attention": fused_attention}
if importlib.util.find_spec("torch"):                  # the benchmark's baseline needs the optional PyTorch
    PROBES["the PyTorch baseline bench"] = bench_causal_mask
raised = {}
for name, probe in PROBES.items():
    originals = reference.softmax, reference._masked_scores, engine.topological_order
    try:
        probe()
        raised[name] = "nothing"
    except NotImplementedError as err:
        raised[name] = re.match(r"(?:twin of )?exercise (\\w+)[:,] ", str(err)).group(1)
    finally:
        reference.softmax, reference._masked_scores, engine.topological_order = originals
print(json.dumps(raised))
'''


def test_in_a_copy_each_rewritten_function_goes_through_the_exercise_it_calls(fresh):
    env = {**os.environ, "PYTHONPATH": str(fresh), "AUTOGRAD_KERNELS": "numpy", "NUMBA_DISABLE_JIT": "1"}
    run = subprocess.run([sys.executable, "-c", PROBE], cwd=fresh, capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.splitlines()[-1]) == {
        "attention_weights": "attention", "reference.attention_forward": "attention",      # its twin, cut
        "reference.attention_forward's scores": "softmax", "reference.attention_forward's lse": "log_softmax",
        "reference.attention_backward's scores": "softmax",
        "reference.attention_backward's dscores": "softmax_backward", "LogSumExp": "log_softmax",
        "KVCache.extend": "causal_mask", "DecoderOnly.generate greedy": "greedy_decode", "pick_next_token": "softmax",
        "RMSNormFn.backward": "layer_norm_backward", "Tensor.backward": "topological_sort",
        "graph_nodes": "topological_sort", "DotProductScore": "attention", "fused attention": "attention",
        **({"the PyTorch baseline bench": "causal_mask"} if importlib.util.find_spec("torch") else {})}


def test_a_copy_builds_no_triangle_of_its_own(fresh):
    """A causal mask is a lower triangle: outside the causal_mask region (cut here) and the
    checks' definitions (left out), no Python file of the copy makes one."""
    found = [f"{path.relative_to(fresh)}:{number}" for path in sorted(fresh.rglob("*.py"))
             for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
             if re.search(r"\b(tril|triu)\(", line)]
    assert found == []
