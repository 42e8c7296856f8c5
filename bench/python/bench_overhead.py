# SPDX-License-Identifier: MIT
"""Per-op overhead of rill from Python, against baselines measured in the
same run: `c = a + b` on 1-element tensors (rill, PyTorch CPU eager,
numpy), a record_event + wait_event pair, a captured 100-op graph
replayed against the same 100 ops run eagerly, and `c = a + 2.0` with no
graph alive and with --graphs (400) graphs and their memory alive. Each figure is the median
of REPEATS runs of N operations; the ratios compare medians of this run.

    RILL_LIBRARY=build/release/librill.so PYTHONPATH=python \\
        /usr/bin/python3 bench/python/bench_overhead.py [--repeats 15] [--n 20000] [--graphs 400]

Not a test: it prints a table and judges nothing."""

import argparse
import statistics
import sys
import time


def per_op(fn, n, repeats):
    """Median seconds per call of fn(n) (which runs n operations)."""
    fn(min(n, 1000))  # warm up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(n)
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--graphs", type=int, default=400)
    args = ap.parse_args()
    import numpy as np
    import rill

    rows = []

    a, b = rill.ones(1), rill.ones(1)

    def rill_add(n):
        for _ in range(n):
            c = a + b  # noqa: F841
        rill.synchronize()
    rows.append(("rill: c = a + b (1 element)", per_op(rill_add, args.n, args.repeats)))

    try:
        import torch
        ta, tb = torch.ones(1), torch.ones(1)
        torch.set_num_threads(1)

        def torch_add(n):
            for _ in range(n):
                c = ta + tb  # noqa: F841
        rows.append(("PyTorch %s CPU eager: c = a + b" % torch.__version__,
                     per_op(torch_add, args.n, args.repeats)))
    except ImportError:
        print("(no torch: python3-torch is not installed; its row is skipped)")

    na, nb = np.ones(1, np.float32), np.ones(1, np.float32)

    def numpy_add(n):
        for _ in range(n):
            c = na + nb  # noqa: F841
    rows.append(("numpy: c = a + b", per_op(numpy_add, args.n, args.repeats)))

    s1, s2 = rill.Stream(), rill.Stream()
    ev = rill.Event()

    def record_wait(n):
        for _ in range(n):
            s1.record_event(ev)
            s2.wait_event(ev)
        rill.synchronize()
    rows.append(("rill: s1.record_event(e) + s2.wait_event(e)",
                 per_op(record_wait, args.n, args.repeats)))

    ops = 100
    x = rill.ones(1)

    def body():
        y = x
        for _ in range(ops):
            y = y + x
        return y

    def eager(n):
        for _ in range(n // ops):
            body()
        rill.synchronize()
    rows.append(("rill: 100 ops eager, per op", per_op(eager, args.n, args.repeats)))

    g = rill.Graph()
    with rill.graph(g):
        out = body()

    def replay(n):
        for _ in range(n // ops):
            g.replay()
        rill.synchronize()
    rows.append(("rill: 100 ops as one graph replay, per op", per_op(replay, args.n,
                                                                      args.repeats)))
    assert out.item() == ops + 1

    # Every eager free looks its pointer up among the blocks of graph
    # memory: the figure must not grow with the number of graphs alive.
    def add_scalar(n):
        for _ in range(n):
            c = a + 2.0  # noqa: F841
        rill.synchronize()
    rows.append(("rill: c = a + 2.0, no graph alive", per_op(add_scalar, args.n, args.repeats)))
    del g, out
    graphs = []
    for i in range(args.graphs):
        gi = rill.Graph()
        with rill.graph(gi):
            kept = (x + float(i), x * 2.0)
        graphs.append((gi, kept))
    rows.append((f"rill: c = a + 2.0, {args.graphs} graphs alive",
                 per_op(add_scalar, args.n, args.repeats)))
    del graphs

    base = dict(rows)
    width = max(len(r[0]) for r in rows)
    print(f"{'operation':<{width}}  {'us/op':>8}")
    for name, sec in rows:
        print(f"{name:<{width}}  {sec * 1e6:8.3f}")
    rill_add_t = rows[0][1]
    torch_rows = [r for r in rows if r[0].startswith("PyTorch")]
    if torch_rows:
        print(f"rill add / PyTorch add: {rill_add_t / torch_rows[0][1]:.2f}")
    print(f"rill add / numpy add: {rill_add_t / base['numpy: c = a + b']:.2f}")
    print(f"eager / graph replay per op: "
          f"{base['rill: 100 ops eager, per op'] / base['rill: 100 ops as one graph replay, per op']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
