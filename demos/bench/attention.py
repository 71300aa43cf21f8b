"""Fused attention against the composed path, forward + backward, one thread by default.

    python -m demos.bench.attention [--threads 1] [--batch 32] [--heads 4] [--length 64] [--d-head 32]

Times scaled_dot_product_attention (causal mask) forward and backward with the fused op
and with the composed ops (matmul, masked_fill, softmax, matmul), interleaved in rounds in
one process, and prints the medians of the rounds and the median of the rounds' ratios
(each round times both paths within a few milliseconds of each other, so that the host's
load, which moves from minute to minute on a shared machine, falls on both sides of it).

It also prints the products' share of the work, as bench_train prints a step's "BLAS
limit": the multiply-adds of the products each path must do, timed at numpy's
large-matrix rate (measured in the same run).  The composed path does six products over
every score (two forward; backward dV, dP, dQ, dK); the fused op does seven, the backward
recomputing the scores, but only over the scores a query may see (under a causal mask
T(T+1)/2 of the T^2).  The fused op's limit, against half the composed path's time, says how
much of a 2x speed-up the products alone would leave to the rest (exp, masking, reading and
writing the operands).

With PyTorch installed (the optional `bench` extra), the same rounds also time PyTorch's
fused `scaled_dot_product_attention` and its composed ops on the same operands and mask, so
that both libraries' fused / composed ratios come from one run; their outputs and gradients
are first checked equal to ours.
"""

import time

from demos._results import write_json
from demos.bench import need_engine_room
from demos.bench._threads import use_threads
from demos._flags import a_file_to_write, command_line, integer_at_least


def median_ms(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2] * 1e3


def main(argv=None):
    parser = command_line("demos.bench.attention", __doc__)
    parser.add_argument("--threads", type=integer_at_least(1), default=1)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--length", type=int, default=64)
    parser.add_argument("--d-head", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--json", type=a_file_to_write)
    args = parser.parse_args(argv)
    need_engine_room("demos.bench.attention")
    torch = use_threads(args.threads)
    import numpy as np

    from autograd import Tensor, kernels
    from autograd.engine_room.warmup import warmup
    from transformer.attention import scaled_dot_product_attention
    from transformer.masks import causal_mask
    kernels.prepare(np.float32, fused_attention=True)     # as in training: the kernels ready, freed memory kept
    warmup()
    rng = np.random.default_rng(0)
    shape = (args.batch, args.heads, args.length, args.d_head)
    q, k, v = (Tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True) for _ in range(3))
    grad = rng.standard_normal(shape).astype(np.float32)
    mask = causal_mask(args.length)

    def step(fused):
        def run():
            for x in (q, k, v):
                x.grad = None           # as an optimizer's zero_grad does
            out, _ = scaled_dot_product_attention(q, k, v, mask, fused=fused)
            out.backward(grad)
        return run

    steps = {"fused": step(True), "composed": step(False)}
    if torch is not None:
        steps.update(pytorch_steps(torch, q, k, v, mask, grad))
    rounds = {name: [] for name in steps}
    for _ in range(args.rounds):
        for name, run in steps.items():
            rounds[name].append(median_ms(run, args.repeats))
    result = {name: float(np.median(ms)) for name, ms in rounds.items()}
    result.update(ratio=ratio_of_rounds(rounds, "fused", "composed"), shape=list(shape), threads=args.threads,
                  rounds=rounds)
    if torch is not None:
        result.update(pytorch_ratio=ratio_of_rounds(rounds, "pytorch_fused", "pytorch_composed"),
                      fused_vs_pytorch_fused=ratio_of_rounds(rounds, "fused", "pytorch_fused"))
    from demos.bench.gemm_calls import blas_rate
    result.update(product_limits(args.batch * args.heads, args.length, args.d_head, mask, blas_rate()))
    print(f"attention forward + backward, (B, H, T, d_head) = {shape}, causal mask, {args.threads} thread(s):")
    print(f"  fused    {result['fused']:7.2f} ms   (rounds {', '.join(f'{x:.2f}' for x in rounds['fused'])})")
    print(f"  composed {result['composed']:7.2f} ms   (rounds {', '.join(f'{x:.2f}' for x in rounds['composed'])})")
    print(f"  fused / composed = {result['ratio']:.2f}x (median of the rounds' ratios)")
    if torch is not None:
        for name in ("pytorch_fused", "pytorch_composed"):
            print(f"  {name:16} {result[name]:7.2f} ms   (rounds {', '.join(f'{x:.2f}' for x in rounds[name])})")
        print(f"  PyTorch: fused / composed = {result['pytorch_ratio']:.2f}x; our fused / PyTorch's fused = "
              f"{result['fused_vs_pytorch_fused']:.2f}x")
    print(f"  products at numpy's large-matrix rate ({result['blas_gflops']:.0f} GFLOP/s): composed "
          f"{result['composed_mflop']:.0f} MFLOP, {result['composed_blas_ms']:.2f} ms; fused (the visible scores) "
          f"{result['fused_mflop']:.0f} MFLOP, {result['fused_blas_ms']:.2f} ms, against {result['composed'] / 2:.2f} ms "
          f"for half the composed path's time")
    if args.json:
        write_json(args.json, result)
    return result


