"""What a check's child runs: the student's code called on the judge's inputs, the results
sent back as data.

Each probe takes plain data (arrays, numbers, lists) from the judge, builds what the code
under check needs (Values, Tensors, a layer, a stand-in model), calls the project, and
returns plain data: outputs, gradients, the arrays the call was given (to see whether it
wrote into them), what type came back. It judges nothing: no expected value, no definition,
no comparison is here or anywhere in the child (exercises/child.py). The judge
(exercises/checks/) compares what comes back with what it computed on its own.
"""

import os
import traceback

import numpy as np

from exercises.stand_ins import PrefilledStandInModel, StandInModel, StandInRotation

MESSAGE_CHARS = 2000


def _data(value):
    """A Tensor's array, an array, or the value as it is."""
    return value.data if hasattr(value, "data") and not isinstance(value, np.ndarray) else value


def _copies(arrays):
    return [np.array(a, copy=True) for a in arrays]


# ----- the scalar engine

def _values(leaves, program):
    """The Values of a program ("mul" | "add", i, j) or ("tanh", i) over the values so far, leaves first."""
    from autograd.scalar import Value
    values = [Value(float(x)) for x in leaves]
    for op, *args in program:
        a = values[args[0]]
        values.append(a * values[args[1]] if op == "mul" else a + values[args[1]] if op == "add" else a.tanh())
    return values


def value_grads(leaves, program, through_backward=True):
    """The leaves' gradients after backward() from the last Value (or, not through_backward,
    after each Value's _backward in the reverse of the order the program made them: a reverse
    topological order that needs no topological_sort, so that value_mul is checked alone);
    and whether some Value's .grad holds a Value rather than a number."""
    from autograd.scalar import Value
    values = _values(leaves, program)
    if through_backward:
        values[-1].backward()
    else:
        values[-1].grad = 1.0
        for value in reversed(values):
            value._backward()
    grads = [v.grad for v in values[: len(leaves)]]
    return {"grads": [g if isinstance(g, (int, float)) else None for g in grads],
            "value_in_grad": any(isinstance(v.grad, Value) for v in values)}


def order(leaves, program):
    """topological_order of the last Value, each Value as its index in the program (-1: a Value
    the program did not make)."""
    from autograd.scalar import topological_order
    values = _values(leaves, program)
    index = {id(v): i for i, v in enumerate(values)}
    return [index.get(id(v), -1) for v in topological_order(values[-1])]


# ----- the tensor engine and the kernels

def unbroadcast(grad, shape):
    from autograd.engine import unbroadcast
    return np.asarray(unbroadcast(grad, tuple(shape)))


def matmul_grads(a, b, upstream):
    """dL/dA and dL/dB of a @ b given the upstream gradient (None where none arrived)."""
    from autograd import Tensor
    ta, tb = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    (ta @ tb).backward(Tensor(upstream))
    return {"a": ta.grad, "b": tb.grad}


_COMPILED = {}           # the student's kernel, compiled once in this task child


def matmul_loops(a, b, compiled):
    """loops.matmul(a, b), run as Python (compiled False) or compiled by Numba (True)."""
    from autograd.kernels import loops
    if not compiled:
        return np.asarray(loops.matmul(a, b))
    import numba
    numba.config.DISABLE_JIT = False
    python_loops = loops.matmul_loops
    if python_loops not in _COMPILED:
        _COMPILED[python_loops] = numba.njit(getattr(python_loops, "py_func", python_loops))
    loops.matmul_loops = _COMPILED[python_loops]
    try:
        return np.asarray(loops.matmul(a, b))
    finally:
        loops.matmul_loops = python_loops


KERNELS = ("softmax", "softmax_backward", "log_softmax", "layer_norm_backward")


def kernel(name, *arrays):
    """reference.NAME(*arrays), and the arrays it was given as it left them (for the judge to
    see whether it wrote into them)."""
    from autograd.kernels import reference
    if name not in KERNELS:
        raise ValueError(f"no kernel probe {name}")
    given = _copies(arrays)
    out = getattr(reference, name)(*given)
    return {"out": list(out) if isinstance(out, tuple) else out, "given": given}


def adam_step(p, grad, m, v, lr, beta1, beta2, eps, step):
    """One adam_step on the arrays given (as the optimizer keeps them): they after the step,
    the gradient too (for the judge to see whether it was written into)."""
    from autograd.kernels import reference
    g = np.array(grad, copy=True)
    reference.adam_step(p, g, m, v, lr, beta1, beta2, eps, 0.0, True, step)
    return {"p": p, "m": m, "v": v, "grad": g}


def rms_norm_dx(x, weight, upstream, eps):
    """dL/dx through RMSNormFn (weight None: no weight)."""
    from autograd import Tensor
    from autograd.ops import RMSNormFn
    leaf = Tensor(x, requires_grad=True)
    inputs = (leaf,) if weight is None else (leaf, Tensor(weight))
    RMSNormFn.apply(*inputs, eps=eps).backward(upstream)
    return leaf.grad


