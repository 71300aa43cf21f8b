"""Training BPE in time proportional to what each merge changes, not to the whole text.

`transformer.data.bpe.train_reference` recounts every adjacent pair of every chunk after every
merge: for 1,000 merges on a megabyte that is a thousand passes over the text. But a merge
of (a, b) changes only the chunks that contain a b, and in those only the pairs around
each occurrence. So this trainer keeps, across merges:

- `pair_count[pair]`: how often each pair occurs in the text (chunks weighted by count);
- `holders[pair]`: the distinct chunks in which the pair occurs;
- a heap of (-count, tie, pair) entries, from which the most frequent pair (ties: the
  smallest pair of ids, or the greatest pair of byte strings, as tie_break says) is popped;
  an entry whose count is no longer the pair's count is stale and skipped (a changed count
  is pushed again rather than found and updated in the heap).

A merge visits only `holders[pair]`: each such chunk's pairs are taken out of the counts,
the chunk is rewritten, and its new pairs are put in. Counting distinct chunks once, with
their frequency, is what makes this fast on text: a megabyte of English holds about 200,000
chunks but a few tens of thousands of distinct ones. The merges are those of
`train_reference`, tie for tie (tests compare them on every test text).
"""

import heapq
from collections import Counter, defaultdict
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from transformer.data.bpe import (BYTES, END_OF_TEXT, PATTERN, BPETokenizer, check_training_input, chunk_counts, merge,
                                  stream_cut, streamable)


class Descending:
    """A heap key that sorts the greatest first: tie_break="bytes" pops, of the pairs of
    one count, the greatest pair of byte strings from a heap that pops the smallest."""

    def __init__(self, key):
        self.key = key

    def __lt__(self, other):
        return self.key > other.key

    def __eq__(self, other):
        return self.key == other.key


def parallel_chunk_counts(text, pattern, special_tokens, workers):
    """chunk_counts of text, counted in `workers` processes on as many stretches of it, cut
    where no pre-split piece can span the cut (stream_cut): the same counts as one process."""
    if workers == 1:
        return chunk_counts(text, pattern, special_tokens)
    streamable(pattern, special_tokens, "BPE training with workers > 1")
    cuts = [0]
    for part in range(1, workers):
        cuts.append(max(stream_cut(text, part * len(text) // workers), cuts[-1]))
    stretches = [text[a:b] for a, b in zip(cuts, cuts[1:] + [len(text)])]
    with ProcessPoolExecutor(workers, mp_context=get_context("fork")) as pool:   # no re-import of __main__
        parts = pool.map(chunk_counts, stretches, [pattern] * workers, [tuple(special_tokens)] * workers)
        return sum(parts, Counter())


def apply_merge(pair, new_id, words, counts, pair_count, holders):
    """Rewrite the chunks holding `pair` with new_id in its place, updating the pairs' counts
    and holders; returns the pairs whose counts changed."""
    changed = set()
    for index in holders.pop(pair):
        old, count = words[index], counts[index]
        new = merge(old, pair, new_id)
        for p in zip(old, old[1:]):
            pair_count[p] -= count
            changed.add(p)
        for p in zip(new, new[1:]):
            pair_count[p] += count
            changed.add(p)
        for p in set(zip(old, old[1:])) - set(zip(new, new[1:])):
            holders[p].discard(index)
        for p in zip(new, new[1:]):
            holders[p].add(index)
        words[index] = new
    return changed


def train(text, vocab_size, pattern=PATTERN, special_tokens=(END_OF_TEXT,), tie_break="ids", workers=1):
    """A BPETokenizer learned from text: the same merges as train_reference, incrementally.
    workers: processes that count the pre-split chunks (the same merges as one)."""
    check_training_input(text, vocab_size, special_tokens, tie_break)
    counted = parallel_chunk_counts(text, pattern, special_tokens, workers)
    words, counts = list(counted), list(counted.values())                  # distinct chunks, how often each
    pair_count, holders = defaultdict(int), defaultdict(set)
    for index, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pair_count[pair] += counts[index]
            holders[pair].add(index)
    token_bytes = [bytes([b]) for b in range(BYTES)]
    tie = (lambda pair: pair) if tie_break == "ids" else (lambda pair: Descending(
        (token_bytes[pair[0]], token_bytes[pair[1]])))
    heap = [(-count, tie(pair), pair) for pair, count in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    for new_id in range(BYTES, vocab_size - len(special_tokens)):
        while heap and -heap[0][0] != pair_count.get(heap[0][2], 0):
            heapq.heappop(heap)                                              # stale: the count has changed
        if not heap:
            break                                                            # nothing left to merge
        pair = heapq.heappop(heap)[2]
        merges.append(pair)
        token_bytes.append(token_bytes[pair[0]] + token_bytes[pair[1]])
        for p in apply_merge(pair, new_id, words, counts, pair_count, holders):
            if pair_count[p] > 0:
                heapq.heappush(heap, (-pair_count[p], tie(p), p))
            else:
                del pair_count[p]
                holders.pop(p, None)
    return BPETokenizer(merges, special_tokens, pattern)
