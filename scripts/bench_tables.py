#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Benchmark results as tables: the generated blocks of docs/bench.md and
README.md, from the results files bench/results/<date>-<machine>.json.

Usage:
  scripts/bench_tables.py collect OUT.json --machine TEXT [--note TEXT]
                          [--command TEXT] BENCH.json...   write a results file
  scripts/bench_tables.py            rewrite the generated blocks
  scripts/bench_tables.py --check    exit 1 when a block is not what the results give"""
import datetime
import glob
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
BLOCKS = {  # file -> block names
    "docs/bench.md": ["results"],
    "README.md": ["headline", "python"],
}
BEGIN = "<!-- bench-tables: {} -->"
END = "<!-- end of bench-tables -->"
# The README's headline rows: (benchmark, row id, label); the PoCL column is
# bench_pocl's row of the same id, where there is one.
HEADLINE = [
    ("bench_runtime", "a1", "empty host function, enqueue+execute"),
    ("bench_runtime", "a2", "the enqueue call alone"),
    ("bench_runtime", "a3", "empty 1-block kernel, enqueue+execute"),
    ("bench_runtime", "b1", "cross-stream hop through an event"),
    ("bench_runtime", "c1", "host wake-up, default event"),
    ("bench_runtime", "d1", "two compute-bound kernels, 2 streams over 1"),
    ("bench_runtime", "e1", "`rill_op_matmul_f32` 1024³"),
    ("bench_runtime", "f1", "launch + record + synchronize after 200 µs idle"),
    ("bench_runtime", "f3", "the same after 20 ms asleep"),
    ("bench_graph", "g1", "graph replay, chain of 1000 kernels, per node"),
    ("bench_graph", "g4", "graph replay, 1000-node fan-out/fan-in, per node"),
    ("bench_memory", "m1", "`malloc_async` + `free_async`, one stream"),
    ("bench_memory", "m3", "two streams freeing each other's blocks: reserved / allocated"),
    ("bench_memory", "m4", "transformer training trace: reserved / allocated"),
]


def fmt(v):
    if v is None:
        return ""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    if a >= 1:
        return f"{v:.2f}"
    if a == 0:
        return "0"
    return f"{v:.3g}"


def side(row):
    """The measured side's name and figures: "rill", "pocl", "primitive"..."""
    for k, v in row.items():
        if k not in ("baseline", "probe_hop_ns") and isinstance(v, dict) and "median" in v:
            return k, v
    return None, None


def cell(fig, unit, spread=True):
    if not fig or fig.get("median") is None:
        return ""
    s = f"{fmt(fig['median'])} {unit}"
    if spread and fig.get("min") is not None and fig.get("max") is not None \
            and fig.get("repeats", 1) > 1:
        s += f" ({fmt(fig['min'])}..{fmt(fig['max'])})"
    return s


def load_results():
    out = []
    for path in sorted(glob.glob(os.path.join(RESULTS, "*.json"))):
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
        r["_file"] = os.path.relpath(path, ROOT)
        out.append(r)
    # Newest first: by date, then by the time collect wrote (older files
    # have none), then by name.
    out.sort(key=lambda r: (r["date"], r.get("time", ""), r["_file"]), reverse=True)
    return out


def session_line(r):
    load = r.get("load_average")
    load = f"; load average {load} after the runs" if load else ""
    note = f" {r['note']}" if r.get("note") else ""
    return (f"{r['date']}, {r['machine']}, commit `{r['commit']}`{load}; "
            f"`{r['_file']}`.{note}")


def readme_line(r, extra=""):
    """A README table's footer: when and where, and where the rest is (the
    session's load, notes and file are in docs/bench.md), wrapped as the
    README's prose is."""
    text = (f"{r['date']}, {r['machine']}, commit `{r['commit']}`.{extra} The run's conditions "
            "and notes, more rows and other machines: [docs/bench.md](docs/bench.md#results).")
    return textwrap.fill(text, width=100, break_long_words=False, break_on_hyphens=False)


def render_results(results):
    lines = []
    for r in results:
        lines.append(f"### {r['date']}, {r['machine']}")
        lines.append("")
        lines.append(session_line(r))
        if r.get("command"):
            lines.append(f"Command: `{r['command']}`.")
        for name, b in r["benches"].items():
            meta = b.get("meta", {})
            rows = b.get("rows", [])
            sname = next((side(x)[0] for x in rows if side(x)[0]), "rill")
            lines.append("")
            desc = ", ".join(f"{k} {meta[k]}" for k in ("device", "platform_version",
                                                         "compute_units", "mode")
                             if meta.get(k) not in (None, ""))
            lines.append(f"**{name}** ({desc}):")
            lines.append("")
            lines.append(f"| id | figure | {sname} median (min..max) | baseline | baseline median "
                         "| ratio | hop ns |")
            lines.append("|---|---|---|---|---|---|---|")
            for row in rows:
                _, fig = side(row)
                hop = row.get("probe_hop_ns") or {}
                hops = "/".join(fmt(hop.get(k)) for k in ("before", "after")
                                if hop.get(k) is not None)
                lines.append("| {} | {} | {} | {} | {} | {} | {} |".format(
                    row["id"], row["name"], cell(fig, row["unit"]), row.get("baseline_name") or "",
                    cell(row.get("baseline"), row["unit"], spread=False), fmt(row.get("ratio")),
                    hops))
        lines.append("")
    if not results:
        lines.append("No results yet: run the benchmarks with `--json`, then "
                     "`scripts/bench_tables.py collect`.")
    return "\n".join(lines).rstrip("\n")


