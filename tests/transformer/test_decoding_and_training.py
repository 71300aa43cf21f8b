"""Greedy and beam decoding on a hand-built model with a known answer; tasks; training."""

import numpy as np
import pytest

from autograd import Tensor
from transformer.data import tasks
from transformer.decoding import beam_search, greedy_decode, length_penalty
from transformer.kv_cache import KVCache
from transformer.masks import causal_mask
from transformer.training.seq2seq import TrainConfig, evaluate, train

BOS, EOS, A, B, C = 1, 2, 3, 4, 5


class ScriptedModel:
    """A stand-in 'model' whose next-token probabilities depend only on the prefix:
    after BOS: A 0.6, B 0.4;  after BOS A: C 0.34, A 0.33, B 0.33;  after BOS B: EOS 0.9;
    anything else: EOS.  Greedy picks A then C (p = 0.6 * 0.34 * ...); the best whole
    sequence is B EOS (p = 0.36), which beam search finds."""

    vocab = 6

    def make_src_mask(self, src):
        return None

    def encode(self, src, src_mask=None):
        return Tensor(np.zeros((len(src), 1, 1)))

    def _next(self, prefix):
        p = np.full(self.vocab, 1e-9)
        key = tuple(prefix)
        if key == (BOS,):
            p[A], p[B] = 0.6, 0.4
        elif key == (BOS, A):
            p[C], p[A], p[B] = 0.34, 0.33, 0.33
        elif key == (BOS, B):
            p[EOS], p[A] = 0.9, 0.1
        elif key == (BOS, A, C):
            p[EOS], p[A] = 0.5, 0.5
        else:
            p[EOS] = 1.0
        return np.log(p / p.sum())

    def decode(self, ys, memory, src_mask):
        ys = np.asarray(ys)
        logits = np.zeros((ys.shape[0], ys.shape[1], self.vocab))
        for i, row in enumerate(ys):
            for t in range(ys.shape[1]):
                logits[i, t] = self._next(row[: t + 1])
        return Tensor(logits)


def test_greedy_decoding_follows_the_argmax_and_stops_at_eos():
    out = greedy_decode(ScriptedModel(), np.zeros((2, 3), np.int64), max_len=6, bos=BOS, eos=EOS, pad=0, use_cache=False)
    np.testing.assert_array_equal(out, [[A, C, EOS], [A, C, EOS]])


def test_beam_search_finds_the_more_probable_sequence():
    model = ScriptedModel()
    assert beam_search(model, np.zeros((1, 3), np.int64), 6, BOS, EOS, beam_size=1, alpha=0.0)[0] == [A, C, EOS]
    assert beam_search(model, np.zeros((1, 3), np.int64), 6, BOS, EOS, beam_size=4, alpha=0.0)[0] == [B, EOS]


def test_length_penalty_is_gnmt():
    assert length_penalty(1, 0.0) == 1.0
    assert length_penalty(7, 0.6) == pytest.approx((12 / 6) ** 0.6)


@pytest.mark.parametrize("task", ["copy", "reverse"])
def test_task_batches(task):
    batch = tasks.make_batch(task, 50, 2, 6, 5, np.random.default_rng(0))
    for src, tin, tout in zip(batch.src, batch.tgt_in, batch.tgt_out):
        seq = [int(t) for t in src if t != tasks.PAD]
        assert 2 <= len(seq) <= 6 and all(3 <= t < 8 for t in seq)
        want = [int(t) for t in tasks.answer(task, np.array(seq))]
        assert list(tout[: len(seq) + 1]) == want + [tasks.EOS]
        assert list(tin[: len(seq) + 1]) == [tasks.BOS] + want
        assert (tout[len(seq) + 1:] == tasks.PAD).all()
    again = tasks.make_batch(task, 50, 2, 6, 5, np.random.default_rng(0))
    np.testing.assert_array_equal(batch.src, again.src)


