#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The module graph of src/, from the code: which module includes (and, with
--calls BUILD, calls) which, checked against the layers of docs/design.md.
No edge may point up; inside the ONE_WAY modules files call one way.

Usage: scripts/layers.py [--mermaid] [--loops BUILD] [--check [--calls BUILD] [--python]]
  --mermaid  the graph as a Mermaid block (docs/design.md)
  --check    exit 1 on an upward edge, an include of a backend's folder
             (src/backend/<kind>/) from outside it other than src/assembly.c, a loop in a ONE_WAY module (not in
             KNOWN_LOOPS) or in python/rill (not in KNOWN_PYTHON_LOOPS), an
             entry of KNOWN_LOOPS that is no loop any more, a module of
             python/rill/compat that imports a private module of the package
             other than COMPAT_API, or a stale block
  --loops BUILD  print every loop of calls inside a module, and the calls
             from file to file within each"""
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
# Modules whose files call each other one way (--calls): every module.
ONE_WAY = ["backend/cpu", "backend/cuda", "comm", "core", "graph", "mem", "ops", "sanitizer",
           "trace", "platform", "util"]
# Loops of calls inside a ONE_WAY module that are not undone yet: the sorted
# list of its files, and why it is still there.
KNOWN_LOOPS = [
    (["src/core/calls.c", "src/core/device.c", "src/core/device_query.c",
      "src/core/device_sync.c", "src/core/event.c", "src/core/event_ipc.c", "src/core/ipc_wire.c",
      "src/core/kernel.c", "src/core/queue_limit.c", "src/core/stream.c",
      "src/core/stream_fail.c", "src/core/stream_wait.c", "src/core/trace_api.c"],
     "device.c is both the bottom and the top of the core: every file asks it for the runtime, "
     "the calling thread's worker flag and devices (rill__runtime_get, rill__thread_is_worker, "
     "rill__device_resolve), and its runtime creates each device's default stream (stream.c); "
     "streams and their failures, host waits and traces name each other too. Undoing it means "
     "moving the runtime and the thread state below the streams."),
    (["src/backend/cuda/cuda_complete.c", "src/backend/cuda/cuda_graph.c",
      "src/backend/cuda/cuda_runner.c", "src/backend/cuda/cuda_stream.c"],
     "a CUDA stream's issuing, completion, runners and graph launches hand its commands to "
     "each other: issuing rings the pump and hands host work to a runner, completion issues "
     "what became ready, a runner completes its job and issues the next, and a graph launch is "
     "issued like a kernel and completed like one. Undoing it means one dispatcher per stream "
     "that the others report to."),
]
# Loops of imports among the modules of python/rill not undone yet, each as
# the sorted list of its modules.
KNOWN_PYTHON_LOOPS = []
# The one private module of python/rill that its compatibility modules
# (rill.compat) may import: their internal API. The rest they take from
# rill's public names.
COMPAT_API = "rill._internal"
# A declaration at the start of a line of a header: a function or variable.
DECLARED = re.compile(r'^(?!\s|#|return\b|typedef\b|static\b)[^;{}()]*?\b(rill_\w+)\s*[(\[;]',
                      re.M)


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


def is_backend_folder(m):
    """src/backend/<kind>/: one backend, which only its own files and the
    assembly (src/assembly.c, which lists the backends) may include."""
    return m.startswith("backend/")


def backend_problems(found):
    return ["layers: %s includes %s, a backend's own folder; only that backend's files and "
            "src/assembly.c may (the rest reach a backend through src/backend/backend.h): %s"
            % (a, b, inc)
            for (a, b) in sorted(found) if is_backend_folder(b) and a not in (b, "assembly")
            for inc in found[(a, b)]]


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


def declarations():
    """{symbol: module of the header that declares it}"""
    owners = {}
    for dirpath, _, files in os.walk(SRC):
        for name in sorted(files):
            if name.endswith(".h"):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8") as f:
                    for sym in DECLARED.findall(f.read()):
                        owners.setdefault(sym, module_of(path))
    return owners


def symbols(build):
    """{source file: (defined symbols, undefined symbols)} from the
    library's objects in build."""
    import subprocess
    objs = os.path.join(build, "CMakeFiles", "rill_objects.dir", "src")
    found = {}
    for dirpath, _, files in os.walk(objs):
        for name in files:
            if not name.endswith(".o"):
                continue
            src = os.path.join(SRC, os.path.relpath(os.path.join(dirpath, name), objs)[:-2])
            if not os.path.exists(src):
                continue  # an object of a file that is gone
            out = subprocess.run(["nm", os.path.join(dirpath, name)], capture_output=True,
                                 text=True, check=True).stdout
            defined, undefined = set(), set()
            for line in out.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] in "TDBRC":
                    defined.add(parts[2])
                elif len(parts) == 2 and parts[0] == "U":
                    undefined.add(parts[1])
            found[src] = (defined, undefined)
    return found


