# SPDX-License-Identifier: MIT
"""rill's ops on the CPU device against PyTorch's on the CPU, measured in the
same run, alternately repeat by repeat, comparing medians (rows o1..o9:
conv2d, matmul, makers and element-wise ops, below). Not a test.

    RILL_LIBRARY=build/release/librill.so PYTHONPATH=python \\
        /usr/bin/python3 bench/python/bench_ops.py [--repeats 15] [--quick] [--json PATH]"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

MIB_FLOATS = (1 << 20) // 4


def timed(fn, n):
    t0 = time.perf_counter()
    fn(n)
    return (time.perf_counter() - t0) / n


def pair(rill_fn, torch_fn, n, repeats):
    """Per-op seconds of rill_fn(n) and torch_fn(n), alternately, repeats
    times after a warm-up of each: the two lists of samples."""
    rill_fn(max(1, n // 10))
    torch_fn(max(1, n // 10))
    rs, ts = [], []
    for _ in range(repeats):
        rs.append(timed(rill_fn, n))
        ts.append(timed(torch_fn, n))
    return rs, ts


def stats(samples, scale):
    xs = [x * scale for x in samples]
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs),
            "repeats": len(xs)}


def row(rid, name, unit, samples, baseline_name):
    scale = 1e3 if unit == "ms" else 1e6
    r, b = stats(samples[0], scale), stats(samples[1], scale)
    return {"id": rid, "name": name, "unit": unit, "better": "lower", "rill": r,
            "baseline_name": baseline_name, "baseline": b,
            "ratio": r["median"] / b["median"]}


def small_ops(rill, torch, n, repeats, abi_only=False):
    """The per-op rows on 1-element tensors (o5 to o8; o9's samples when
    abi_only)."""
    a, b = rill.ones(1), rill.ones(1)
    ta, tb = torch.ones(1), torch.ones(1)

    def loop(expr_rill, expr_torch):
        def r(k):
            for _ in range(k):
                expr_rill()
            rill.synchronize()

        def t(k):
            for _ in range(k):
                expr_torch()
        return r, t

    if abi_only:
        return pair(*loop(lambda: a + b, lambda: ta + tb), n, repeats)
    rows = []
    cases = [("o5", "a + 2.0, 1 element", lambda: a + 2.0, lambda: ta + 2.0),
             ("o6", "a * 2.0, 1 element", lambda: a * 2.0, lambda: ta * 2.0),
             ("o7", "-a, 1 element", lambda: -a, lambda: -ta),
             ("o8", "a + b, 1 element", lambda: a + b, lambda: ta + tb)]
    for rid, name, fr, ft in cases:
        rows.append(row(rid, name, "us", pair(*loop(fr, ft), n, repeats), "PyTorch, same op"))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="fewer operations and repeats")
    ap.add_argument("--json", metavar="PATH")
    ap.add_argument("--torch-threads", type=int, metavar="N",
                    help="torch.set_num_threads(N) first (default: PyTorch's own count)")
    ap.add_argument("--abi-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    repeats = 5 if args.quick else args.repeats
    small_n = 2000 if args.quick else 20000

    import numpy as np
    import torch
    import rill
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)

    if args.abi_child:  # o9's samples, printed as JSON for the parent
        assert rill._ffi.mode == "abi" and rill._ffi.fast is None
        rs, ts = small_ops(rill, torch, small_n, repeats, abi_only=True)
        print(json.dumps({"rill": rs, "torch": ts}))
        return 0

    os.environ.setdefault("RILL_COMPAT_TORCH", "rill")  # rill's own tensors, not PyTorch's
    from rill.compat import torch as rtorch

    rows = []
    rng = np.random.default_rng(1)

    # o1: conv2d with padding.
    x = rng.standard_normal((8, 128, 56, 56), dtype=np.float32)
    w = rng.standard_normal((128, 128, 3, 3), dtype=np.float32) * 0.05
    rx, rw = rill.Tensor(x), rill.Tensor(w)
    tx, tw = torch.from_numpy(x), torch.from_numpy(w)
    got = rtorch.nn.functional.conv2d(rx, rw, padding=1).numpy()
    want = torch.nn.functional.conv2d(tx, tw, padding=1).numpy()
    assert np.allclose(got, want, rtol=1e-4, atol=1e-4), "conv2d differs from PyTorch's"

    def conv_rill(k):
        for _ in range(k):
            rtorch.nn.functional.conv2d(rx, rw, padding=1)
        rill.synchronize()

    def conv_torch(k):
        for _ in range(k):
            torch.nn.functional.conv2d(tx, tw, padding=1)
    n_conv = 1 if args.quick else 3
    rows.append(row("o1", "conv2d, N=8, C=K=128, 56x56, 3x3, padding 1", "ms",
                    pair(conv_rill, conv_torch, n_conv, repeats), "PyTorch, same op"))

    # o2: matmul.
    m = rng.standard_normal((1024, 1024), dtype=np.float32)
    rm, tm = rill.Tensor(m), torch.from_numpy(m)
    assert np.allclose((rm @ rm).numpy(), (tm @ tm).numpy(), rtol=1e-3, atol=1e-3)

    def mm_rill(k):
        for _ in range(k):
            rm @ rm
        rill.synchronize()

    def mm_torch(k):
        for _ in range(k):
            tm @ tm
    n_mm = 2 if args.quick else 10
    rows.append(row("o2", "matmul 1024x1024 by 1024x1024", "ms",
                    pair(mm_rill, mm_torch, n_mm, repeats), "PyTorch, same op"))

    # o3, o4: allocation of 1 MiB, kept until the next one replaces it.
    def alloc(fn_rill, fn_torch):
        def r(k):
            for _ in range(k):
                fn_rill(MIB_FLOATS)
            rill.synchronize()

        def t(k):
            for _ in range(k):
                fn_torch(MIB_FLOATS)
        return r, t
    n_alloc = 2000 if args.quick else 20000
    rows.append(row("o3", "empty, 1 MiB, in a loop", "us",
                    pair(*alloc(rill.empty, torch.empty), n_alloc, repeats), "PyTorch, same op"))
    rows.append(row("o4", "zeros, 1 MiB, in a loop", "us",
                    pair(*alloc(rill.zeros, torch.zeros), n_alloc // 4, repeats),
                    "PyTorch, same op"))

    rows.extend(small_ops(rill, torch, small_n, repeats))

    # o9: a + b in ABI mode, in a child process with the same arguments.
    env = dict(os.environ, RILL_PYTHON_ABI="1")
    cmd = [sys.executable, os.path.abspath(__file__), "--abi-child", "--repeats", str(repeats)]
    if args.torch_threads:
        cmd += ["--torch-threads", str(args.torch_threads)]
    if args.quick:
        cmd.append("--quick")
    child = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    abi = json.loads(child.stdout)
    rows.append(row("o9", "a + b, 1 element, ABI mode", "us", (abi["rill"], abi["torch"]),
                    "PyTorch, same op"))

    meta = {"bench": "bench_python", "device": "CPU (rill), CPU (PyTorch)",
            "platform_version": f"PyTorch {torch.__version__}, "
                                f"{torch.get_num_threads()} thread(s); "
                                f"rill {rill._ffi.mode} mode",
            "compute_units": rill.current_device().compute_units,
            "mode": "quick" if args.quick else "full"}
    width = max(len(r["name"]) for r in rows)
    print(f"PyTorch {torch.__version__} with {torch.get_num_threads()} thread(s); rill in "
          f"{rill._ffi.mode} mode; medians of {repeats} repeats")
    print(f"{'id':<3} {'figure':<{width}}  {'unit':<4} {'rill':>9} {'PyTorch':>9} {'ratio':>6}")
    for r in rows:
        print(f"{r['id']:<3} {r['name']:<{width}}  {r['unit']:<4} {r['rill']['median']:9.3f} "
              f"{r['baseline']['median']:9.3f} {r['ratio']:6.2f}")
    by = {r["id"]: r for r in rows}
    for rid in ("o6", "o7"):
        print(f"{by[rid]['name']} / a + 2.0: "
              f"{by[rid]['rill']['median'] / by['o5']['rill']['median']:.2f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
