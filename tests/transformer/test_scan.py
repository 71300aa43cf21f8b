"""SCAN generated from its grammar: the interpretation, the paper's counts, the splits, and
a short training run."""

import numpy as np
import pytest

from autograd import manual_seed
from transformer.data import scan
from transformer.data.tasks import BOS, EOS, PAD
from transformer.training.seq2seq import TrainConfig, build_model, train

HAND_CHECKED = {
    "jump": "JUMP",
    "turn left": "LTURN",
    "walk right": "RTURN WALK",
    "turn around right": "RTURN RTURN RTURN RTURN",
    "turn opposite left": "LTURN LTURN",
    "run around left": "LTURN RUN LTURN RUN LTURN RUN LTURN RUN",
    "look opposite left thrice": "LTURN LTURN LOOK LTURN LTURN LOOK LTURN LTURN LOOK",
    "jump twice after walk left": "LTURN WALK JUMP JUMP",
    "walk and turn left": "WALK LTURN",
    "look twice and jump opposite right": "LOOK LOOK RTURN RTURN JUMP",
    "turn left twice after run": "RUN LTURN LTURN",
}


@pytest.mark.parametrize("command", sorted(HAND_CHECKED))
def test_interpretation_of_hand_checked_commands(command):
    assert scan.interpret(command) == HAND_CHECKED[command].split()


def test_the_grammar_gives_the_papers_counts():
    commands = scan.all_commands()
    assert len(commands) == len(set(commands)) == 20_910
    lengths = [len(scan.interpret(c)) for c in commands]
    assert max(lengths) == scan.MAX_ACTIONS == 48 and min(lengths) == 1
    assert max(len(c.split()) for c in commands) == scan.MAX_COMMAND_WORDS
    assert scan.interpret("walk around left thrice and run around right thrice").count("WALK") == 12


@pytest.mark.parametrize("name, train_size, test_size", [("simple", 16_728, 4_182), ("length", 16_990, 3_920),
                                                        ("jump", 14_670, 7_706)])
def test_splits_have_the_released_sizes_and_do_not_overlap(name, train_size, test_size):
    train, test = scan.split(name, seed=0)
    assert (len(train), len(test)) == (train_size, test_size)
    assert not {c for c, _ in train} & {c for c, _ in test}
    assert all(scan.interpret(c) == a for c, a in train[:500] + test[:500])
    if name == "length":
        assert max(len(a) for _, a in train) == 22 and min(len(a) for _, a in test) == 24
    if name == "jump":
        assert {c for c, _ in train if "jump" in c.split()} == {"jump"}
        assert all("jump" in c.split() for c, _ in test)


def test_simple_split_is_seeded():
    assert scan.split("simple", seed=1) == scan.split("simple", seed=1)
    assert scan.split("simple", seed=1)[1] != scan.split("simple", seed=2)[1]


@pytest.mark.parametrize("bad", ["jump jump", "turn", "walk twice twice", "walk around", "fly left", ""])
def test_sentences_outside_the_grammar_are_rejected(bad):
    with pytest.raises(ValueError, match="not a SCAN command"):
        scan.interpret(bad)


def test_batches_hold_words_and_actions_with_bos_and_eos():
    batch = scan.to_batch([("jump twice after walk left", scan.interpret("jump twice after walk left")),
                           ("turn left", ["LTURN"])])
    assert [scan.command_label(t) for t in batch.src[1]] == ["turn", "left", "_", "_", "_"]
    assert [scan.action_label(t) for t in batch.tgt_out[0]] == ["LTURN", "WALK", "JUMP", "JUMP", "</s>"]
    assert batch.tgt_in[1, 0] == BOS and list(batch.tgt_out[1, :2]) == [scan.TGT_VOCAB - 2, EOS]
    assert (batch.tgt_out[1, 2:] == PAD).all()


def test_a_short_transformer_run_halves_the_loss():
    data = scan.ScanTask("simple")
    manual_seed(0)
    model = build_model(TrainConfig(), data, d_model=32, num_heads=2, d_ff=64, num_encoder_layers=1,
                        num_decoder_layers=1)
    cfg = TrainConfig(task="scan-simple", batch_size=32, max_steps=120, lr=3e-3, warmup=20, decay_steps=120,
                      eval_every=120, eval_size=50, target_accuracy=1.0, out_dir="/tmp/scan-test")
    _, metrics = train(cfg, model=model, data=data, log=lambda line: None)
    losses = metrics["history"]["loss"]
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])



def test_demo_table_and_chart_from_results(tmp_path):
    import json

    from demos import scan as scan_demo
    rows = [{"split": s, "model": m, "seed": seed, "test_exact_match": acc, "seconds": 100.0 + seed}
            for s, m, seed, acc in [("simple", "transformer", 0, 0.995), ("simple", "transformer", 1, 0.993),
                                    ("jump", "rnn", 0, 0.0), ("length", "transformer-rope", 0, 0.2)]]
    (tmp_path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    scan_demo.write_table(str(tmp_path))
    table = (tmp_path / "results.md").read_text().splitlines()
    assert table[2].startswith("| simple | transformer | 99.40% | 99.50% (seed 0), 99.30% (seed 1) | 100, 101 |")
    assert any(line.startswith("| length | transformer-rope | 20.00%") for line in table)
    assert table.index(next(l for l in table if "| jump | rnn |" in l)) > 2      # splits in the paper's order
    scan_demo.grid_chart(str(tmp_path), str(tmp_path / "scan.png"))
    assert (tmp_path / "scan.png").stat().st_size > 10_000
    command, actions = scan_demo.composed_example(scan.ScanTask("jump"))
    assert "jump" in command.split() and {"and", "after"} & set(command.split()) and actions == scan.interpret(command)


def test_a_rerun_replaces_its_cell_in_the_table(tmp_path):
    import json

    from demos import scan as scan_demo
    first = {"split": "jump", "model": "rnn", "seed": 0, "test_exact_match": 0.1, "seconds": 1.0}
    (tmp_path / "results.jsonl").write_text(json.dumps(first) + "\n" + json.dumps({**first, "test_exact_match": 0.2}) + "\n")
    assert [r["test_exact_match"] for r in scan_demo.read_results(str(tmp_path))] == [0.2]


def test_the_grid_runs_each_cell_as_its_own_demo_command():
    from demos import scan as scan_demo
    command = scan_demo.cell_command("jump", "rnn", 2, "runs/x", ["--steps=5"])
    assert command[1:] == ["-m", "demos.scan", "--split", "jump", "--model", "rnn", "--seed", "2", "--out", "runs/x",
                           "--steps=5"]
