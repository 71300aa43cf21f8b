"""The checks of decoding."""

import math

import numpy as np

from exercises.checks.feedback import Wrong, compare, rng


BOS, EOS, PAD = 0, 1, 2


class MarkovModel:
    """A stand-in encoder-decoder whose next-token log-probabilities depend on the last
    token only (table[last, next]), so every decoder's right answer is known."""

    def __init__(self, table):
        self.log_probs = np.log(np.asarray(table, dtype=float) + 1e-12)

    def make_src_mask(self, src):
        return None

    def encode(self, src, mask):
        from autograd import Tensor
        return Tensor(np.zeros((len(src), 1, 1)))

    def new_cache(self):
        return {}

    def decode(self, ys, memory, src_mask, cache=None):
        from autograd import Tensor
        return Tensor(self.log_probs[np.asarray(ys)])                   # (B, T, V)


def check_greedy_decode():
    from transformer.decoding import greedy_decode
    # tokens: 0 BOS, 1 EOS, 2 PAD, 3 a, 4 b.  From BOS: a; a -> b; b -> EOS.
    table = [[0, .1, 0, .6, .3], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0, .1, 0, .2, .7], [0, .8, 0, .1, .1]]
    for use_cache in (True, False):
        got = greedy_decode(MarkovModel(table), np.zeros((2, 3), dtype=np.int64), 6, BOS, EOS, PAD, use_cache=use_cache)
        compare(f"greedy_decode (use_cache={use_cache}) where BOS -> a -> b -> EOS is most likely", got,
                np.array([[3, 4, 1], [3, 4, 1]]),
                [(np.array([[3, 4, 1, 3, 4, 1], [3, 4, 1, 3, 4, 1]])[:, :got.shape[1]] if got.ndim == 2 else got[:0],
                  "decoding goes on after EOS: stop when every row has produced EOS")])
    return "with and without the cache"


def check_beam_search():
    from transformer.decoding import beam_search
    # From BOS: EOS (0.4) or a (0.6); a -> b (0.7); b -> EOS (0.88).  "EOS" has log-prob -0.92,
    # "a b EOS" -1.00 but -0.84 after the length penalty ((5 + 3) / 6) ** 0.6.
    table = [[0, .4, 0, .6, 0], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0, .1, 0, .2, .7], [0, .88, 0, .06, .06]]
    got = beam_search(MarkovModel(table), np.zeros((1, 3), dtype=np.int64), 6, BOS, EOS, beam_size=3)
    if got == [[1]]:
        raise Wrong("beam_search returned 'EOS' over 'a b EOS': without length normalisation (divide a finished "
                    "hypothesis's log-probability by length_penalty(its length)) short outputs always win")
    compare("beam_search (beam 3) on a model where 'a b EOS' wins after the length penalty", got[0], [3, 4, 1])
    greedy_table = [[0, .1, 0, .5, .4], [0, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0, .9, 0, .05, .05], [0, .9, 0, .05, .05]]
    got = beam_search(MarkovModel(greedy_table), np.zeros((2, 3), dtype=np.int64), 5, BOS, EOS, beam_size=1)
    compare("beam_search with beam 1 (greedy) on two rows", np.array(got), [[3, 1], [3, 1]])
    return "the length penalty deciding, and beam 1"


def check_kv_cache():
    from autograd import manual_seed, no_grad
    from transformer.families.decoder_only import DecoderOnly, DecoderOnlyConfig
    prompt = np.array([[1, 5, 2, 7]])
    results = {}
    for positional in ("none", "rope"):
        manual_seed(0)
        model = DecoderOnly(DecoderOnlyConfig(vocab=9, d_model=16, num_heads=2, d_ff=32, num_layers=2, max_len=16,
                                              positional=positional, pad_id=None)).eval()
        with no_grad():
            cached = model.generate(prompt, 6, use_cache=True, return_logits=True)[1]
            full = model.generate(prompt, 6, use_cache=False, return_logits=True)[1]
        results[positional] = (np.asarray(cached), np.asarray(full))
    none_ok = np.allclose(*results["none"], atol=1e-4)
    rope_ok = np.allclose(*results["rope"], atol=1e-4)
    if none_ok and not rope_ok:
        raise Wrong("the cached keys and values are right, but the position offset is lost: the new queries sit "
                    "at positions past.. (past = how many positions the cache holds), and RoPE needs that offset")
    compare("logits of 6 generated tokens, with the cache against without (no positions)", *results["none"], atol=1e-4)
    compare("the same with RoPE positions", *results["rope"], atol=1e-4)
    return "cached decoding equal to uncached, without positions and with RoPE"
