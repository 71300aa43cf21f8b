"""The benchmarks: our speed against numpy's BLAS and PyTorch on the CPU, measured in one run.

    python -m demos.bench.train [--size S|M|L] [--model gpt]   training steps, ours against PyTorch
    python -m demos.bench.kernels                              every kernel against numpy (and PyTorch)
    python -m demos.bench.attention                            fused against composed attention
    python -m demos.bench.threads                              one thread against two

Each prints its figures with a baseline measured in the same run, and writes them with
--json; `python -m demos.figures` runs them all into docs/RESULTS.md.  PyTorch comes from
the optional extra: pip install -e ".[bench]".
"""
