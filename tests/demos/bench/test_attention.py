"""The products' work that demos.bench.attention times at numpy's rate."""

import numpy as np

from demos.bench.attention import product_limits
from transformer.masks import causal_mask


def test_product_limits_count_the_composed_and_the_visible_scores():
    # 6 matrices of length 5, d_head 4: the composed path's six products over all 25 scores,
    # the fused op's seven over the 15 a causal mask leaves
    limits = product_limits(6, 5, 4, causal_mask(5), gflops=2.0)
    assert limits["composed_mflop"] * 1e6 == 6 * 2 * 25 * 4 * 6
    assert limits["fused_mflop"] * 1e6 == 7 * 2 * 15 * 4 * 6
    assert np.isclose(limits["fused_blas_ms"], 7 * 2 * 15 * 4 * 6 / 2e9 * 1e3)
    assert np.isclose(limits["composed_blas_ms"], 6 * 2 * 25 * 4 * 6 / 2e9 * 1e3)
    everything = product_limits(6, 5, 4, np.ones((5, 5), bool), gflops=2.0)
    assert np.isclose(everything["fused_mflop"], limits["composed_mflop"] * 7 / 6)   # no mask: seven products to six


def test_ratio_of_rounds_is_the_median_of_each_rounds_ratio_not_a_ratio_of_medians():
    from demos.bench.attention import ratio_of_rounds
    rounds = {"ours": [1.0, 4.0, 9.0], "theirs": [2.0, 2.0, 3.0]}      # ratios 0.5, 2, 3
    assert ratio_of_rounds(rounds, "ours", "theirs") == 2.0
    rounds = {"ours": [1.0, 8.0, 9.0], "theirs": [2.0, 2.0, 9.0]}      # ratios 0.5, 4, 1
    assert ratio_of_rounds(rounds, "ours", "theirs") == 1.0                # medians' ratio: 8 / 2 = 4
