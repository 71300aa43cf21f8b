"""Reference decoders on the checks' stand-in model (exercises/checks/decoding.py), and what
each classic wrong decoder gives on it.

The model's next-token logits are tables[source, position, last token]: they depend on the
row's source, on the position of the last token fed (counted by the model's cache when there
is one, on from the positions a new cache of greedy's model holds) and on that token. Beam search's tables are not normalised: each row of logits is
shifted by a constant of its own, so only log_softmax makes them log-probabilities.
"""

import numpy as np

BOS, EOS, PAD = 0, 1, 2


def _next_log_probs(tables, sources, positions, last):
    return tables[sources, positions % tables.shape[1], last]              # (B, V)


def _greedy_position(step, seen, ys, use_cache, variant):
    """(the position the model's prediction comes from, its last token, the cache's count after)."""
    if not use_cache:
        return (0, ys[:, 0], seen) if variant == "first_position" else (step, ys[:, -1], seen)
    fed = ys.shape[1] if variant == "prefix_into_cache" else 1         # tokens fed into the cache
    return seen + fed - 1, ys[:, -1], seen + fed


def greedy(tables, sources, max_len, use_cache, variant, cache_start=0):
    """(B, L) tokens greedy decoding gives (variant "right"), or a classic wrong decoder; with
    the cache, its positions count on from the cache_start positions a new cache holds
    (variant "cache_unused": the cache not used, every step from position 0)."""
    use_cache = use_cache and variant != "cache_unused"
    ys = np.full((len(sources), 1), BOS)
    done = np.zeros(len(sources), dtype=bool)
    seen = cache_start                                                    # positions in the model's cache
    for step in range(max_len - 1 if variant == "one_short" else max_len):
        position, last, seen = _greedy_position(step, seen, ys, use_cache, variant)
        token = _next_log_probs(tables, sources, np.full(len(sources), position), last).argmax(-1)
        if variant == "eos_padded":
            done |= token == EOS
        if variant != "no_padding":
            token = np.where(done, EOS if variant == "eos_padding" else PAD, token)
        if variant == "break_before_append" and (done | (token == EOS)).all():
            break
        ys = np.concatenate([ys, token[:, None]], axis=1)
        done = token == EOS if variant == "done_reset" else done | (token == EOS)
        if (done.any() if variant == "first_row_stops" else done.all()) and variant != "to_max_len":
            break
    return ys if variant == "bos_kept" else ys[:, 1:]


def length_penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


FIXED_ALPHA = {"alpha_ignored": 0.6, "alpha_one": 1.0}                    # a fixed alpha everywhere
FIXED_ALPHA_FINISHED = {"alpha_ignored_finished": 0.6, "alpha_one_finished": 1.0}   # in the finished scores only


def _alpha(alpha, variant):
    return FIXED_ALPHA.get(variant, 0.0 if variant == "no_penalty" else alpha)


RAW = {"finished": ("unnormalised",), "live": ("live_raw",), "bound": ("raw_bound",)}
BOS_COUNTED = {"finished": ("bos_counted", "bos_counted_all"), "live": ("bos_counted_all",), "bound": ()}


def _score(total, length, alpha, variant, where):
    """The score of a hypothesis of `length` tokens with summed log-probability total, as the
    variant computes it for a finished one, a live one at max_len, or the bound to stop early."""
    if variant in RAW[where]:
        return total
    fixed = FIXED_ALPHA_FINISHED.get(variant) if where == "finished" else None
    penalty = length_penalty(length + (variant in BOS_COUNTED[where]), _alpha(alpha, variant) if fixed is None else fixed)
    return total * penalty if variant == "multiplied" else total / penalty


def _ranked(totals, log_probs, beam_size, variant):
    """(the candidates' summed log-probabilities, flat indices in the order they are taken)."""
    candidates = (totals[:, None] + log_probs).reshape(-1)
    ranking = log_probs.reshape(-1) if variant == "not_accumulated" else candidates
    order = np.argsort(ranking if variant == "ascending" else -ranking, kind="stable")
    keep = beam_size * beam_size if variant == "keeps_k_squared" else beam_size
    return candidates, order[: keep if variant == "top_k" else 2 * keep], keep


def _extend(tables, source, beams, totals, beam_size, finished, step, alpha, variant):
    """One step: the live beams' best extensions; finished hypotheses appended to finished."""
    log_probs = _next_log_probs(tables, np.full(len(beams), source), np.full(len(beams), step - 1), beams[:, -1])
    if variant != "raw_logits":
        log_probs = log_probs - np.log(np.exp(log_probs).sum(-1, keepdims=True))
    if variant == "probabilities":                                      # softmax's output summed, not its log
        log_probs = np.exp(log_probs)
    candidates, order, keep = _ranked(totals, log_probs, beam_size, variant)
    new_beams, new_totals = [], []
    for flat in order:
        beam, token = divmod(int(flat), log_probs.shape[1])
        tokens = np.append(beams[beam], token)
        if token == EOS:
            finished.append((_score(candidates[flat], step, alpha, variant, "finished"), tokens[1:]))
        else:
            new_beams.append(tokens)
            new_totals.append(candidates[flat])
        if len(new_beams) == keep:
            break
    return new_beams, new_totals


def beam_one(tables, source, max_len, beam_size, alpha, variant):
    """One source's best hypothesis (tokens after BOS), or [] when none was kept (a decoder
    that forgets the live ones at max_len then has nothing to return)."""
    beams, totals, finished = np.full((1, 1), BOS), np.zeros(1), []
    for step in range(1, max_len + 1):
        new_beams, new_totals = _extend(tables, source, beams, totals, beam_size, finished, step, alpha, variant)
        if not new_beams or (variant == "first_finished_stops" and finished) or \
                (variant == "k_finished_stops" and len(finished) >= beam_size):
            break
        beams, totals = np.array(new_beams), np.array(new_totals)
        if max((s for s, _ in finished), default=-np.inf) >= _score(totals.max(), max_len, alpha, variant, "bound"):
            break
    else:
        if variant != "live_dropped":
            finished += [(_score(t, max_len, alpha, variant, "live"), b[1:]) for t, b in zip(totals, beams)]
    return [int(t) for t in max(finished, key=lambda item: item[0])[1]] if finished else []


def beam(tables, sources, max_len, beam_size, alpha, variant):
    """(B, L) beam search's outputs, each row padded with -1 after its end."""
    rows = [beam_one(tables, s, max_len, beam_size, alpha, variant) for s in sources]
    out = np.full((len(rows), max(map(len, rows), default=0)), -1)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out
