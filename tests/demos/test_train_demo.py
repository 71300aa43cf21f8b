"""demos.train records what it prints that the README quotes (demos/figures.py reads it back)."""
import json

from demos import train


def test_metrics_hold_the_printed_sample_decodes_and_learning_rates(tmp_path, capsys):
    train.main(["--task", "copy", "--steps", "20", "--max-len", "4", "--d-model", "16", "--heads", "2",
                "--d-ff", "16", "--layers", "1", "--eval-every", "10", "--beam-examples", "5", "--out", str(tmp_path)])
    printed = capsys.readouterr().out.splitlines()
    metrics = json.load(open(tmp_path / "metrics.json"))
    assert len(metrics["sample_decodes"]) == 4 and all(line in printed for line in metrics["sample_decodes"])
    evals = metrics["history"]["evals"]
    assert [e["step"] for e in evals] == [10, 20]
    assert all(any(p.startswith(f"step {e['step']:5d}") and f"lr {e['lr']:.2e}" in p for p in printed) for e in evals)
