"""Generating target sequences from a trained encoder-decoder, without building any graph.

Greedy decoding takes the most probable token at each step.  Beam search keeps the
`beam_size` best partial sequences and scores finished ones by log-probability divided by
the GNMT length penalty ((5 + |Y|) / 6) ** alpha, so longer outputs are not unfairly
punished for having more factors below 1.
"""

import numpy as np

from autograd import as_tensor, no_grad


def greedy_decode(model, src, max_len, bos, eos, pad, use_cache=True):
    """(B, S) sources -> (B, L) generated tokens (without BOS), each row padded with `pad`
    after its EOS.  All rows decode together; it stops when every row has emitted EOS.
    With use_cache each step feeds only the newest token and the model keeps what it needs
    of the prefix (see Transformer.decode); without, each step reruns the whole prefix."""
    src = np.asarray(src)
    with no_grad():
        src_mask = model.make_src_mask(src)
        memory = model.encode(src, src_mask)                         # (B, S, d_model)
        ys = np.full((len(src), 1), bos, dtype=np.int64)             # (B, 1)
        done = np.zeros(len(src), dtype=bool)
        cache = model.new_cache() if use_cache else None
        # BEGIN EXERCISE greedy_decode
        for _ in range(max_len):
            if use_cache:
                logits = model.decode(ys[:, -1:], memory, src_mask, cache=cache)   # (B, 1, V)
            else:
                logits = model.decode(ys, memory, src_mask)          # (B, t, V)
            next_token = logits.data[:, -1].argmax(-1)               # (B,)
            next_token = np.where(done, pad, next_token)
            ys = np.concatenate([ys, next_token[:, None]], axis=1)
            done |= next_token == eos
            if done.all():
                break
    return ys[:, 1:]
        # END EXERCISE


def length_penalty(length, alpha):
    """GNMT: ((5 + |Y|) / 6) ** alpha; alpha = 0 turns it off."""
    return ((5.0 + length) / 6.0) ** alpha


def beam_search(model, src, max_len, bos, eos, beam_size=4, alpha=0.6):
    """Beam search for each source sequence in turn.  src (B, S) -> list of B token lists
    (without BOS, with EOS if one was produced)."""
    if not isinstance(beam_size, int) or beam_size < 1:
        raise ValueError(f"beam_search: beam_size must be an integer >= 1, got {beam_size!r}")
    src = np.asarray(src)
    results = []
    with no_grad():
        for row in src:
            results.append(_beam_search_one(model, row[None, :], max_len, bos, eos, beam_size, alpha))
    return results


def _beam_search_one(model, src, max_len, bos, eos, beam_size, alpha):
    src_mask = model.make_src_mask(src)
    memory = model.encode(src, src_mask)                             # (1, S, d_model)
    beams = np.full((1, 1), bos, dtype=np.int64)                     # (k, t) live hypotheses
    scores = np.zeros(1)                                             # (k,) summed log-probs
    finished = []                                                    # (normalized score, tokens)
    # BEGIN EXERCISE beam_search
    for step in range(1, max_len + 1):
        k = len(beams)
        logits = model.decode(beams, as_tensor(memory.data.repeat(k, 0)), src_mask)   # (k, t, V)
        log_probs = logits.log_softmax(-1).data[:, -1].astype(np.float64)   # (k, V)
        candidates = (scores[:, None] + log_probs).reshape(-1)      # (k * V,)
        vocab = log_probs.shape[1]
        order = np.argsort(-candidates, kind="stable")[: 2 * beam_size]
        new_beams, new_scores = [], []
        for flat in order:
            beam, token = divmod(int(flat), vocab)
            tokens = np.append(beams[beam], token)
            if token == eos:
                finished.append((candidates[flat] / length_penalty(step, alpha), tokens[1:]))
            else:
                new_beams.append(tokens)
                new_scores.append(candidates[flat])
            if len(new_beams) == beam_size:
                break
        if not new_beams:
            break
        beams, scores = np.array(new_beams), np.array(new_scores)
        # Log-probabilities only fall as a hypothesis grows, and the penalty is largest at
        # max_len, so score / lp(max_len) bounds what a live beam can still reach.
        best_finished = max((s for s, _ in finished), default=-np.inf)
        if best_finished >= scores.max() / length_penalty(max_len, alpha):
            break
    else:   # max_len reached: live hypotheses compete with the finished ones
        finished += [(s / length_penalty(max_len, alpha), b[1:]) for s, b in zip(scores, beams)]
    # END EXERCISE
    return [int(t) for t in max(finished, key=lambda item: item[0])[1]]
