"""Our training step on one thread and on several, interleaved in one process.

    python -m demos.bench.threads [--threads 2] [--sizes S M L] [--rounds 7] [--json FILE]

The kernels decide per call whether to run threaded, from the work it has (a matmul from
8 or 16 MFLOP and two blocks of rows, a row-wise kernel from 128 Ki numbers: autograd/kernels/engine_room.py),
so that a second thread should never make a step slower, and make it faster where there is
enough work.  demos.bench.train measures one thread count per process, minutes apart, and
a step's time can move by more than a small model gains from a thread in that time.  Here the same model (bench_train's sizes) runs rounds of steps on 1 and on
--threads Numba threads in turn (numba.set_num_threads between rounds), so that a change in
the host's load falls on both, and the figure is the median of the rounds' ratios.  It also
counts, in one step, how many kernel calls ran threaded.

numpy's BLAS keeps --threads threads in both: the step's products are ours, and none of
its ops calls numpy's matmul.
"""


from demos._results import write_json
from demos.bench import need_engine_room
from demos.bench._threads import use_threads
from demos._flags import a_file_to_write, command_line, integer_at_least

STEPS_PER_ROUND = {"S": 20, "M": 6, "L": 2}


def median(values):
    return sorted(values)[len(values) // 2]


def step_ms(step, steps):
    """Median milliseconds of `steps` calls of step()."""
    from demos.bench.train import _median
    return _median(step, steps) * 1e3


def count_threaded_calls(step):
    """(kernel calls that ran threaded, all kernel calls) in one call of step(): every
    Numba kernel is a chunks.ChunkedKernel, threaded when called with more than one chunk."""
    from autograd.engine_room import chunks
    counts = [0, 0]
    original = chunks.ChunkedKernel.__call__

    def counting(self, *arguments_then_chunks):
        counts[0] += arguments_then_chunks[-1] > 1
        counts[1] += 1
        return original(self, *arguments_then_chunks)

    chunks.ChunkedKernel.__call__ = counting
    try:
        step()
    finally:
        chunks.ChunkedKernel.__call__ = original
    return tuple(counts)


def compare(step, threads, rounds, steps):
    """Rounds of `steps` steps on 1 and on `threads` threads in turn; the median ms of each
    and the median of the rounds' ratios (threads / 1)."""
    from autograd.engine_room.dispatch import set_threads
    by_count = {1: [], threads: []}
    for count in by_count:                      # warm-up: caches, allocator, the thread pool
        set_threads(count)
        step_ms(step, 3)
    for _ in range(rounds):
        for count in by_count:
            set_threads(count)
            by_count[count].append(step_ms(step, steps))
    ratios = [many / one for one, many in zip(by_count[1], by_count[threads])]
    return {"one_ms": median(by_count[1]), "many_ms": median(by_count[threads]), "ratio": median(ratios),
            "one_rounds_ms": by_count[1], "many_rounds_ms": by_count[threads]}


def main(argv=None):
    parser = command_line("demos.bench.threads", __doc__)
    parser.add_argument("--threads", type=integer_at_least(1), default=2)
    parser.add_argument("--sizes", nargs="+", choices=sorted(STEPS_PER_ROUND), default=["S", "M", "L"])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", type=a_file_to_write)
    args = parser.parse_args(argv)
    need_engine_room("demos.bench.threads")
    if args.threads < 2:
        parser.error("--threads must be at least 2 (it is compared with one thread)")
    use_threads(args.threads)
    from autograd.engine_room.dispatch import set_threads

    from autograd import kernels
    from demos.bench import train as bench_train
    from autograd.engine_room.warmup import warmup
    kernels.prepare()                   # as in training: the kernels ready, freed memory kept
    warmup()
    results = {}
    print(f"our training step, 1 and {args.threads} threads interleaved ({args.rounds} rounds):")
    print(f"| size | 1 thread ms | {args.threads} threads ms | {args.threads} / 1 | kernel calls threaded |")
    for size in args.sizes:
        step = bench_train.ours(size)
        set_threads(args.threads)
        threaded, calls = count_threaded_calls(step)
        result = compare(step, args.threads, args.rounds, STEPS_PER_ROUND[size])
        result.update(threaded_calls=threaded, calls=calls)
        results[size] = result
        print(f"| {size} | {result['one_ms']:.1f} | {result['many_ms']:.1f} | {result['ratio']:.2f}x | "
              f"{threaded} of {calls} |", flush=True)
    if args.json:
        write_json(args.json, {"threads": args.threads, "sizes": results})
    return results


if __name__ == "__main__":
    main()
