"""The checks of decoding: greedy decoding and beam search on a stand-in model whose
answers are known (rows with different sources, ending at different steps, an output that
depends on the model's cache), and the key/value cache of a real attention layer and of a
seeded GPT-style model's generation."""

import numpy as np

from exercises.checks.expected import expect
from exercises.checks.feedback import FRESH, Judge, Wrong, mistake

BOS, EOS, PAD = 0, 1, 2


def tables_of(seed, sources=3, positions=6, vocab=7, eos_bias=0.0, endless=()):
    """Log-probability tables; the sources in `endless` never produce EOS."""
    r = np.random.default_rng(seed)
    logits = r.standard_normal((sources, positions, vocab, vocab)) * 2
    logits[..., EOS] += eos_bias
    logits[list(endless), ..., EOS] = -30.0
    logits[..., BOS], logits[..., PAD] = -30.0, -31.0                 # never predicted (nor tied: a decoder
                                                                      # picking the worst does not pick BOS)
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


GREEDY = {"no_padding": ("no padding after EOS", "a row that has ended gets PAD at every later step"),
          "first_row_stops": ("stops when the first row ends", "stop only when every row has produced EOS"),
          "bos_kept": ("BOS kept in the output", "return the tokens after BOS"),
          "to_max_len": ("runs to max_len", "stop as soon as every row has produced EOS"),
          "prefix_into_cache": ("the whole prefix fed into the cache", "with the cache, feed only the newest "
                                "token: the model keeps the rest"),
          "one_short": ("one step short", "a row that never produces EOS gets max_len tokens: range(max_len)"),
          "done_reset": ("done reset each step", "done |= (next == eos): a row that has ended stays ended, while "
                         "done = (next == eos) forgets it after one PAD"),
          "eos_padded": ("EOS replaced by PAD", "pad only the rows that ended at an earlier step: mark this step's "
                         "EOS as done after writing it"),
          "eos_padding": ("padded with EOS", "a row that has ended gets PAD, the pad id given, at every later step"),
          "first_position": ("first position's logits", "the next token comes from the last position, "
                             "logits[:, -1]: without the cache the model returns one row per token fed"),
          "break_before_append": ("the last EOS not written", "append this step's tokens first, then stop if every "
                                  "row has ended: breaking before the append drops the last row's EOS"),
          "cache_unused": ("cache not used", "with use_cache, make one cache (model.new_cache()) and feed it only "
                           "the newest token at each step, passing cache=cache to model.decode")}
# The positions a new cache of the stand-in model holds before decoding (a prefix the model keeps): decoding
# without the cache, from position 0, gives other tokens, so that the tokens alone show the cache was not used.
CACHE_START = 3


CACHE_AS_TGT_MASK = mistake("cache passed as tgt_mask", "decode's fourth parameter is tgt_mask: decode(tgt_in, "
                            "memory, src_mask, tgt_mask=None, cache=None); pass the cache by name, cache=cache")
CACHE_UNUSED = mistake(*GREEDY["cache_unused"])


def check_greedy_decode(task):
    judge = Judge()
    # seed 1 first: its rows end two steps apart, so no two classic stops give the same output there
    for seed, bias, rows, endless in ((1, 0.5, (0, 1, 2), ()), (0, 1.0, (0, 1), ()), (2, 1.5, (2, 0, 1, 1), ()),
                                      (3, 0.0, (1, 2), ()), (4, 1.0, (0, 1, 2), (1,)),
                                      *((seed, 1.0, (0, 1, 2), ()) for seed in FRESH)):
        tables, sources = tables_of(seed, eos_bias=bias, endless=endless), np.array(rows)
        src = np.stack([sources, sources], axis=1)                     # (B, 2)
        for use_cache, start in ((True, CACHE_START), (False, 0)):
            found = task.call("greedy", tables, src, 8, BOS, EOS, PAD, use_cache, start)
            if found.get("cache_as_tgt_mask"):
                raise Wrong(f"greedy decoding, use_cache={use_cache} (seed {seed}): {CACHE_AS_TGT_MASK}")
            case = f"{len(rows)} rows with sources {rows}{', source 1 never ending' if endless else ''}, max_len 8, " \
                + (f"use_cache=True, a new cache holding {start} positions" if use_cache else "use_cache=False") \
                + f" (seed {seed})"
            try:
                judge.compare("greedy decoding: the argmax token at each step, PAD after EOS, stop when all have "
                              "ended", case, found["rows"], expect("greedy", tables, sources, 8, use_cache, "right", start),
                              [(*GREEDY[v], expect("greedy", tables, sources, 8, use_cache, v, start)) for v in GREEDY])
            except Wrong:        # the tokens are wrong: the child's count of calls without the cache names why
                if use_cache and found.get("calls_without_cache"):
                    raise Wrong(f"greedy decoding, {case}: {CACHE_UNUSED}") from None
                raise
    return "five stand-in models, 2 to 4 distinct rows ending at different steps or never, with and without the cache"


BOS_COUNTED = ("length counts BOS", "the length in the penalty is the number of tokens after BOS")
ALPHA_IGNORED = ("alpha ignored", "the length penalty is ((5 + length) / 6) ** alpha, with the alpha given")
ALPHA_IGNORED_FINISHED = ("alpha ignored in the finished scores", "a finished hypothesis scores log-prob / "
                          "length_penalty(its length, alpha) with the alpha given, as the live ones and the bound do")
