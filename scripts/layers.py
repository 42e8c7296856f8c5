#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The module graph of src/, from the code: which module includes which.

A module is a directory of src/ (core, mem, graph, ops, util, platform,
backend/cpu, ...); src/backend/backend.h is the module "backend", the device
interface. An edge A -> B means a file of A includes a header of B. The
layers, bottom to top:

    platform, util   no rill module below them
    trace            the trace recorder: the platform only, so that every
                     layer above records into it directly
    backend          the device interface (backend.h), which the core calls
    backend/*        devices (cpu, cuda): the interface and the layers below it
    core             semantics
    mem, graph, ops  above the core, in that order; comm and sanitizer (the
                     stream sanitizer) beside ops
    assembly         src/assembly.c, which lists the subsystems and backends

An edge that points up, from a lower layer to a higher one, is a loop
across layers.

Usage:
  scripts/layers.py            print the edges, upward ones marked
  scripts/layers.py --mermaid  the graph as a Mermaid block (docs/design.md)
  scripts/layers.py --check    exit 1 when an edge points up, or when the
                               block in docs/design.md is not the current one
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "src")
DESIGN = os.path.join(ROOT, "docs", "design.md")
BEGIN, END = "<!-- modules: scripts/layers.py --mermaid -->", "<!-- end of modules -->"

# Higher number: higher layer. Modules at one level may not include each
# other unless listed in ALLOWED.
RANK = {"platform": 0, "util": 1, "trace": 1, "backend": 2, "backend/cpu": 3, "backend/cuda": 3,
        "core": 4, "mem": 5, "graph": 6, "ops": 7, "comm": 7, "sanitizer": 7, "assembly": 8}
# Downward edges are always allowed; these are the allowed exceptions.
ALLOWED = set()
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_/]+)\.h"', re.M)


def module_of(path):
    rel = os.path.relpath(path, SRC)
    if rel == os.path.join("backend", "backend.h"):
        return "backend"
    d = os.path.dirname(rel)
    if d == "":
        return "assembly"  # src/assembly.c: lists every layer's subsystem
    if d.startswith("platform"):
        return "platform"
    return d.replace(os.sep, "/")


def edges():
    found = {}
    for dirpath, _, files in os.walk(SRC):
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            src_mod = module_of(path)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                target = os.path.join(SRC, inc + ".h")
                if not os.path.exists(target):
                    continue
                dst_mod = module_of(target)
                if dst_mod != src_mod:
                    found.setdefault((src_mod, dst_mod), []).append(
                        os.path.relpath(path, ROOT) + " -> " + inc + ".h")
    return found


def upward(a, b):
    if (a, b) in ALLOWED:
        return False
    ra, rb = RANK.get(a, 99), RANK.get(b, 99)
    return rb > ra or (rb == ra and a != b)


def mermaid(found):
    lines = ["```mermaid", "flowchart BT"]
    for m in sorted({m for e in found for m in e}, key=lambda m: (RANK.get(m, 99), m)):
        lines.append("  %s[%s]" % (m.replace("/", "_"), m))
    for (a, b) in sorted(found):
        arrow = "-.->|up|" if upward(a, b) else "-->"
        lines.append("  %s %s %s" % (a.replace("/", "_"), arrow, b.replace("/", "_")))
    lines.append("```")
    return "\n".join(lines)


def committed_block():
    with open(DESIGN, encoding="utf-8") as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        return None
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def main(argv):
    found = edges()
    if "--mermaid" in argv:
        print(mermaid(found))
        return 0
    ups = sorted(e for e in found if upward(*e))
    if "--check" in argv:
        status = 0
        for (a, b) in ups:
            for inc in found[(a, b)]:
                print("layers: %s includes %s, a higher layer: %s" % (a, b, inc))
                status = 1
        if committed_block() != mermaid(found):
            print("layers: the module graph in docs/design.md is stale; replace the block after "
                  "'%s' with the output of scripts/layers.py --mermaid" % BEGIN)
            status = 1
        return status
    for (a, b) in sorted(found):
        mark = "  UP" if upward(a, b) else ""
        print("%-12s -> %-12s %3d%s" % (a, b, len(found[(a, b)]), mark))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
