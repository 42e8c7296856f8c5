#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The CPU device's figures against its number of workers.

Runs the benchmark binaries once per worker count (RILL_CPU_WORKERS) and
tabulates the figures that should not grow with the workers (fan, chain,
launch, hop, wake, blocking sync), each with the ratio of the largest count
to 2 workers; then each row's ratio to its baseline in the same run (the
hop to two threads handing a token, the blocking sync to a futex pair), and
the cross-core probe before the row.

Usage: bench/sweep_workers.py [--build DIR] [--workers 1,2,4,8,16] [--quick]
                              [--machine TEXT] [--json OUT] [--svg OUT]"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

FIGURES = [  # key, program, --only, row id, unit, what
    ("fan", "bench_graph", "4", "g4", "ns/node", "fan graph 1->1000->1, replay"),
    ("chain", "bench_graph", "3", "g3", "ns/node", "1000-node chain, replay"),
    ("launch", "bench_runtime", "a", "a3", "ns/cmd", "empty kernel, enqueue+execute"),
    ("hop", "bench_runtime", "b", "b1", "ns/hop", "cross-stream hop through an event"),
    ("wake", "bench_runtime", "f", "f3", "us", "launch+sync after 20 ms of sleep"),
    ("sync", "bench_runtime", "f", "f4", "us", "blocking-sync event after 200 us idle"),
]


def run_program(build, program, only, workers, quick):
    """The rows of one run of program with `workers` workers, by id."""
    path = os.path.join(build, "bench", program)
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [path, "--only", only, "--json", out.name] + (["--quick"] if quick else [])
        env = dict(os.environ, RILL_CPU_WORKERS=str(workers))
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        with open(out.name, encoding="utf-8") as f:
            data = json.load(f)
    return {r["id"]: r for r in data["rows"]}


def sweep(build, counts, quick):
    """{figure key: {workers: median}}, the same for each row's ratio to
    its baseline in the same run, and the cross-core probe's hop (ns)
    before the row"""
    result = {key: {} for key, *_ in FIGURES}
    ratios = {key: {} for key, *_ in FIGURES}
    probes = {key: {} for key, *_ in FIGURES}
    for n in counts:
        runs = {}
        for key, program, only, row, _, _ in FIGURES:
            if (program, only) not in runs:
                runs[(program, only)] = run_program(build, program, only, n, quick)
            found = runs[(program, only)].get(row)
            if found is not None:
                result[key][n] = found["rill"]["median"]
                if found.get("ratio") is not None:
                    ratios[key][n] = found["ratio"]
                probe = (found.get("probe_hop_ns") or {}).get("before")
                if probe is not None:
                    probes[key][n] = probe
        print(f"  {n} worker(s) done", file=sys.stderr)
    return result, ratios, probes


def table(result, counts, unit_of=None):
    """One row per figure, a column per worker count; the figures' own
    table (unit_of None) also gives the largest count over 2 workers."""
    last = " | largest / 2 w |" if unit_of is None else " |"
    lines = ["| figure | unit | " + " | ".join(f"{n} w" for n in counts) + last,
             "|---|---|" + "---|" * len(counts) + ("---|" if unit_of is None else "")]
    for key, _, _, _, unit, what in FIGURES:
        vals = result[key]
        cells = [f"{vals[n]:.3g}" if n in vals else "" for n in counts]
        if unit_of is not None:
            lines.append(f"| {what} | {unit_of} | " + " | ".join(cells) + " |")
            continue
        ratio = ""
        if 2 in vals and counts[-1] in vals and counts[-1] != 2:
            ratio = f"{vals[counts[-1]] / vals[2]:.2f}x"
        lines.append(f"| {what} | {unit} | " + " | ".join(cells) + f" | {ratio} |")
    return "\n".join(lines)


def svg(result, counts):
    """Each figure relative to its value at 2 workers (1 at 1 worker when
    only one is present), against the worker count on a log axis."""
    w, h, left, bottom, top, right = 420, 220, 40, 30, 12, 120
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    base_n = 2 if 2 in counts else counts[0]
    series, ymax = [], 1.5
    for key, *_ in FIGURES:
        vals = result[key]
        if base_n not in vals or not vals[base_n]:
            series.append([])
            continue
        pts = [(n, vals[n] / vals[base_n]) for n in counts if n in vals]
        ymax = max(ymax, max(v for _, v in pts))
        series.append(pts)
    import math
    span = math.log2(counts[-1]) if counts[-1] > 1 else 1

    def x(n):
        return left + (w - left - right) * (math.log2(n) / span if span else 0)

    def y(v):
        return top + (h - top - bottom) * (1 - v / ymax)

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
           'font-family="sans-serif" font-size="10">',
           f'<line x1="{left}" y1="{y(1):.1f}" x2="{w - right}" y2="{y(1):.1f}" stroke="#bbb" '
           'stroke-dasharray="3,3"/>',
           f'<text x="4" y="{y(1) + 3:.1f}">1.0</text>',
           f'<text x="4" y="{y(ymax) + 9:.1f}">{ymax:.1f}</text>']
    for n in counts:
        out.append(f'<text x="{x(n) - 4:.1f}" y="{h - 12}">{n}</text>')
    out.append(f'<text x="{left}" y="{h - 1}">workers (figure / its value at {base_n})</text>')
    for i, ((key, _, _, _, _, what), pts) in enumerate(zip(FIGURES, series)):
        if not pts:
            continue
        path = " ".join(f"{x(n):.1f},{y(v):.1f}" for n, v in pts)
        out.append(f'<polyline fill="none" stroke="{colors[i]}" stroke-width="1.5" '
                   f'points="{path}"/>')
        out.append(f'<text x="{w - right + 6}" y="{top + 12 * i + 8}" fill="{colors[i]}">'
                   f'{key}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                    "release"))
    ap.add_argument("--workers", default="1,2,4,8,16")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--machine", default="", help="what the JSON file says of the machine")
    ap.add_argument("--json")
    ap.add_argument("--svg")
    args = ap.parse_args()
    cpus = len(os.sched_getaffinity(0))
    counts = sorted({int(n) for n in args.workers.split(",") if 0 < int(n) <= cpus})
    if not counts:
        sys.exit("sweep_workers: no worker count fits the %d processors present" % cpus)
    result, ratios, probes = sweep(args.build, counts, args.quick)
    print(f"CPU device figures by worker count ({cpus} processors; medians)")
    print(table(result, counts))
    print("\nEach row's ratio to its baseline in the same run")
    print(table(ratios, counts, unit_of="x"))
    print("\nThe cross-core probe's one-way hop before each row (the machine's state then)")
    print(table(probes, counts, unit_of="ns"))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=os.path.dirname(
                os.path.abspath(__file__)), capture_output=True, text=True).stdout.strip()
            json.dump({"date": datetime.date.today().isoformat(), "machine": args.machine,
                       "commit": commit, "load_average": " ".join(
                           f"{v:.2f}" for v in os.getloadavg()),
                       "quick": args.quick, "processors": cpus, "workers": counts,
                       "figures": {k: {str(n): v for n, v in vals.items()}
                                   for k, vals in result.items()},
                       "ratios": {k: {str(n): v for n, v in vals.items()}
                                  for k, vals in ratios.items()},
                       "probe_hop_ns": {k: {str(n): v for n, v in vals.items()}
                                        for k, vals in probes.items()}}, f, indent=1)
    if args.svg:
        with open(args.svg, "w", encoding="utf-8") as f:
            f.write(svg(result, counts))


if __name__ == "__main__":
    main()