BEAM = {"unnormalised": ("no length normalisation", "divide a finished hypothesis's log-probability by "
                         "length_penalty(its length, alpha), or short outputs always win"),
        "alpha_ignored": ALPHA_IGNORED, "alpha_one": ALPHA_IGNORED,                  # alpha fixed at 0.6 or at 1
        "alpha_ignored_finished": ALPHA_IGNORED_FINISHED, "alpha_one_finished": ALPHA_IGNORED_FINISHED,
        "keeps_k_squared": ("keeps k x k candidates", "after extending every beam, keep only the beam_size best"),
        "first_finished_stops": ("stops at the first finished hypothesis", "a longer hypothesis may still score "
                                 "better after the length penalty: go on while a live beam can beat the best"),
        "k_finished_stops": ("stops once beam_size have finished", "a longer hypothesis may still score better "
                             "after the length penalty: go on while a live beam can beat the best finished one"),
        "raw_logits": ("scores are raw logits, not log-probabilities", "the model returns logits: add up "
                       "logits.log_softmax(-1), so that every step adds a log-probability"),
        "probabilities": ("probabilities added, not log-probabilities", "a hypothesis's probability is the "
                          "product of its tokens' probabilities: add their logs, logits.log_softmax(-1)"),
        "bos_counted": BOS_COUNTED, "bos_counted_all": BOS_COUNTED,
        "no_penalty": ("length penalty ignored", "every score is log-prob / length_penalty(length, alpha): the "
                       "finished hypotheses', the live ones' at max_len, and the bound for stopping early"),
        "live_raw": ("live hypotheses not normalised", "at max_len the live hypotheses compete with the finished "
                     "ones as log-prob / length_penalty(max_len, alpha), like them"),
        "raw_bound": ("stopping bound without the penalty", "a live beam can still reach its log-prob / "
                      "length_penalty(max_len, alpha): stop only when the best finished score beats that"),
        "top_k": ("only beam_size candidates", "take up to 2 * beam_size candidates, so that beam_size of them stay "
                  "live even when some end with EOS"),
        "ascending": ("kept the worst candidates", "keep the best candidates by summed log-probability, "
                      "scores[:, None] + log_probs, sorted best first: np.argsort(-candidates)"),
        "not_accumulated": ("beam scores not added", "rank the candidates by the beam's summed log-probability plus "
                            "the token's, scores[:, None] + log_probs"),
        "multiplied": ("multiplied by the length penalty", "divide by length_penalty: log-probabilities are below 0, "
                       "and dividing them by a penalty above 1 is what favours longer outputs")}
LIVE_DROPPED = mistake("live hypotheses dropped at max_len", "when max_len is reached, the live hypotheses join the "
                       "finished ones (divided by length_penalty(max_len, alpha)): with none finished, they are all "
                       "there is")
# (seed, beam size, alpha, max_len, EOS bias): widths 1 to 5, alpha 0 to 2, some rows never end by max_len
# (seed 12 before 11: there stopping at the first finished hypothesis and at beam_size finished differ;
# seed 14 before 11: there alpha ignored in the finished scores alone is wrong, stopping at beam_size finished not;
# seed 19 before 11: there so is alpha fixed at 1 in the finished scores, which seed 14 does not catch;
# seed 21 first: there every classic mistake that fails gives an answer no other one gives, adding
# probabilities among them, which seed 12 cannot tell from alpha fixed at 1)
BEAMS = [(21, 3, 0.6, 7, -0.5), (10, 1, 0.6, 7, -0.5), (12, 3, 0.6, 7, -0.5), (14, 2, 1.5, 7, -0.5), (19, 2, 2.0, 7, -0.5),
         (11, 2, 0.0, 7, -0.5), (11, 2, 1.5, 7, -0.5),
         (10, 2, 1.5, 7, -0.5), (13, 2, 1.5, 7, -0.5), (14, 5, 1.0, 7, -0.5), (15, 3, 2.0, 7, -0.5),
         (22, 2, 1.5, 7, -0.5), (13, 3, 1.5, 4, -1.5), (12, 2, 2.0, 5, -1.0), (13, 3, 1.0, 6, 0.0)]


def unnormalised(tables, seed):
    """The tables as logits, not log-probabilities: each row shifted by a constant of its
    own (softmax gives the same probabilities; summing raw logits ranks beams otherwise)."""
    return tables + np.random.default_rng(seed + 100).normal(0.0, 3.0, tables.shape[:-1] + (1,))


def check_beam_search(task):
    judge = Judge()
    for seed, beam, alpha, max_len, bias in BEAMS + [(seed, 3, 1.0, 7, -0.5) for seed in FRESH]:
        tables, sources = unnormalised(tables_of(seed, sources=4, vocab=9, eos_bias=bias), seed), np.array([0, 2, 1, 3])
        case = f"beam {beam}, alpha {alpha}, 4 rows with sources (0, 2, 1, 3), max_len {max_len} (seed {seed})"
        try:
            got = task.call("beam", tables, np.stack([sources, sources], axis=1), max_len, BOS, EOS, beam, alpha)
        except ValueError as err:
            if "empty" not in str(err):
                raise
            raise Wrong(f"beam search, {case}: {LIVE_DROPPED}") from None
        if not isinstance(got, list) or len(got) != len(sources) or \
                any(not isinstance(row, list) or len(row) > max_len for row in got):
            raise Wrong(f"beam search, {case}: expected a list of {len(sources)} token lists (one a source), each "
                        f"of at most max_len = {max_len} tokens")
        width = max(map(len, got)) if got else 0
        padded = np.array([list(row) + [-1] * (width - len(row)) for row in got])
        judge.compare("beam search: the best hypothesis by log-probability / ((5 + length) / 6) ** alpha", case,
                      padded, expect("beam", tables, sources, max_len, beam, alpha, "right"),
                      [(*BEAM[v], expect("beam", tables, sources, max_len, beam, alpha, v)) for v in BEAM])
    return "fifteen beam widths, length penalties and lengths (1 to 5, alpha 0 to 2), four distinct rows"