def rms_norm_sum(x, z, upstream, eps):
    """dL/dx and dL/dz of rms_norm(x) + rms_norm(z), no weight: both backwards get the same
    upstream array, so one that writes into it changes the other's gradient; and that array
    after the backward."""
    from autograd import Tensor
    from autograd.ops import RMSNormFn
    a, b = Tensor(x, requires_grad=True), Tensor(z, requires_grad=True)
    given = np.array(upstream, copy=True)
    (RMSNormFn.apply(a, eps=eps) + RMSNormFn.apply(b, eps=eps)).backward(given)
    return {"x": a.grad, "z": b.grad, "upstream": given}


def tiny_training(initial, ids, targets, steps, lr):
    """The losses of `steps` Adam steps of Embedding -> LayerNorm -> Linear -> matmul ->
    cross-entropy, from the judge's initial parameters."""
    import nn
    from nn import functional as F
    vocab, width = initial[0].shape
    embed, norm = nn.Embedding(vocab, width, dtype=np.float64), nn.LayerNorm(width, dtype=np.float64)
    linear, out = nn.Linear(width, width, dtype=np.float64), nn.Parameter(np.zeros((width, vocab)))
    params = [embed.weight, norm.weight, norm.bias, linear.weight, linear.bias, out]
    for param, value in zip(params, initial):
        param.data = np.array(value, dtype=np.float64)
    optimizer, losses = nn.optim.Adam(params, lr=lr), []
    for _ in range(steps):
        optimizer.zero_grad()
        logits = linear(norm(embed(ids))) @ out                            # (B, T, vocab)
        loss = F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses


# ----- layers

def linear(x, weight, bias, upstream):
    """F.linear(x, W, b) (b None: no bias); with an upstream gradient, the inputs' gradients too."""
    from autograd import Tensor
    from nn import functional as F
    leaves = [Tensor(a, requires_grad=upstream is not None) for a in (x, weight) + (() if bias is None else (bias,))]
    out = F.linear(*leaves)
    if upstream is not None:
        out.backward(Tensor(upstream))
    return {"out": out.data, "grads": [leaf.grad for leaf in leaves] if upstream is not None else None}


def embedding(weight, ids, upstream):
    """F.embedding(ids, weight): what it returned, and the table's gradient after backward (or
    what backward raised)."""
    from autograd import Tensor
    from nn import functional as F
    table = Tensor(weight, requires_grad=True)
    out = F.embedding(ids, table)
    found = {"tensor": isinstance(out, Tensor), "out": np.asarray(_data(out)),
             "requires_grad": bool(getattr(out, "requires_grad", False)), "grad": None, "backward_raised": None}
    if found["tensor"] and out.requires_grad:
        try:
            out.backward(Tensor(upstream))
        except Exception as err:                         # noqa: BLE001  the forward is judged first
            found["backward_raised"] = describe(err)
        found["grad"] = table.grad
    return found


# ----- attention

def attention(q, k, v, mask, upstream):
    """scaled_dot_product_attention's output and weights, then the gradients of q, k and v
    after a backward from the output with the judge's upstream gradient: {"q", "k", "v"},
    each None where no gradient arrived (the judge reads None as zeros, what no gradient
    means; all None if the output is in no graph), or what backward raised."""
    from autograd import Tensor
    from transformer.attention import scaled_dot_product_attention
    leaves = [Tensor(a, requires_grad=True) for a in (q, k, v)]
    out, weights = scaled_dot_product_attention(*leaves, mask)
    found = {"out": np.asarray(_data(out)), "weights": np.asarray(_data(weights)), "backward_raised": None}
    if getattr(out, "requires_grad", False):
        try:
            out.backward(Tensor(upstream))
        except Exception as err:                         # noqa: BLE001  the forward is judged first
            found["backward_raised"] = describe(err)
    found["grads"] = {name: leaf.grad for name, leaf in zip("qkv", leaves)}
    return found


def heads(value, d_model, num_heads, which):
    """MultiHeadAttention's _split_heads (which "split") or _merge_heads ("merge") of value."""
    from autograd import Tensor
    from transformer.attention import MultiHeadAttention
    layer = MultiHeadAttention(d_model, num_heads)
    function = layer._split_heads if which == "split" else layer._merge_heads
    return np.asarray(_data(function(Tensor(value))))


def sinusoidal(max_len, d_model):
    from transformer.positional import sinusoidal_table
    return np.asarray(sinusoidal_table(max_len, d_model))


def causal_mask(length):
    """{"mask": the mask as an array, "type": the type it came as} (a list of lists would pass
    as an array, where the model negates it: ~mask)."""
    from transformer.masks import causal_mask
    mask = causal_mask(length)
    return {"mask": np.asarray(mask), "type": type(mask).__name__}


# ----- decoding

