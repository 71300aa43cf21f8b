"""Library code that computes what an exercise asks now calls the exercise's region, so a
copy handing it out holds no second solution: each such function still gives what it gave
(teacher side), and in a copy handing everything out raises the exercise's
NotImplementedError (it really goes through the region); no causal mask is built by hand."""
import os
import subprocess
import sys

import numpy as np
import pytest

from autograd import Tensor, no_grad
from transformer.families.decoder_only import DecoderOnly, gpt_config, llama_config


def generate_before(model, prompt, steps, use_cache):
    """DecoderOnly.generate's greedy loop as it was before it called greedy_decode (the reference)."""
    tokens, window, cache, logged = np.asarray(prompt), model.config.max_len, None, []
    with no_grad():
        for _ in range(steps):
            context = tokens[:, -window:]
            if not use_cache:
                logits = model(context)
            elif cache is None or tokens.shape[1] > window:
                cache = model.new_cache()
                logits = model(context, cache)
            else:
                logits = model(context[:, len(cache):], cache)
            logged.append(logits.data[:, -1])
            tokens = np.concatenate([tokens, logits.data[:, -1].argmax(-1)[:, None]], axis=1)
    return tokens, np.stack(logged, axis=1)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("use_cache", [True, False])
def test_greedy_generate_gives_the_tokens_and_logits_it_gave_before(seed, use_cache):
    r = np.random.default_rng(seed)
    make = gpt_config if seed % 2 == 0 else llama_config
    model = DecoderOnly(make(13, block_size=6, n_layer=2, n_head=2, n_embd=8, dropout=0.0))
    model.eval()
    prompt = r.integers(0, 13, (int(r.integers(1, 4)), int(r.integers(1, 6))))
    steps = int(r.integers(3, 11))                       # past block_size 6 on most seeds: the window slides
    tokens, logits = model.generate(prompt, steps, use_cache=use_cache, return_logits=True)
    want_tokens, want_logits = generate_before(model, prompt, steps, use_cache)
    assert tokens.shape == (len(prompt), prompt.shape[1] + steps)
    np.testing.assert_array_equal(tokens, want_tokens)
    np.testing.assert_array_equal(logits, want_logits)
    np.testing.assert_array_equal(model.generate(prompt, steps, temperature=0.7, top_k=1, use_cache=use_cache),
                                  want_tokens)          # top_k 1 is greedy too
