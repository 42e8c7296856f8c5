# SPDX-License-Identifier: MIT
"""Eager latency per op of PyTorch on the rill device (torch_rill, whose
frequent float32 ops run as rill kernels) against PyTorch on the CPU, in
the same run: `c = a + b` on 1-element tensors, `mm` of two 1024 x 1024
matrices, `relu` of 1M elements, and the forward pass of an MLP
784-256-256-10 on a batch of 32. Each figure is the median of REPEATS runs
of N calls, the rill and the CPU runs alternating; a rill run ends with
torch.rill.synchronize(), so it counts the kernels' work, not only their
queueing.

    RILL_LIBRARY=build/default/src/librill.so PYTHONPATH=python:python/torch_rill \\
    TORCH_RILL_EXTENSION=build/default/python/torch_rill/_C.so \\
        ~/.cache/rill/torch-2.15/bin/python bench/python/bench_torch_native.py [--repeats 15]

Not a test: it prints a table and judges nothing."""

import argparse
import statistics
import time

import torch

import torch_rill  # noqa: F401  registers the device


def timed(fn, n, sync):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    sync()
    return (time.perf_counter() - t0) / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--torch-threads", type=int, default=2,
                    help="PyTorch CPU threads (rill's CPU device: RILL_CPU_WORKERS)")
    args = ap.parse_args()
    torch.set_num_threads(args.torch_threads)
    g = torch.Generator().manual_seed(0)

    def cases(dev):
        one_a, one_b = torch.ones(1, device=dev), torch.ones(1, device=dev)
        m_a = torch.randn(1024, 1024, generator=g).to(dev)
        m_b = torch.randn(1024, 1024, generator=g).to(dev)
        big = torch.randn(1 << 20, generator=g).to(dev)
        torch.manual_seed(0)
        mlp = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(),
                                  torch.nn.Linear(256, 256), torch.nn.ReLU(),
                                  torch.nn.Linear(256, 10)).to(dev)
        x = torch.randn(32, 784, generator=g).to(dev)
        return [
            ("c = a + b (1 element)", lambda: one_a + one_b, 2000),
            ("mm 1024 x 1024", lambda: m_a @ m_b, 1),
            ("relu 1M", lambda: torch.relu(big), 20),
            ("MLP 784-256-256-10 forward, batch 32", lambda: mlp(x), 50),
        ]

    sync = {"rill": torch.rill.synchronize, "cpu": lambda: None}
    per_dev = {dev: cases(dev) for dev in ("rill", "cpu")}
    print("torch %s, %d CPU threads, median of %d runs (alternating)" %
          (torch.__version__, args.torch_threads, args.repeats))
    print("%-40s %14s %14s %8s" % ("op", "rill", "cpu", "rill/cpu"))
    with torch.no_grad():
        for i, (name, _, n) in enumerate(per_dev["cpu"]):
            times = {"rill": [], "cpu": []}
            for dev in ("rill", "cpu"):  # warm up
                timed(per_dev[dev][i][1], max(1, n // 10), sync[dev])
            for _ in range(args.repeats):
                for dev in ("rill", "cpu"):
                    times[dev].append(timed(per_dev[dev][i][1], n, sync[dev]))
            r, c = statistics.median(times["rill"]), statistics.median(times["cpu"])
            print("%-40s %11.1f us %11.1f us %8.2f" % (name, r * 1e6, c * 1e6, r / c))


if __name__ == "__main__":
    main()
