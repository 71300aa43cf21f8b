"""The checks of decoding: greedy decoding and beam search on a stand-in model whose
answers are known (rows with different sources, ending at different steps, an output that
depends on the model's cache), and the key/value cache of a real attention layer and of a
seeded GPT-style model's generation."""

import numpy as np

from exercises.checks.expected import expect
from exercises.checks.feedback import Judge

BOS, EOS, PAD = 0, 1, 2


class StandInModel:
    """An encoder-decoder whose next-token log-probabilities are tables[source, position,
    last token]: each row's source (src[:, 0]) picks its table, and the position is that of
    the last token fed, counted by the cache when decoding with one (so a decoder that feeds
    the cache anything but the newest token gets other answers)."""

    def __init__(self, tables):
        self.tables = tables                                          # (sources, positions, V, V)

    def make_src_mask(self, src):
        return None

    def encode(self, src, mask):
        from autograd import Tensor
        return Tensor(np.asarray(src, dtype=float)[:, :1, None])       # (B, 1, 1): the source id

    def new_cache(self):
        return {"seen": 0}

    def decode(self, ys, memory, src_mask, cache=None):
        from autograd import Tensor
        ys = np.asarray(ys)
        start = 0 if cache is None else cache["seen"]
        if cache is not None:
            cache["seen"] += ys.shape[1]
        sources = memory.data[:, 0, 0].astype(int)
        positions = (start + np.arange(ys.shape[1])) % self.tables.shape[1]
        return Tensor(self.tables[sources[:, None], positions[None, :], ys])      # (B, T, V)


def tables_of(seed, sources=3, positions=6, vocab=7, eos_bias=0.0):
    r = np.random.default_rng(seed)
    logits = r.standard_normal((sources, positions, vocab, vocab)) * 2
    logits[..., EOS] += eos_bias
    logits[..., [BOS, PAD]] = -30.0                                   # never predicted
    return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


GREEDY = {"no_padding": ("no padding after EOS", "a row that has ended gets PAD at every later step"),
          "first_row_stops": ("stops when the first row ends", "stop only when every row has produced EOS"),
          "bos_kept": ("BOS kept in the output", "return the tokens after BOS"),
          "to_max_len": ("runs to max_len", "stop as soon as every row has produced EOS"),
          "prefix_into_cache": ("the whole prefix fed into the cache", "with the cache, feed only the newest "
                                "token: the model keeps the rest")}


def check_greedy_decode():
    from transformer.decoding import greedy_decode
    judge = Judge()
    for seed, (bias, rows) in enumerate(((1.0, (0, 1)), (0.5, (0, 1, 2)), (1.5, (2, 0, 1, 1)), (0.0, (1, 2)))):
        tables, sources = tables_of(seed, eos_bias=bias), np.array(rows)
        src = np.stack([sources, sources], axis=1)                     # (B, 2)
        for use_cache in (True, False):
            got = greedy_decode(StandInModel(tables), src, 8, BOS, EOS, PAD, use_cache=use_cache)
            case = f"{len(rows)} rows with sources {rows}, max_len 8, use_cache={use_cache} (seed {seed})"
            judge.compare("greedy decoding: the argmax token at each step, PAD after EOS, stop when all have ended",
                          case, got, expect("greedy", tables, sources, 8, use_cache, "right"),
                          [(*GREEDY[v], expect("greedy", tables, sources, 8, use_cache, v)) for v in GREEDY])
    return "four stand-in models, 2 to 4 distinct rows ending at different steps, with and without the cache"


BEAM = {"unnormalised": ("no length normalisation", "divide a finished hypothesis's log-probability by "
                         "length_penalty(its length, alpha), or short outputs always win"),
        "alpha_ignored": ("alpha ignored", "the length penalty is ((5 + length) / 6) ** alpha, with the alpha given"),
        "keeps_k_squared": ("keeps k x k candidates", "after extending every beam, keep only the beam_size best"),
        "first_finished_stops": ("stops at the first finished hypothesis", "a longer hypothesis may still score "
                                 "better after the length penalty: go on while a live beam can beat the best"),
        "bos_counted": ("length counts BOS", "the length in the penalty is the number of tokens after BOS")}


def check_beam_search():
    from transformer.decoding import beam_search
    judge = Judge()
    for seed, (beam, alpha) in enumerate(((1, 0.6), (2, 0.0), (3, 0.6), (2, 1.5), (5, 1.0), (3, 2.0))):
        tables, sources = tables_of(10 + seed, sources=4, vocab=9, eos_bias=-0.5), np.array([0, 2, 1, 3])
        got = beam_search(StandInModel(tables), np.stack([sources, sources], axis=1), 7, BOS, EOS, beam_size=beam,
                          alpha=alpha)
        width = max(map(len, got)) if got else 0
        padded = np.array([list(row) + [-1] * (width - len(row)) for row in got])
        case = f"beam {beam}, alpha {alpha}, 4 rows with sources (0, 2, 1, 3), max_len 7 (seed {10 + seed})"
        judge.compare("beam search: the best hypothesis by log-probability / ((5 + length) / 6) ** alpha", case,
                      padded, expect("beam", tables, sources, 7, beam, alpha, "right"),
                      [(*BEAM[v], expect("beam", tables, sources, 7, beam, alpha, v)) for v in BEAM])
    return "six beam widths and length penalties (1 to 5, alpha 0 to 2), four distinct rows"