def test_task_errors():
    with pytest.raises(ValueError, match="unknown task 'sort'"):
        tasks.make_batch("sort", 2, 1, 3, 4, np.random.default_rng(0))
    with pytest.raises(ValueError, match="min_len <= max_len"):
        tasks.make_batch("copy", 2, 4, 3, 4, np.random.default_rng(0))


def test_short_training_run_halves_the_copy_loss(tmp_path):
    cfg = TrainConfig(task="copy", num_symbols=6, max_len=5, batch_size=32, max_steps=150, eval_every=150,
                      eval_size=50, warmup=30, decay_steps=150, seed=0, out_dir=str(tmp_path))
    lines = []
    model, metrics = train(cfg, log=lines.append, d_model=32, num_heads=2, d_ff=64)
    losses = metrics["history"]["loss"]
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    last = metrics["history"]["evals"][-1]                 # the learning rate it printed, recorded
    assert last["step"] == 150 and last["lr"] == pytest.approx(cfg.lr / 10)     # decayed by decay_steps
    assert any(line.startswith("step   150") and f"lr {last['lr']:.2e}" in line for line in lines)
    assert (tmp_path / "metrics.json").exists() and (tmp_path / "checkpoint.npz").exists()
    again = evaluate(model, tasks.heldout_set("copy", 50, 5, 6, seed=10_000), 6)
    assert again["exact_match"] == metrics["exact_match"]


def test_same_seed_same_losses(tmp_path):
    cfg = TrainConfig(task="reverse", num_symbols=5, max_len=4, batch_size=8, max_steps=5, eval_every=5,
                      eval_size=4, seed=3, out_dir=str(tmp_path))
    small = dict(d_model=16, num_heads=2, d_ff=16, num_encoder_layers=1, num_decoder_layers=1)
    first = train(cfg, log=lambda line: None, **small)[1]["history"]["loss"]
    second = train(cfg, log=lambda line: None, **small)[1]["history"]["loss"]
    assert first == second


class EarlyStopTrap(ScriptedModel):
    """Every prefix shorter than 4 symbols continues with A (0.9) but also offers EOS (0.05):
    the early EOS candidates are many but each is poor; the best sequence is A A A A EOS."""

    def _next(self, prefix):
        p = np.full(self.vocab, 1e-9)
        if len(prefix) - 1 < 4:
            p[A], p[EOS], p[B] = 0.9, 0.05, 0.05
        else:
            p[EOS] = 1.0
        return np.log(p / p.sum())


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_search_does_not_stop_at_the_first_poor_finished_hypotheses(alpha):
    out = beam_search(EarlyStopTrap(), np.zeros((1, 3), np.int64), 8, BOS, EOS, beam_size=4, alpha=alpha)
    assert out[0] == [A, A, A, A, EOS]


def test_beam_search_returns_live_hypotheses_when_max_len_runs_out():
    out = beam_search(EarlyStopTrap(), np.zeros((1, 3), np.int64), 2, BOS, EOS, beam_size=2, alpha=0.0)
    assert out[0] == [A, A]



@pytest.mark.parametrize("seed", range(3))
def test_the_cache_mask_is_none_exactly_when_every_key_may_be_attended_to(seed):
    rng = np.random.default_rng(seed)
    batch, prompt = 2, int(rng.integers(2, 6))
    cache = KVCache(1)
    first = cache.extend(np.ones((batch, prompt), bool))                         # the prompt: causal, not all
    np.testing.assert_array_equal(first, np.broadcast_to(causal_mask(prompt), (batch, 1, prompt, prompt)))
    assert cache.extend(np.ones((batch, 1), bool)) is None                       # one new token after every key
    flags = np.ones((batch, 1), bool)
    flags[int(rng.integers(0, batch)), 0] = False                                # one row's new token is padding
    padded = cache.extend(flags)                                                 # (B, 1, 1, prompt + 2)
    np.testing.assert_array_equal(padded[:, 0, 0, -1], flags[:, 0])
    assert padded.shape == (batch, 1, 1, prompt + 2) and padded[..., :-1].all()
    assert cache.extend(np.ones((batch, 1), bool)) is not None                   # the padding stays masked
    assert len(cache) == prompt + 3
