#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""torch.mm's TFLOP/s for the matrix products of bench_cuda_baseline (figure i).

The same products as rows i1 and i2: a float32 n x n product (4096 by default)
and a float16 one (8192) on the GPU, inputs uniform in [-1, 1), each sample
`runs` products then a synchronize, the median of `repeats` samples after
three warm-up products. PyTorch's own precision settings are left as they
are and printed (allow_tf32 off means plain float32, as cublasSgemm's
default). With --compare, the sizes come from bench_cuda_baseline's JSON
and each of its TFLOP/s figures (cuBLAS's, rill's) is printed over
torch.mm's, the target's ratio. Exits 77 (skipped) without PyTorch or a GPU.
"""
import argparse
import json
import statistics
import sys
import time

SKIP = 77


def measure(torch, dtype, n, runs, repeats):
    a = torch.rand((n, n), device="cuda", dtype=torch.float32).mul_(2).sub_(1).to(dtype)
    b = torch.rand((n, n), device="cuda", dtype=torch.float32).mul_(2).sub_(1).to(dtype)
    c = torch.empty((n, n), device="cuda", dtype=dtype)
    for _ in range(3):
        torch.mm(a, b, out=c)
    torch.cuda.synchronize()
    values = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(runs):
            torch.mm(a, b, out=c)
        torch.cuda.synchronize()
        values.append(2.0 * n**3 * runs / (time.perf_counter() - t0) / 1e12)
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "repeats": repeats}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="256^3 products, few repeats (a smoke run)")
    p.add_argument("--runs", type=int, default=10, help="products per sample (default 10)")
    p.add_argument("--repeats", type=int, default=7, help="samples per row (default 7)")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON to PATH")
    p.add_argument("--compare", metavar="PATH",
                   help="bench_cuda_baseline's JSON: take its sizes and print its figures "
                        "over torch.mm's")
    args = p.parse_args()
    f32_n, f16_n = (256, 256) if args.quick else (4096, 8192)
    runs, repeats = (2, 3) if args.quick else (args.runs, args.repeats)
    bench = None
    if args.compare:
        with open(args.compare) as f:
            bench = json.load(f)
        f32_n, f16_n = int(bench["meta"]["mm_f32_n"]), int(bench["meta"]["mm_f16_n"])
    try:
        import torch
    except ImportError as e:
        print(f"torch_mm: skipped: no PyTorch ({e})")
        return SKIP
    if not torch.cuda.is_available():
        print("torch_mm: skipped: no CUDA device (torch.cuda.is_available() is False)")
        return SKIP
    tf32 = torch.backends.cuda.matmul.allow_tf32
    reduced = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    print(f"torch_mm: torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{torch.cuda.get_device_name(0)}; allow_tf32={tf32}, "
          f"allow_fp16_reduced_precision_reduction={reduced}")
    rows = []
    for rid, dtype, n in (("i1", torch.float32, f32_n), ("i2", torch.float16, f16_n)):
        name = f"{'f32' if dtype == torch.float32 else 'f16'} matmul {n}^3"
        s = measure(torch, dtype, n, runs, repeats)
        rows.append({"id": rid, "name": name, "unit": "TFLOP/s", "better": "higher", "torch": s})
        print(f"{rid}  {name:<20} torch.mm {s['median']:8.1f} TFLOP/s "
              f"({s['min']:.1f}..{s['max']:.1f})")
    if bench is not None:
        print("over torch.mm (target: >= 0.95):")
        by_id = {r["id"]: r for r in bench["rows"]}
        for row in rows:
            other = by_id.get(row["id"])
            if other is None:
                print(f"{row['id']}  not in {args.compare}")
                continue
            t = row["torch"]["median"]
            parts = []
            for key, label in (("baseline", "cuBLAS"), ("rill", "rill")):
                v = other.get(key)
                if v is None:
                    note = other.get(f"{'value' if key == 'rill' else 'baseline'}_note", "-")
                    parts.append(f"{label}: {note}")
                else:
                    parts.append(f"{label} {v['median']:.1f} TFLOP/s = {v['median'] / t:.3f}x")
                    row[f"{label}_over_torch"] = v["median"] / t
            print(f"{row['id']}  {row['name']:<20} " + ", ".join(parts))
    if args.json:
        meta = {"bench": "torch_mm", "torch": torch.__version__, "cuda": torch.version.cuda,
                "device": torch.cuda.get_device_name(0), "allow_tf32": tf32,
                "allow_fp16_reduced_precision_reduction": reduced, "runs": runs}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
