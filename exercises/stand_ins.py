"""The stand-ins a check's probes hand the student's code in place of a whole model: what
the code under check calls, with answers the judge can compute (exercises/probes.py uses
them; like the probes, they judge nothing)."""

import numpy as np


class StandInModel:
    """An encoder-decoder whose next-token logits are tables[source, position, last token]:
    each row's source (src[:, 0]) picks its table, and the position is that of the last token
    fed, counted by the cache when decoding with one (so a decoder that feeds the cache
    anything but the newest token gets other answers)."""

    def __init__(self, tables):
        self.tables = tables                                          # (sources, positions, V, V)
        self.calls_without_cache = 0                                  # decode calls given no cache
        self.mask_not_boolean = False                                 # a decode call given a tgt_mask not boolean

    def make_src_mask(self, src):
        return None

    def encode(self, src, src_mask=None):
        from autograd import Tensor
        return Tensor(np.asarray(src, dtype=float)[:, :1, None])       # (B, 1, 1): the source id

    def new_cache(self):
        return {"seen": 0}

    def decode(self, ys, memory, src_mask, tgt_mask=None, cache=None):
        """The real model's signature (transformer/encoder_decoder.py): a cache passed fourth
        lands in tgt_mask, which the real model refuses as a mask that is not boolean."""
        from autograd import Tensor
        if tgt_mask is not None and getattr(tgt_mask, "dtype", None) != np.bool_:
            self.mask_not_boolean = True
            raise TypeError(f"attention mask must be boolean (True = may attend), got {type(tgt_mask).__name__} "
                            "as decode's tgt_mask: decode(tgt_in, memory, src_mask, tgt_mask=None, cache=None)")
        ys = np.asarray(ys)
        self.calls_without_cache += cache is None
        start = 0 if cache is None else cache["seen"]
        if cache is not None:
            cache["seen"] += ys.shape[1]
        sources = memory.data[:, 0, 0].astype(int)
        positions = (start + np.arange(ys.shape[1])) % self.tables.shape[1]
        return Tensor(self.tables[sources[:, None], positions[None, :], ys])      # (B, T, V)


class PrefilledStandInModel(StandInModel):
    """The stand-in model whose new caches already hold `cache_start` positions (a prefix the
    model keeps, as a prompt's would be; the judge's number), so that decoding without the
    cache, from position 0, gives other tokens than decoding with it: the judge's verdict
    rests on the tokens. calls_without_cache only names that mistake once the tokens are
    wrong, as the student's code can reset it."""

    def __init__(self, tables, cache_start):
        super().__init__(tables)
        self.cache_start = cache_start

    def new_cache(self):
        return {"seen": self.cache_start}


class StandInRotation:
    """A stand-in for RoPE's part in multi-head attention (rotate_queries_and_keys, as in
    transformer/relative_position.py): each query and key multiplied by the judge's factor of
    its position, the queries' counted from the offset the layer passes (the positions its
    cache held before the call), the keys' from 0; so that a wrong offset shows in the
    outputs, which the judge computes."""

    def __init__(self, factors):
        self.factors = factors                                        # (positions,)

    def _at(self, first, length):
        from autograd import Tensor
        return Tensor(np.take(self.factors, first + np.arange(length), mode="wrap")[:, None])   # (T, 1)

    def rotate_queries_and_keys(self, q, k, q_offset=0):
        return q * self._at(q_offset, q.shape[2]), k * self._at(0, k.shape[2])
