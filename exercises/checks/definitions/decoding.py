"""Reference decoders on the checks' stand-in model (exercises/checks/decoding.py), and what
each classic wrong decoder gives on it.

The model's next-token log-probabilities are tables[source, position, last token]: they
depend on the row's source, on the position of the last token fed (counted by the model's
cache when there is one) and on that token.
"""

import numpy as np

BOS, EOS, PAD = 0, 1, 2


def _next_log_probs(tables, sources, positions, last):
    return tables[sources, positions % tables.shape[1], last]              # (B, V)


def greedy(tables, sources, max_len, use_cache, variant):
    """(B, L) tokens greedy decoding gives (variant "right"), or a classic wrong decoder."""
    ys = np.full((len(sources), 1), BOS)
    done = np.zeros(len(sources), dtype=bool)
    seen = 0                                                              # positions in the model's cache
    for step in range(max_len):
        if variant == "prefix_into_cache" and use_cache:
            seen += ys.shape[1]
            position = seen - 1
        else:
            position = step
        token = _next_log_probs(tables, sources, np.full(len(sources), position), ys[:, -1]).argmax(-1)
        if variant != "no_padding":
            token = np.where(done, PAD, token)
        ys = np.concatenate([ys, token[:, None]], axis=1)
        done |= token == EOS
        if (done.any() if variant == "first_row_stops" else done.all()) and variant != "to_max_len":
            break
    return ys if variant == "bos_kept" else ys[:, 1:]


def length_penalty(length, alpha):
    return ((5.0 + length) / 6.0) ** alpha


def _alpha(alpha, variant):
    return 0.6 if variant == "alpha_ignored" else alpha


def _score(total, step, alpha, variant):
    """A hypothesis finished at `step`'s score (the planted mistakes change this one only)."""
    if variant == "unnormalised":
        return total
    return total / length_penalty(step + (variant == "bos_counted"), _alpha(alpha, variant))


def _extend(tables, source, beams, totals, beam_size, finished, step, alpha, variant):
    """One step: the live beams' best extensions; finished hypotheses appended to finished."""
    log_probs = _next_log_probs(tables, np.full(len(beams), source), np.full(len(beams), step - 1), beams[:, -1])
    log_probs = log_probs - np.log(np.exp(log_probs).sum(-1, keepdims=True))
    candidates = (totals[:, None] + log_probs).reshape(-1)
    keep = beam_size * beam_size if variant == "keeps_k_squared" else beam_size
    new_beams, new_totals = [], []
    for flat in np.argsort(-candidates, kind="stable")[: 2 * keep]:
        beam, token = divmod(int(flat), log_probs.shape[1])
        tokens = np.append(beams[beam], token)
        if token == EOS:
            finished.append((_score(candidates[flat], step, alpha, variant), tokens[1:]))
        else:
            new_beams.append(tokens)
            new_totals.append(candidates[flat])
        if len(new_beams) == keep:
            break
    return new_beams, new_totals


def beam_one(tables, source, max_len, beam_size, alpha, variant):
    beams, totals, finished = np.full((1, 1), BOS), np.zeros(1), []
    final_penalty = length_penalty(max_len, _alpha(alpha, variant))
    for step in range(1, max_len + 1):
        new_beams, new_totals = _extend(tables, source, beams, totals, beam_size, finished, step, alpha, variant)
        if not new_beams or (variant == "first_finished_stops" and finished):
            break
        beams, totals = np.array(new_beams), np.array(new_totals)
        if max((s for s, _ in finished), default=-np.inf) >= totals.max() / final_penalty:
            break
    else:
        finished += [(t / final_penalty, b[1:]) for t, b in zip(totals, beams)]
    return [int(t) for t in max(finished, key=lambda item: item[0])[1]]


def beam(tables, sources, max_len, beam_size, alpha, variant):
    """(B, L) beam search's outputs, each row padded with -1 after its end."""
    rows = [beam_one(tables, s, max_len, beam_size, alpha, variant) for s in sources]
    out = np.full((len(rows), max(map(len, rows))), -1)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out
