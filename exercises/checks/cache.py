"""The check of the key/value cache: an attention layer fed a sequence in chunks must give
what it gives the whole sequence at once, its cache holding every position's keys in order;
and a seeded GPT-style model must generate with the cache exactly the logits it generates
without (the run a user sees), with no positions and with rotary ones."""

import numpy as np

from exercises.checks.expected import expect
from exercises.checks.feedback import Judge, Wrong, mistake


NOT_FILLED = mistake("cache not filled", "store the keys and values in kv_cache['k'] and kv_cache['v']")
OVERWRITTEN = mistake("cache overwritten", "append the new keys and values to the cached ones (cat along the time axis)")
NEW_BEFORE_OLD = mistake("new keys before old", "positions stay in order: cat([cached, new])")
FROZEN = mistake("cache frozen after the first call", "store the joined keys and values back in kv_cache at every "
                 "call, so that the next call sees every position so far")
VALUES_TO_KEYS = mistake("values joined to the cached keys", "the new values join the cached values: "
                         "cat([kv_cache['v'], v]), and the keys the cached keys")
WRONG_DIM = mistake("joined along the wrong dim", "keys and values are (B, H, T, d_head): join the cached and the "
                    "new ones along the positions, dim=2")
OFFSET_WRONG = mistake("position offset wrong", "past must be how many positions the cache held before this call: "
                       "the new queries sit at positions past, past + 1, ... and rotary positions need that offset")


def _judge_cache(case, cache, whole, chunks, complete):
    """Raise Wrong naming the mistake if the cache after the chunks is a classic wrong one;
    whole: the cache after the whole sequence at once ({} if it failed); complete: every chunk
    was fed without an error (else the cache is as the failing call left it: frozen, if the
    call failed before storing, looks the same)."""
    where = f"the cache after feeding {case}"
    if "k" not in cache or "v" not in cache:
        raise Wrong(f"{where}: {NOT_FILLED}")
    keys, full_keys = cache["k"], whole["k"] if "k" in whole else None
    if len(chunks) > 1 and keys.shape[2] == chunks[-1]:
        raise Wrong(f"{where}: {OVERWRITTEN}")
    if complete and len(chunks) > 1 and keys.shape[2] == chunks[0]:
        raise Wrong(f"{where}: {FROZEN}")
    values, first = cache["v"], chunks[0]
    if full_keys is not None and values.shape[2] > first and np.allclose(values[:, :, :first], full_keys[:, :, :first]) \
            and not np.allclose(values[:, :, :first], whole["v"][:, :, :first]):
        raise Wrong(f"{where}: {VALUES_TO_KEYS}")
    order = np.concatenate([np.arange(sum(chunks[:-1]), sum(chunks)), np.arange(sum(chunks[:-1]))])
    if full_keys is not None and keys.shape == full_keys.shape and np.allclose(keys, full_keys[:, :, order]) and len(chunks) == 2:
        raise Wrong(f"{where}: {NEW_BEFORE_OLD}")


def _attention_chunks(judge, task):
    for seed, (batch, length, d_model, heads, chunks) in enumerate(((1, 3, 4, 1, (2, 1)), (2, 5, 8, 2, (3, 2)),
                                                                    (3, 6, 12, 3, (4, 2)))):
        x = np.random.default_rng(seed).standard_normal((batch, length, d_model)).astype(np.float32)
        case = f"x {x.shape} to a {heads}-head attention in chunks of {chunks} with a causal mask"
        ends = np.cumsum(chunks)
        masks = [expect("causal_mask", end, 0)[end - size:end].astype(bool) for size, end in zip(chunks, ends)]
        found = task.call("chunked_attention", seed, x, heads, list(chunks),
                          masks, expect("causal_mask", length, 0).astype(bool))
        error = found["error"]
        _judge_cache(case, found["cache"], found["whole_cache"], tuple(found["fed"]), error is None)
        if error is not None and "concatenation axis" in str(error.get("message")):
            raise Wrong(f"attention with the key/value cache, {case}: {WRONG_DIM}")
        if error is not None:
            raise Wrong(f"attention with the key/value cache, {case}: raised {error.get('type')}: "
                        f"{str(error.get('message'))[:500]}")
        judge.compare("attention with the key/value cache: the same outputs as the whole sequence at once", case,
                      found["got"], found["whole"], atol=1e-5)


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
    return "chunked attention (3 sizes) and seeded generation with no, rotary and learned positions"
