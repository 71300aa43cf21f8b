"""nn.init.skip_init: a model built under it draws nothing from the generator (the seed's
stream is left as it was) and holds memory its loader overwrites."""
import numpy as np

import nn
from autograd import default_generator, manual_seed


def test_skip_init_draws_nothing_and_ends_with_its_block():
    manual_seed(3)
    expected = nn.Linear(5, 7).weight.data                         # the first draw after the seed
    manual_seed(3)
    with nn.init.skip_init():
        skipped = nn.Sequential(nn.Linear(300, 200), nn.Embedding(50, 8))
    after = nn.Linear(5, 7).weight.data
    np.testing.assert_array_equal(after, expected)                  # the stream is untouched by the skipped model
    assert skipped[0].weight.shape == (200, 300) and skipped[1].weight.dtype == np.float32
    state = default_generator().bit_generator.state
    nn.Linear(2, 2)
    assert default_generator().bit_generator.state != state        # outside the block, init draws again
