"""Training BPE in time proportional to what each merge changes, not to the whole text.

`transformer.data.bpe.train_reference` recounts every adjacent pair of every chunk after every
merge: for 1,000 merges on a megabyte that is a thousand passes over the text. But a merge
of (a, b) changes only the chunks that contain a b, and in those only the pairs around
each occurrence. So this trainer keeps, across merges:

- `pair_count[pair]`: how often each pair occurs in the text (chunks weighted by count);
- `holders[pair]`: the distinct chunks in which the pair occurs;
- a heap of (-count, pair) entries, from which the most frequent pair (ties: the smallest)
  is popped; an entry whose count is no longer the pair's count is stale and skipped
  (a changed count is pushed again rather than found and updated in the heap).

A merge visits only `holders[pair]`: each such chunk's pairs are taken out of the counts,
the chunk is rewritten, and its new pairs are put in. Counting distinct chunks once, with
their frequency, is what makes this fast on text: a megabyte of English holds about 200,000
chunks but a few tens of thousands of distinct ones. The merges are those of
`train_reference`, tie for tie (tests compare them on every test text).
"""

import heapq
from collections import defaultdict

from transformer.data.bpe import BYTES, END_OF_TEXT, PATTERN, BPETokenizer, check_training_input, chunk_counts, merge


def train(text, vocab_size, pattern=PATTERN, special_tokens=(END_OF_TEXT,)):
    """A BPETokenizer learned from text: the same merges as train_reference, incrementally."""
    check_training_input(text, vocab_size, special_tokens)
    counted = chunk_counts(text, pattern, special_tokens)
    words, counts = list(counted), list(counted.values())                  # distinct chunks, how often each
    pair_count, holders = defaultdict(int), defaultdict(set)
    for index, word in enumerate(words):
        for pair in zip(word, word[1:]):
            pair_count[pair] += counts[index]
            holders[pair].add(index)
    heap = [(-count, pair) for pair, count in pair_count.items()]
    heapq.heapify(heap)
    merges = []
    for new_id in range(BYTES, vocab_size - len(special_tokens)):
        while heap and -heap[0][0] != pair_count.get(heap[0][1], 0):
            heapq.heappop(heap)                                              # stale: the count has changed
        if not heap:
            break                                                            # nothing left to merge
        _, pair = heapq.heappop(heap)
        merges.append(pair)
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
        for p in changed:
            if pair_count[p] > 0:
                heapq.heappush(heap, (-pair_count[p], p))
            else:
                del pair_count[p]
                holders.pop(p, None)
    return BPETokenizer(merges, special_tokens, pattern)