def find(r, bench, rid):
    for row in r["benches"].get(bench, {}).get("rows", []):
        if row["id"] == rid:
            return row
    return None


def newest_with(results, bench, rid):
    """The newest session that measured row rid of bench, and the row."""
    for r in results:
        row = find(r, bench, rid)
        if row is not None:
            return r, row
    return None, None


def render_headline(results):
    """Each headline row from the newest session that measured it (a
    session may run some benchmarks only); the PoCL column from the same
    session as its rill row."""
    picked = []
    for bench, rid, label in HEADLINE:
        r, row = newest_with(results, bench, rid)
        if row is not None:
            picked.append((r, bench, rid, label, row))
    if not picked:
        return "No results yet (bench/results/)."
    has_pocl = any("bench_pocl" in r["benches"] for r, *_ in picked)
    head = "| figure | rill | baseline, same run | ratio |" + (" PoCL |" if has_pocl else "")
    lines = [head, "|---|---|---|---|" + ("---|" if has_pocl else "")]
    sessions = []
    for r, *_ in picked:
        if r not in sessions:
            sessions.append(r)
    marks = "¹²³⁴⁵⁶⁷⁸⁹"

    def mark(r):
        return marks[sessions.index(r)] if len(sessions) > 1 else ""
    for r, bench, rid, label, row in picked:
        _, fig = side(row)
        base = row.get("baseline")
        bname = row.get("baseline_name") or ""
        bcell = f"{cell(base, row['unit'], spread=False)} ({bname})" if base else ""
        line = f"| {label}{mark(r)} | {cell(fig, row['unit'], spread=False)} | {bcell} | " \
               f"{fmt(row.get('ratio'))} |"
        if has_pocl:
            p = find(r, "bench_pocl", rid) if bench == "bench_runtime" else None
            line += f" {cell(side(p)[1], p['unit'], spread=False) if p else ''} |"
        lines.append(line)
    lines.append("")
    for r in sessions:
        lines.append(readme_line(r) if not mark(r) else mark(r) + " " + readme_line(r))
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def render_python(results):
    """bench/python/bench_ops.py's rows of the newest session that ran it:
    rill's ops against PyTorch's in the same run."""
    r = next((x for x in results if "bench_python" in x["benches"]), None)
    if r is None:
        return "No results yet: run `bench/python/bench_ops.py --json`, then " \
               "`scripts/bench_tables.py collect`."
    b = r["benches"]["bench_python"]
    meta = b.get("meta", {})
    lines = ["| figure | rill | PyTorch, same run | ratio |", "|---|---|---|---|"]
    for row in b.get("rows", []):
        _, fig = side(row)
        lines.append(f"| {row['name']} | {cell(fig, row['unit'], spread=False)} | "
                     f"{cell(row.get('baseline'), row['unit'], spread=False)} | "
                     f"{fmt(row.get('ratio'))} |")
    lines.append("")
    desc = meta.get("platform_version")
    lines.append(readme_line(r, f" {desc}." if desc else ""))
    return "\n".join(lines)


def splice(text, name, body, path):
    b, e = BEGIN.format(name), END
    i = text.find(b)
    j = text.find(e, i + 1) if i >= 0 else -1
    if i < 0 or j < 0:
        raise SystemExit(f"bench_tables: {path} has no block '{b}' ... '{e}'")
    return text[:i + len(b)] + "\n" + body + "\n" + text[j:]


def render_all(check):
    results = load_results()
    bodies = {"results": render_results(results), "headline": render_headline(results),
              "python": render_python(results)}
    stale = []
    for rel, names in BLOCKS.items():
        path = os.path.join(ROOT, rel)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = text
        for name in names:
            new = splice(new, name, bodies[name], rel)
        if new != text:
            if check:
                stale.append(rel)
            else:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)
    if stale:
        print("bench_tables: the generated tables of " + ", ".join(stale) + " are not what "
              "bench/results/ gives; run scripts/bench_tables.py", file=sys.stderr)
        return 1
    return 0


def collect(argv):
    out, machine, note, command, files = None, None, None, None, []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("--machine", "--note", "--command") and i + 1 < len(argv):
            if a == "--machine":
                machine = argv[i + 1]
            elif a == "--note":
                note = argv[i + 1]
            else:
                command = argv[i + 1]
            i += 2
            continue
        if out is None:
            out = a
        else:
            files.append(a)
        i += 1
    if not out or not machine or not files:
        raise SystemExit(__doc__)
    benches = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        benches[data.get("meta", {}).get("bench") or os.path.basename(path)[:-5]] = data
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    now = datetime.datetime.now()
    result = {"date": now.date().isoformat(), "time": now.strftime("%H:%M"), "machine": machine,
              "commit": commit,
              "load_average": load, "command": command, "note": note, "benches": benches}
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    return 0


def main(argv):
    if argv[:1] == ["collect"]:
        return collect(argv[1:])
    if argv and argv != ["--check"]:
        print(__doc__, file=sys.stderr)
        return 2
    return render_all(check=bool(argv))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
