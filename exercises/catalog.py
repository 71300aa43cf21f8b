"""The exercises in the order of the lectures: name -> (one-line description, hint), the hint
a {file: hint} where the exercise's regions in two files ask for different things."""

EXERCISES = {
    "value_mul": ("a Value op's backward: the product rule for a * b",
                  "each factor gets out.grad times the *other* factor's data; use += (a Value may be used twice)"),
    "topological_sort": ("order the graph so that every Value comes after its parents",
                         ("a depth-first walk with an explicit stack, not recursion (backward must handle a chain of "
                          "thousands of Values, deeper than Python's stack), and a visited set; append a node once "
                          "all its parents are in")),
    "unbroadcast": ("sum a gradient back to the shape of an input that broadcasting stretched",
                    ("sum over the leading dims broadcasting added, then over dims of size 1 (keepdims=True); "
                     "leave the result in grad, which the line after the region returns")),
    "matmul_backward": ("MatMul's backward: dL/dA and dL/dB",
                        ("dA = grad @ B^T, dB = A^T @ grad (np.swapaxes on the last two dims); mind vectors and "
                         "batches; set grad_a and grad_b, which the line after the region returns")),
    "matmul_loops": ("matmul as a readable Numba loop kernel",
                     "for each (t, i) row and each j, sum a[t, i, k] * b[t, k, j] over k into c[t, i, j]"),
    "softmax": ("softmax, stable for large logits and fully masked rows",
                ("exp(x - row max) / its row sum; a row of -inf (max shifted by 0) gives zeros, a row holding "
                 "NaN or +inf gives NaN; the result keeps x's dtype")),
    "softmax_backward": ("softmax's backward, given its output y",
                         "dx_i = y_i (dy_i - sum_j dy_j y_j)"),
    "log_softmax": ("log-softmax, the stable heart of cross-entropy",
                    "(x - max) - log(sum exp(x - max)); fully masked rows give 0"),
    "layer_norm_backward": ("LayerNorm's backward: dx, dweight, dbias; and RMSNorm's dx",
                            "dx = rstd (g w - mean(g w) - xhat mean(g w xhat)) row by row; RMSNorm's "
                            "(autograd/ops/norm.py) took no mean: its dx has no mean(g w) term; leave it in dx, which the "
                            "line after that region returns"),
    "linear": ("a Linear layer's forward, y = x W^T + b",
               ("flatten x to rows (N, in), multiply by W^T (W is (out, in)), add the bias; keep the names "
                "rows and out: the code after the region saves rows and reshapes out")),
    "embedding": ("an Embedding's lookup",
                  ("the rows of the weight Tensor picked by the ids, with a Tensor op so the gradient reaches "
                   "the table; the rows keep the table's dtype")),
    "adam_step": ("one Adam step with bias correction",
                  ("m, v as moving averages of g and g^2, then p -= lr m_hat / (sqrt(v_hat) + eps), hats / "
                   "(1 - beta^t); change p, m and v in place (m *= ..., p -= ...): the optimizer keeps those "
                   "arrays")),
    "attention": ("scaled dot-product attention with a mask",
                  {"transformer/scores.py": ("return the scores q k^T / sqrt(d_k), (..., T_q, T_k), with Tensor ops so "
                                             "that the gradient reaches q and k (the check runs a backward)"),
                   "transformer/attention.py": ("the scores are made above: masked scores -inf; softmax over the keys; "
                                                "leave them in weights, which the code after the region uses; with "
                                                "Tensor ops on scores, not on scores.data")}),
    "heads": ("splitting d_model into heads, and merging them back",
              "(B, T, d_model) -> (B, T, H, d_head) -> (B, H, T, d_head), and the reverse"),
    "sinusoidal": ("the sinusoidal positional encoding",
                   ("PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(the same), d_model even or odd; "
                    "fill table, the name the line after the region returns")),
    "causal_mask": ("the causal mask of masked self-attention",
                    "query t may see keys 0..t, itself included: a lower triangle"),
    "greedy_decode": ("greedy decoding",
                      "feed the newest token (cache) or the prefix, take the argmax, pad rows already ended"),
    "beam_search": ("beam search with the GNMT length penalty",
                    ("extend every beam by every token, keep the best; finished hypotheses score logp / "
                     "lp(length); add them to finished, which the line after the region reads")),
    "kv_cache": ("the key/value cache of step-by-step decoding",
                 ("append the new keys and values to the cached ones; past = how many positions were cached; "
                  "leave the result in k, v and past, which the code after the region uses")),
}

# The test files that give an exercise's answer away (a numpy definition they compare with),
# and the one notebook that computes three of them by hand: a copy handing the exercise out
# leaves them out (exercises/handout.py).
BY_HAND = "notebooks/03_attention_by_hand.py"                    # numpy softmax, masked attention, per-head slices
TESTS_THAT_REVEAL = {
    "softmax": ("tests/transformer/test_gpt.py", BY_HAND),
    "log_softmax": ("tests/nn/test_layers.py",),                  # a numpy log-softmax in its cross-entropy
    "adam_step": ("tests/nn/test_optim.py",),                     # Adam by hand, bias correction and all
    "attention": ("tests/transformer/test_attention.py", "tests/transformer/test_gpt.py", BY_HAND,
                  "tests/test_presses_to_an_op.py"),                 # stops on the weights' line, spelling it
    "heads": ("tests/transformer/test_gpt.py", BY_HAND),          # the numpy GPT splits and merges heads
    "sinusoidal": ("tests/transformer/test_model.py",),           # a numpy sinusoidal table
    "causal_mask": ("tests/transformer/test_gpt.py",),            # its numpy GPT builds the mask by hand
}

# The kernels whose faster tiers (the loops tier, the engine room) compute an exercise's answer
# too, in code between `# BEGIN TWIN name` and `# END TWIN`: a copy handing the exercise out
# cuts that code, and its kernel registry runs these kernels' numpy definitions
# (autograd/kernels/reference.py, where the regions lie) instead (exercises/twins.py). The
# fused attention holds a softmax, its backward and a log-sum-exp as well as the attention.
FUSED_ATTENTION = ("attention_forward", "attention_backward")
TWIN_KERNELS = {
    "softmax": ("softmax",) + FUSED_ATTENTION,
    "softmax_backward": ("softmax_backward",) + FUSED_ATTENTION,
    "log_softmax": ("log_softmax",) + FUSED_ATTENTION,
    "layer_norm_backward": ("layer_norm_backward",),
    "adam_step": ("adam_step",),
    "attention": FUSED_ATTENTION,
}


def by_item(table, names):
    """{item: [name]}: for each item (a file, a kernel) a table maps some of `names` to, those
    names, in their order."""
    items = {}
    for name in names:
        for item in table.get(name, ()):
            items.setdefault(item, []).append(name)
    return items