def call_problems(build):
    """Sentences for each upward call and each loop of calls inside a
    ONE_WAY module that KNOWN_LOOPS does not list."""
    syms = symbols(build)
    if not syms:
        return ["layers: no objects of the library under %s; build it first" % build]
    definer = {s: f for f, (defs, _) in syms.items() for s in defs}
    declared = declarations()
    problems, inside = [], {}
    for f, (_, undefs) in sorted(syms.items()):
        mf = module_of(f)
        for s in sorted(undefs):
            if s not in definer:
                continue
            g = definer[s]
            owner = declared.get(s, module_of(g))
            if owner != mf and upward(mf, owner):
                problems.append("layers: %s calls %s of %s, a higher layer" % (
                    os.path.relpath(f, ROOT), s, owner))
            if module_of(g) == mf and g != f:
                inside.setdefault(f, set()).add(g)
    loops = [[os.path.relpath(f, ROOT) for f in comp]
             for comp in strongly_connected(inside)]
    known = [files for files, _ in KNOWN_LOOPS]
    for comp in loops:
        if module_of(os.path.join(ROOT, comp[0])) in ONE_WAY and comp not in known:
            problems.append("layers: files of %s call each other in a loop: %s" % (
                module_of(os.path.join(ROOT, comp[0])), ", ".join(comp)))
    for files in known:
        if files not in loops:
            problems.append("layers: KNOWN_LOOPS lists %s, which are no loop any more; take "
                            "the entry out (or update it to the loop that is left)" %
                            ", ".join(files))
    return problems


def print_loops(build):
    """Every loop of calls inside a module, with the symbols each file of
    it calls in another."""
    syms = symbols(build)
    definer = {s: f for f, (defs, _) in syms.items() for s in defs}
    inside, calls = {}, {}
    for f, (_, undefs) in sorted(syms.items()):
        for s in undefs:
            g = definer.get(s)
            if g is not None and g != f and module_of(g) == module_of(f):
                inside.setdefault(f, set()).add(g)
                calls.setdefault((f, g), []).append(s)
    for comp in strongly_connected(inside):
        print("loop in %s:" % module_of(comp[0]))
        for f in comp:
            for g in comp:
                if (f, g) in calls:
                    print("  %s -> %s: %s" % (os.path.relpath(f, ROOT), os.path.relpath(g, ROOT),
                                               " ".join(sorted(calls[(f, g)]))))


def strongly_connected(graph):
    """The sets of nodes of graph ({node: successors}) that reach each
    other, of two nodes or more, each sorted."""
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def python_problems():
    """Sentences for each loop of imports among python/rill's modules
    (those inside functions count) that KNOWN_PYTHON_LOOPS does not list,
    and for each import of a private module of the package (rill._name)
    other than COMPAT_API by a module of rill.compat."""
    import ast
    base = os.path.join(ROOT, "python")
    modules = {}
    for dirpath, _, files in os.walk(os.path.join(base, "rill")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(dirpath, name)
                mod = os.path.relpath(path, base)[:-3].replace(os.sep, ".")
                modules[mod[:-9] if mod.endswith(".__init__") else mod] = path
    graph = {}
    for mod, path in modules.items():
        package = mod if path.endswith("__init__.py") else mod.rsplit(".", 1)[0]
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.ImportFrom):
                parts = package.split(".")
                if node.level:
                    origin = ".".join(parts[:len(parts) - node.level + 1] +
                                      ([node.module] if node.module else []))
                else:
                    origin = node.module or ""
                targets = ([origin] if node.module else []) + [
                    origin + "." + a.name for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target in modules and target != mod:
                    graph.setdefault(mod, set()).add(target)
    problems = []
    for mod in sorted(graph):
        if not mod.startswith("rill.compat."):
            continue
        for target in sorted(graph[mod]):
            if target.count(".") == 1 and target.startswith("rill._") and target != COMPAT_API:
                problems.append("layers: %s imports %s, a private module of the package; the "
                                "compatibility modules take what they need from %s (add it "
                                "there) or from rill's public names" % (mod, target, COMPAT_API))
    return problems + ["layers: python modules import each other in a loop: %s" % ", ".join(loop)
                       for loop in strongly_connected(graph) if loop not in KNOWN_PYTHON_LOOPS]


def main(argv):
    found = edges()
    if "--mermaid" in argv:
        print(mermaid(found))
        return 0
    if "--loops" in argv:
        print_loops(argv[argv.index("--loops") + 1])
        return 0
    ups = sorted(e for e in found if upward(*e))
    if "--check" in argv:
        status = 0
        if "--calls" in argv:
            for problem in call_problems(argv[argv.index("--calls") + 1]):
                print(problem)
                status = 1
        if "--python" in argv:
            for problem in python_problems():
                print(problem)
                status = 1
        for (a, b) in ups:
            for inc in found[(a, b)]:
                print("layers: %s includes %s, a higher layer: %s" % (a, b, inc))
                status = 1
        for problem in backend_problems(found):
            print(problem)
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
