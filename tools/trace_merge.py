#!/usr/bin/env python3
"""Merge the per-rank COLL_TRACE files of one run into one Trace Event file, checking
each on the way (valid JSON, every event well-formed, B/E and b/e pairs matched).

  trace_merge.py -o all.json trace.json        # reads trace.rank*.json
  trace_merge.py -o all.json a.rank0.json a.rank1.json
  trace_merge.py --check trace.json            # check only, print a summary

Perfetto (ui.perfetto.dev) also opens several files at once; the merged file is for
chrome://tracing, which opens one. Exit status 1 names the file and event that is wrong.
"""
import argparse
import glob
import json
import re
import sys

PHASES = set("XBEMbei")


class TraceError(Exception):
    pass


def expand(inputs):
    """FILE.json (not itself a rank file) stands for FILE.rank*.json and FILE.c*.rank*.json."""
    files = []
    for name in inputs:
        if re.search(r"\.rank\d+\.json$", name):
            files.append(name)
            continue
        stem = name[:-5] if name.endswith(".json") else name
        found = glob.glob(glob.escape(stem) + ".rank*.json")
        found += glob.glob(glob.escape(stem) + ".c*.rank*.json")
        if not found:
            raise TraceError(f"{name}: no {stem}.rank<r>.json files")
        key = lambda f: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", f)]
        files.extend(sorted(set(found), key=key))
    return files


def check_event(path, i, e):
    where = f"{path}: event {i}"
    if not isinstance(e, dict):
        raise TraceError(f"{where}: not an object")
    for key, kind in (("name", str), ("ph", str), ("pid", int), ("tid", int)):
        if not isinstance(e.get(key), kind):
            raise TraceError(f"{where}: '{key}' missing or not {kind.__name__}")
    if e["ph"] not in PHASES:
        raise TraceError(f"{where}: unknown phase {e['ph']!r}")
    if e["ph"] != "M" and not isinstance(e.get("ts"), (int, float)):
        raise TraceError(f"{where}: no numeric 'ts'")
    if e["ph"] == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
        raise TraceError(f"{where}: complete event without a 'dur' >= 0")
    if e["ph"] in "be" and "id" not in e:
        raise TraceError(f"{where}: async event without an 'id'")


def check_pairs(path, events):
    """B/E nest per thread in time order; b/e match per (cat, id)."""
    open_spans = {}
    for e in sorted((e for e in events if e["ph"] in "BE"), key=lambda e: e["ts"]):
        stack = open_spans.setdefault((e["pid"], e["tid"]), [])
        if e["ph"] == "B":
            stack.append(e["name"])
        elif not stack or stack.pop() != e["name"]:
            raise TraceError(f"{path}: end of '{e['name']}' (tid {e['tid']}) without its begin")
    for (pid, tid), stack in open_spans.items():
        if stack:
            raise TraceError(f"{path}: span '{stack[-1]}' (pid {pid}, tid {tid}) never ends")
    starts = {}
    for e in events:
        if e["ph"] in "be":
            starts[(e.get("cat"), e["id"])] = starts.get((e.get("cat"), e["id"]), 0) + (
                1 if e["ph"] == "b" else -1)
    bad = [k for k, v in starts.items() if v != 0]
    if bad:
        raise TraceError(f"{path}: async event {bad[0]} has unmatched begin/end")


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as err:
        raise TraceError(f"{path}: {err}") from err
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TraceError(f"{path}: not an object with a 'traceEvents' list")
    events = doc["traceEvents"]
    for i, e in enumerate(events):
        check_event(path, i, e)
    check_pairs(path, events)
    return events


def summary(events):
    ranks = {}
    for e in events:
        r = ranks.setdefault(e["pid"], {"events": 0, "collectives": 0, "transfers": 0, "spans": 0})
        r["events"] += 1
        cat = e.get("cat")
        if e["ph"] == "X" and cat == "collective":
            r["collectives"] += 1
        elif e["ph"] == "X" and cat == "transfer":
            r["transfers"] += 1
        elif e["ph"] == "B":
            r["spans"] += 1
    return "\n".join(
        f"rank {pid}: {r['events']} events, {r['collectives']} collectives, "
        f"{r['transfers']} transfers, {r['spans']} spans"
        for pid, r in sorted(ranks.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", help="FILE.json (all ranks) or FILE.rank<r>.json")
    ap.add_argument("-o", "--output", help="merged file to write")
    ap.add_argument("--check", action="store_true", help="only check and summarise")
    args = ap.parse_args()
    if not args.check and not args.output:
        ap.error("give -o OUTPUT or --check")
    try:
        merged = []
        for path in expand(args.inputs):
            merged.extend(load(path))
    except TraceError as err:
        print(f"trace_merge: {err}", file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            json.dump({"displayTimeUnit": "ns", "traceEvents": merged}, f, separators=(",", ":"))
    print(summary(merged))
    return 0


if __name__ == "__main__":
    sys.exit(main())
