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


def _chunked(attention, x, chunks):
    """(outputs of feeding x chunk by chunk with a causal mask, the cache after, the chunks
    fed, the error that stopped it or None)."""
    from autograd import Tensor
    cache, outputs, start = {}, [], 0
    for count, size in enumerate(chunks, 1):
        end = start + size
        mask = expect("causal_mask", end, 0)[start:end].astype(bool)  # (size, end): the causal rows
        part = Tensor(x[:, start:end])
        try:
            outputs.append(attention(part, part, part, mask=mask, kv_cache=cache).data)
        except (ValueError, IndexError) as err:
            return None, cache, chunks[:count], err
        start = end
    return np.concatenate(outputs, axis=1), cache, chunks, None


def _judge_cache(case, cache, whole, chunks, complete):
    """Raise Wrong naming the mistake if the cache after the chunks is a classic wrong one;
    whole: the cache after the whole sequence at once ({} if it failed); complete: every chunk
    was fed without an error (else the cache is as the failing call left it: frozen, if the
    call failed before storing, looks the same)."""
    where = f"the cache after feeding {case}"
    if "k" not in cache or "v" not in cache:
        raise Wrong(f"{where}: {NOT_FILLED}")
    keys, full_keys = cache["k"].data, whole["k"].data if "k" in whole else None
    if len(chunks) > 1 and keys.shape[2] == chunks[-1]:
        raise Wrong(f"{where}: {OVERWRITTEN}")
    if complete and len(chunks) > 1 and keys.shape[2] == chunks[0]:
        raise Wrong(f"{where}: {FROZEN}")
    values, first = cache["v"].data, chunks[0]
    if full_keys is not None and values.shape[2] > first and np.allclose(values[:, :, :first], full_keys[:, :, :first]) \
            and not np.allclose(values[:, :, :first], whole["v"].data[:, :, :first]):
        raise Wrong(f"{where}: {VALUES_TO_KEYS}")
    order = np.concatenate([np.arange(sum(chunks[:-1]), sum(chunks)), np.arange(sum(chunks[:-1]))])
    if full_keys is not None and keys.shape == full_keys.shape and np.allclose(keys, full_keys[:, :, order]) and len(chunks) == 2:
        raise Wrong(f"{where}: {NEW_BEFORE_OLD}")


def _attention_chunks(judge):
    from autograd import Tensor, manual_seed, no_grad
    from transformer.attention import MultiHeadAttention
    for seed, (batch, length, d_model, heads, chunks) in enumerate(((1, 3, 4, 1, (2, 1)), (2, 5, 8, 2, (3, 2)),
                                                                    (3, 6, 12, 3, (4, 2)))):
        manual_seed(seed)
        attention = MultiHeadAttention(d_model, heads).eval()
        x = np.random.default_rng(seed).standard_normal((batch, length, d_model)).astype(np.float32)
        case = f"x {x.shape} to a {heads}-head attention in chunks of {chunks} with a causal mask"
        with no_grad():
            whole_cache = {}
            whole = attention(Tensor(x), Tensor(x), Tensor(x), mask=expect("causal_mask", length, 0).astype(bool),
                              kv_cache=whole_cache).data
            got, cache, fed, error = _chunked(attention, x, chunks)
        _judge_cache(case, cache, whole_cache, fed, error is None)
        if error is not None and "concatenation axis" in str(error):
            raise Wrong(f"attention with the key/value cache, {case}: {WRONG_DIM}")
        if error is not None:
            raise Wrong(f"attention with the key/value cache, {case}: raised {type(error).__name__}: {error}")
        judge.compare("attention with the key/value cache: the same outputs as the whole sequence at once", case,
                      got, whole, atol=1e-5)


def _generate(positional, use_cache):
    from autograd import manual_seed, no_grad
    from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig
    manual_seed(3)
    model = DecoderOnly(DecoderOnlyConfig(vocab=11, d_model=16, num_heads=2, d_ff=32, num_layers=2, max_len=16,
                                          positional=positional, pad_id=None)).eval()
    prompt = np.array([[1, 5, 2, 7], [3, 3, 9, 0]])
    with no_grad():
        return np.asarray(model.generate(prompt, 6, use_cache=use_cache, return_logits=True)[1])


def check_kv_cache():
    judge = Judge()
    _attention_chunks(judge)
    for positional in ("none", "rope", "learned"):
        cached, full = _generate(positional, True), _generate(positional, False)
        case = f"a seeded 2-layer GPT-style model, {positional} positions, 2 prompts of 4 tokens, 6 tokens generated"
        if positional == "rope" and not np.allclose(cached, full, atol=1e-6):
            raise Wrong(f"generation with the cache against without, {case}: "
                        f"{OFFSET_WRONG}")
        judge.compare("generation with the cache: the same logits as without", case, cached, full, atol=1e-6)
    return "chunked attention (3 sizes) and seeded generation with no, rotary and learned positions"
