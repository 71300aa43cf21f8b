"""The check of the key/value cache: an attention layer fed a sequence in chunks must give
what the judge computes for attending over every position so far, its cache holding every
position's keys and values in order; and a seeded GPT-style model must generate with the
cache exactly the logits it generates without (the run a user sees), with no positions and
with rotary ones.

Two cases start from a cache the judge makes up (random keys and values no input gives):
their outputs come only from attending over that cache, so no other code in the child (the
same layer run without a cache, on inputs it never sees) can give them. The layer's score
turns with the positions (the judge's factor of each position, a stand-in for RoPE), so that
the queries' position offset shows in the outputs too. The generation compares two of the
child's own runs: it names mistakes, and proves nothing alone."""

import re

import numpy as np

from exercises.checks.expected import expect
from exercises.checks.feedback import Judge, Wrong, mistake
from exercises.child_text import mark


NOT_FILLED = mistake("cache not filled", "store the keys and values in kv_cache['k'] and kv_cache['v']")
OVERWRITTEN = mistake("cache overwritten", "append the new keys and values to the cached ones (cat along the time axis)")
NEW_BEFORE_OLD = mistake("new keys before old", "positions stay in order: cat([cached, new])")
FROZEN = mistake("cache frozen after the first call", "store the joined keys and values back in kv_cache at every "
                 "call, so that the next call sees every position so far")
VALUES_TO_KEYS = mistake("values joined to the cached keys", "the new values join the cached values: "
                         "cat([kv_cache['v'], v]), and the keys the cached keys")
WRONG_DIM = mistake("joined along the wrong dim", "keys and values are (B, H, T, d_head): join the cached and the "
                    "new ones along the positions, dim=2")
OFFSET = ("position offset wrong", "past must be how many positions the cache held before this call: the new "
          "queries sit at positions past, past + 1, ... and rotary positions need that offset")
OFFSET_WRONG = mistake(*OFFSET)


def _judge_cache(case, cache, full, chunks, complete):
    """Raise Wrong naming the mistake if the cache after the chunks is a classic wrong one;
    full: [keys, values] the cache must hold (the judge's); complete: every chunk was fed
    without an error (else the cache is as the failing call left it: frozen, if the call
    failed before storing, looks the same)."""
    where = f"the cache after feeding {case}"
    if "k" not in cache or "v" not in cache:
        raise Wrong(f"{where}: {NOT_FILLED}")
    keys, values, (full_keys, full_values), first = cache["k"], cache["v"], full, chunks[0]
    if len(chunks) > 1 and keys.shape[2] == chunks[-1]:
        raise Wrong(f"{where}: {OVERWRITTEN}")
    if complete and len(chunks) > 1 and keys.shape[2] == first:
        raise Wrong(f"{where}: {FROZEN}")
    if values.shape[2] > first and np.allclose(values[:, :, :first], full_keys[:, :, :first]) \
            and not np.allclose(values[:, :, :first], full_values[:, :, :first]):
        raise Wrong(f"{where}: {VALUES_TO_KEYS}")
    before_last = full_keys.shape[2] - chunks[-1]
    order = np.concatenate([np.arange(before_last, full_keys.shape[2]), np.arange(before_last)])
    if keys.shape == full_keys.shape and np.allclose(keys, full_keys[:, :, order]) and len(chunks) == 2:
        raise Wrong(f"{where}: {NEW_BEFORE_OLD}")


# (batch, new positions, d_model, heads, chunks, positions already cached: the judge's own keys and values)
CHUNKED = ((1, 3, 4, 1, (2, 1), 0), (2, 5, 8, 2, (3, 2), 0), (3, 6, 12, 3, (4, 2), 0),
           (2, 4, 8, 2, (1, 3), 3), (1, 3, 6, 3, (1, 1, 1), 5))


def _chunk_case(seed, batch, length, d_model, heads, past):
    """The judge's inputs: x, the layer's weights, a cache of past positions whose keys and
    values no input gives (random), so that only attending over the cache gives the outputs,
    and the factor of each position by which the layer's score turns (its stand-in for RoPE),
    so that the queries' positions count, and with them the offset the layer gives them."""
    rng = np.random.default_rng(seed)
    draw = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    weights = [array for _ in range(4) for array in (draw(d_model, d_model) / np.sqrt(d_model), draw(d_model))]
    cached = [draw(batch, heads, past, d_model // heads) for _ in range(2)]
    factors = (0.5 + 2 * rng.random(past + length)).astype(np.float32)          # (P + T,)
    return draw(batch, length, d_model), weights, cached, factors


def _attention_chunks(judge, task):
    for seed, (batch, length, d_model, heads, chunks, past) in enumerate(CHUNKED):
        x, weights, (k_past, v_past), factors = _chunk_case(seed, batch, length, d_model, heads, past)
        case = (f"x {x.shape} to a {heads}-head attention in chunks of {chunks} with a causal mask"
                + (f", after a cache of {past} positions" if past else ""))
        ends = past + np.cumsum(chunks)
        masks = [expect("causal_mask", end, 0)[end - size:end].astype(bool) for size, end in zip(chunks, ends)]
        found = task.call("chunked_attention", x, weights, heads, list(chunks), masks, k_past, v_past, factors)
        error, full = found["error"], expect("attention_layer_cache", x, weights, heads, k_past, v_past)
        _judge_cache(case, found["cache"], full, tuple(found["fed"]), error is None)
        if error is not None and re.search(r"concatenation axis.*along dimension 2\b", str(error.get("message"))):
            raise Wrong(f"attention with the key/value cache, {case}: {WRONG_DIM}")
        if error is not None:
            raise Wrong(f"attention with the key/value cache, {case}: raised {mark(error.get('type'), 80)}: "
                        f"{mark(error.get('message'), 500)}")
        from_zero = np.concatenate([np.arange(size) for size in chunks])            # past left at 0 in every call
        judge.compare("attention with the key/value cache: the outputs of attending over every position so far, "
                      "the new queries after the cached ones", case, found["got"],
                      expect("attention_layer", x, weights, heads, k_past, v_past, factors, past + np.arange(length)),
                      [(*OFFSET, expect("attention_layer", x, weights, heads, k_past, v_past, factors, from_zero))],
                      atol=1e-5)
        for name, stored, expected in zip(("keys", "values"), (found["cache"]["k"], found["cache"]["v"]), full):
            judge.compare(f"the key/value cache after the chunks: every position's {name}, in order", case,
                          stored, expected, atol=1e-5)


def check_kv_cache(task):
    judge = Judge()
    _attention_chunks(judge, task)
    for positional in ("none", "rope", "learned"):
        cached, full = task.call("generate", positional, True), task.call("generate", positional, False)
        case = f"a seeded 2-layer GPT-style model, {positional} positions, 2 prompts of 4 tokens, 6 tokens generated"
        if positional == "rope" and not np.allclose(cached, full, atol=1e-6):
            raise Wrong(f"generation with the cache against without, {case}: "
                        f"{OFFSET_WRONG}")
        judge.compare("generation with the cache: the same logits as without", case, cached, full, atol=1e-6)
    return ("chunked attention (5 cases, 2 after a cache the judge made up; a score turning with the positions) and "
            "seeded generation with no, rotary and learned positions")