def _rows(tokens):
    return [[int(t) for t in row] for row in (tokens.tolist() if isinstance(tokens, np.ndarray) else tokens)]


def greedy(tables, src, max_len, bos, eos, pad, use_cache, cache_start):
    """{"rows": the tokens greedy decoding gives, "calls_without_cache": decode calls given no cache},
    or, where a decode call got a tgt_mask that is not boolean (a cache passed fourth, where
    the real model takes tgt_mask), {"cache_as_tgt_mask": True}: the mistake as data, for the
    judge to name in its own words. cache_start: the positions a new cache holds (the judge's)."""
    from transformer.decoding import greedy_decode
    model = PrefilledStandInModel(tables, cache_start)
    try:
        rows = _rows(greedy_decode(model, src, max_len, bos, eos, pad, use_cache=use_cache))
    except TypeError:
        if not model.mask_not_boolean:
            raise
        return {"rows": None, "calls_without_cache": 0, "cache_as_tgt_mask": True}
    return {"rows": rows, "calls_without_cache": model.calls_without_cache}


def beam(tables, src, max_len, bos, eos, beam_size, alpha):
    from transformer.decoding import beam_search
    return _rows(beam_search(StandInModel(tables), src, max_len, bos, eos, beam_size=beam_size, alpha=alpha))


# ----- the key/value cache

def _cache_data(cache):
    return {key: np.asarray(_data(cache[key])) for key in ("k", "v") if key in cache}


def chunked_attention(x, weights, num_heads, chunks, masks, k_past, v_past, factors):
    """An attention layer with the judge's weights ([w_q, b_q, ..., w_out, b_out]) and a score
    turning with the positions by the judge's factors (StandInRotation) fed x chunk by chunk
    with the key/value cache, starting from the judge's cache k_past, v_past (B, H, P, d_head;
    P = 0: an empty one): the outputs, the cache after, the chunks fed and the error that
    stopped them, if any."""
    from autograd import Tensor, no_grad
    from transformer.attention import MultiHeadAttention
    layer = MultiHeadAttention(x.shape[-1], num_heads).eval()
    layer.score = StandInRotation(factors)
    projections = (layer.q_proj, layer.k_proj, layer.v_proj, layer.out_proj)
    for projection, weight, bias in zip(projections, weights[0::2], weights[1::2]):
        projection.weight.data[...], projection.bias.data[...] = weight, bias
    cache = {} if k_past.shape[2] == 0 else {"k": Tensor(k_past), "v": Tensor(v_past)}
    found, outputs, start = {"error": None, "fed": []}, [], 0
    with no_grad():
        for size, mask in zip(chunks, masks):
            part = Tensor(x[:, start:start + size])
            found["fed"].append(size)
            try:
                outputs.append(layer(part, part, part, mask=mask, kv_cache=cache).data)
            except (ValueError, IndexError) as err:
                found["error"] = describe(err)
                break
            start += size
    found.update(got=np.concatenate(outputs, axis=1) if found["error"] is None else None, cache=_cache_data(cache))
    return found


def generate(positional, use_cache):
    """The logits of 6 tokens generated by a seeded 2-layer GPT-style model from 2 prompts."""
    from autograd import manual_seed, no_grad
    from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig
    manual_seed(3)
    model = DecoderOnly(DecoderOnlyConfig(vocab=11, d_model=16, num_heads=2, d_ff=32, num_layers=2, max_len=16,
                                          positional=positional, pad_id=None)).eval()
    prompt = np.array([[1, 5, 2, 7], [3, 3, 9, 0]])
    with no_grad():
        return np.asarray(model.generate(prompt, 6, use_cache=use_cache, return_logits=True)[1])


PROBES = {function.__name__: function for function in (
    value_grads, order, unbroadcast, matmul_grads, matmul_loops, kernel, adam_step, rms_norm_dx, rms_norm_sum,
    tiny_training, linear, embedding, attention, heads, sinusoidal, causal_mask, greedy, beam, chunked_attention,
    generate)}
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(name, args):
    """The probe `name` called with the judge's arguments."""
    if name not in PROBES or not isinstance(args, list):
        raise ValueError(f"no probe {name!r}")
    return PROBES[name](*args)


def describe(err, root=ROOT):
    """An exception as data: its type's name, its message (cut), the last line of the project
    it came from, (in FILE line N), and a NameError's name."""
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if f.filename.startswith(root + os.sep) and "/exercises/" not in f.filename]
    where = f" (in {os.path.relpath(frames[-1].filename, root)} line {frames[-1].lineno})" if frames else ""
    message = str(err)
    if len(message) > MESSAGE_CHARS:
        message = message[:MESSAGE_CHARS] + f"... ({len(message) - MESSAGE_CHARS} characters cut)"
    return {"type": type(err).__name__, "message": message, "where": where,
            "name": getattr(err, "name", None) if isinstance(err, NameError) else None,
            "memory": isinstance(err, MemoryError)}