def ratio_of_rounds(rounds, ours, baseline):
    """The median of the rounds' ratios rounds[ours][i] / rounds[baseline][i]."""
    import numpy as np
    return float(np.median([a / b for a, b in zip(rounds[ours], rounds[baseline])]))


def pytorch_steps(torch, q, k, v, mask, grad):
    """Forward + backward of PyTorch's fused scaled_dot_product_attention (is_causal) and of
    its composed ops (matmul, masked_fill, softmax, matmul, with the boolean mask: True may
    attend) on copies of our q, k, v (Tensors), as {name: run}.  Both are first checked
    against our composed path's output and gradients under the mask, which must then be
    causal, so that the rounds time the same computation."""
    import numpy as np

    from transformer.attention import scaled_dot_product_attention
    tq, tk, tv = (torch.tensor(x.data, requires_grad=True) for x in (q, k, v))
    allowed, tgrad = torch.from_numpy(np.ascontiguousarray(mask)), torch.from_numpy(grad)
    scale = q.shape[-1] ** -0.5

    def fused():                      # is_causal: its fastest form (its flash-attention CPU kernel)
        return torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)

    def composed():
        # BEGIN TWIN attention
        scores = (tq @ tk.transpose(-2, -1)) * scale                  # (B, H, T, T)
        return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1) @ tv
        # END TWIN

    for x in (q, k, v):
        x.grad = None
    out, _ = scaled_dot_product_attention(q, k, v, mask)
    out.backward(grad)
    expected = [out.data] + [x.grad for x in (q, k, v)]
    runs = {}
    for name, forward in (("pytorch_fused", fused), ("pytorch_composed", composed)):
        def run(forward=forward):
            for x in (tq, tk, tv):
                x.grad = None
            result = forward()
            result.backward(tgrad)
            return [result.detach().numpy()] + [x.grad.numpy() for x in (tq, tk, tv)]
        for got, want in zip(run(), expected):
            if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
                raise AssertionError(f"{name} differs from our attention by {np.abs(got - want).max():.2e}")
        runs[name] = run
    return runs


def product_limits(matrices, length, d_head, mask, gflops):
    """The multiply-adds of each path's products for `matrices` attention matrices with one
    (length, length) mask (module docstring), and their time at `gflops` (numpy's
    large-matrix rate) in ms."""
    visible = int(mask.sum())                                 # scores a query may see, per matrix
    composed = 6 * 2 * length ** 2 * d_head * matrices
    fused = 7 * 2 * visible * d_head * matrices
    return {"blas_gflops": gflops, "composed_mflop": composed / 1e6, "fused_mflop": fused / 1e6,
            "composed_blas_ms": composed / gflops / 1e6, "fused_blas_ms": fused / gflops / 1e6}


if __name__ == "__main__":
    main()
