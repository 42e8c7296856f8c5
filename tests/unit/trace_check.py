#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks a trace that rill wrote: valid JSON in Chrome's trace-event format
and the tracks, slices, arrows, counters and instants the test expects.

Usage: trace_check.py TRACE [EXPECTATION ...]; the expectations (track=,
slice=, count=, flow=, ipcflow=, xflow, counter=, instant=, host=, nested=,
within=, and ! to negate one) are listed above main().
Exit status 0 when all hold; 1 with one line per failure otherwise."""
import json
import sys


# Expectations:
#  track=NAME                 a track (thread_name) called NAME
#  slice=TRACK|NAME[|K=V...]  a complete slice NAME on TRACK, whose args hold K=V
#                             (V compared as JSON: 4096, [4,1,1], "x")
#  count=TRACK|NAME|N         at least N slices NAME on TRACK
#  flow=TRACK_A|TRACK_B       an arrow from a slice of TRACK_A to one of TRACK_B
#  ipcflow=TRACK_A|TRACK_B    an interprocess event's arrow: its start on TRACK_A
#                             (a record), its end on TRACK_B (a wait it released),
#                             in any process of the trace
#  xflow                      an interprocess event's arrow between two processes
#                             (a trace made by rill trace-merge)
#  counter=NAME|KEY           a counter NAME with KEY > 0 at some point
#  instant=TRACK|NAME         an instant NAME on TRACK
#  host=NAME                  a slice NAME on a host thread's track
#  nested=NAME                a graph node NAME lies inside a graph launch slice
#                             on the same compute unit's track
#  within=LO|HI               every slice, instant and counter lies in [LO, HI]
#                             (microseconds of CLOCK_MONOTONIC)
#  !EXPECTATION               the expectation does not hold (e.g. !flow=A|B: no arrow)
def main(argv):
    path = argv[1]
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print("trace_check: %s is not valid JSON: %s" % (path, e))
        return 1
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        print("trace_check: %s has no traceEvents list" % path)
        return 1
    for e in events:
        for key in ("ph", "pid"):
            if key not in e:
                print("trace_check: an event lacks %r: %r" % (key, e))
                return 1
        if e["ph"] in ("X", "i", "C", "s", "f") and not isinstance(e.get("ts"), (int, float)):
            print("trace_check: an event lacks a numeric ts: %r" % e)
            return 1
    names = {}
    for e in events:
        if e["ph"] == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]

    def track(e):
        return names.get((e["pid"], e.get("tid")), "?")

    slices = [e for e in events if e["ph"] == "X"]
    failures = []
    for exp in argv[2:]:
        negated = exp.startswith("!")
        kind, _, rest = exp[negated:].partition("=")
        parts = rest.split("|")
        ok = False
        if kind == "track":
            ok = rest in names.values()
        elif kind == "slice":
            want = {}
            for kv in parts[2:]:
                k, _, v = kv.partition("=")
                want[k] = json.loads(v)
            for e in slices:
                if track(e) == parts[0] and e["name"] == parts[1] and all(
                        e.get("args", {}).get(k) == v for k, v in want.items()):
                    ok = True
        elif kind == "count":
            n = sum(1 for e in slices if track(e) == parts[0] and e["name"] == parts[1])
            ok = n >= int(parts[2])
            if not ok:
                exp += " (found %d)" % n
        elif kind == "flow":
            starts = {e["id"]: e for e in events if e["ph"] == "s"}
            for e in events:
                if e["ph"] == "f" and e["id"] in starts:
                    s = starts[e["id"]]
                    if track(s) == parts[0] and track(e) == parts[1] and s["ts"] <= e["ts"]:
                        ok = True
        elif kind == "ipcflow":
            starts = {e["id"]: e for e in events if e["ph"] == "s" and e.get("cat") == "ipc"}
            for e in events:
                if e["ph"] == "f" and e.get("cat") == "ipc" and e["id"] in starts:
                    s = starts[e["id"]]
                    if track(s) == parts[0] and track(e) == parts[1] and s["ts"] <= e["ts"]:
                        ok = True
        elif kind == "xflow":
            starts = {e["id"]: e for e in events if e["ph"] == "s" and e.get("cat") == "ipc"}
            ok = any(e["ph"] == "f" and e.get("cat") == "ipc" and e["id"] in starts and
                     starts[e["id"]]["pid"] != e["pid"] for e in events)
        elif kind == "counter":
            ok = any(e["ph"] == "C" and e["name"] == parts[0] and e["args"].get(parts[1], 0) > 0
                     for e in events)
        elif kind == "instant":
            ok = any(e["ph"] == "i" and track(e) == parts[0] and e["name"] == parts[1]
                     for e in events)
        elif kind == "host":
            ok = any(track(e).startswith("host thread") and e["name"] == rest for e in slices)
        elif kind == "nested":
            launches = [e for e in slices
                        if e.get("cat") == "graph launch" and track(e).startswith("compute unit")]
            for e in slices:
                if e["name"] == rest and e.get("cat") == "graph node":
                    ok = ok or any(track(g) == track(e) and g["ts"] <= e["ts"] + 0.002 and
                                   e["ts"] + e["dur"] <= g["ts"] + g["dur"] + 0.002 for g in launches)
        elif kind == "within":
            lo, hi = float(parts[0]), float(parts[1])
            timed = [e for e in events if e["ph"] in ("X", "i", "C")]
            ok = len(timed) > 0 and all(
                lo <= e["ts"] and e["ts"] + e.get("dur", 0) <= hi for e in timed)
        else:
            failures.append("unknown expectation " + exp)
            continue
        if ok == negated:
            failures.append(("present: " if negated else "missing: ") + exp)
    for f in failures:
        print("trace_check: %s: %s" % (path, f))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
