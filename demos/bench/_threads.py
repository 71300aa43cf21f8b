"""Thread counts for the benchmarks, fixed before numpy, Numba or PyTorch start their pools."""

import os


def use_threads(count):
    """Make BLAS, Numba and PyTorch (if installed) use `count` threads; returns torch or None.
    Call before numpy is imported: thread pools read these variables when they start."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ[var] = str(count)
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(count)
    return torch
