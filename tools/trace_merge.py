#!/usr/bin/env python3
"""Merge the per-rank COLL_TRACE files of one run into one Trace Event file, checking
each on the way (valid JSON, every event well-formed, B/E and b/e pairs matched).

  trace_merge.py -o all.json trace.json        # reads trace.rank*.json
  trace_merge.py -o all.json a.rank0.json a.rank1.json
  trace_merge.py --check trace.json            # check only, print a summary
  trace_merge.py --steps 3 trace.json          # collective seq 3 as a step table, like
                                               # coll-sim's, from what the ranks did
  trace_merge.py --overlap backward trace.json # how much collective time ran during the
                                               # program's 'backward' spans (DDP overlap)

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
    """FILE.json (not itself a rank file) stands for FILE.rank*.json: the ranks of one
    communicator (a process's later ones write FILE.<tag>.rank*.json: pass FILE.<tag>.json)."""
    files = []
    for name in inputs:
        if re.search(r"\.rank\d+\.json$", name):
            files.append(name)
            continue
        stem = name[:-5] if name.endswith(".json") else name
        found = [f for f in glob.glob(glob.escape(stem) + ".rank*.json")
                 if re.fullmatch(r"\.rank\d+\.json", f[len(stem):])]
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


WORDS = {
    "send": "sends elements {lo}..{hi} to rank {peer}",
    "recv": "receives elements {lo}..{hi} from rank {peer}",
    "recv_reduce": "receives and reduces elements {lo}..{hi} from rank {peer}",
    "local_copy": "copies elements {lo}..{hi} locally",
    "local_reduce": "reduces elements {lo}..{hi} locally",
}


def steps_table(events, seq):
    """The ops every rank ran for collective `seq`, step by step, in schedule order."""
    colls = [e for e in events if e.get("cat") == "collective" and e["args"]["seq"] == seq]
    if not colls:
        raise TraceError(f"no collective with seq {seq}")
    a = min(colls, key=lambda e: e["pid"])["args"]
    lines = [f"seq {seq}: {colls[0]['name']} of {a['count']} x {a['dtype']}, algo {a['algo']}, "
             f"{a['steps']} steps, {len(colls)} ranks"]
    ops = [e for e in events if e.get("cat") in ("transfer", "local") and e["args"]["seq"] == seq]
    steps = sorted({e["args"]["step"] for e in ops})
    for step in steps:
        lines.append(f"step {step}")
        for pid in sorted({e["pid"] for e in ops}):
            mine = sorted((e for e in ops if e["pid"] == pid and e["args"]["step"] == step),
                          key=lambda e: e["args"]["op"])
            if not mine:
                continue
            words = [WORDS[e["args"]["kind"]].format(
                lo=e["args"]["offset"], hi=e["args"]["offset"] + e["args"]["count"] - 1,
                peer=e["args"]["peer"]) for e in mine]
            lines.append(f"  rank {pid} " + "; ".join(words))
    return "\n".join(lines)


def overlap(events, span):
    """Per rank: collective time, and the part of it inside `span` slices (B/E pairs)."""
    lines = []
    for pid in sorted({e["pid"] for e in events}):
        mine = [e for e in events if e["pid"] == pid]
        spans, open_at = [], {}
        for e in sorted((e for e in mine if e["ph"] in "BE" and e["name"] == span),
                        key=lambda e: e["ts"]):
            if e["ph"] == "B":
                open_at[e["tid"]] = e["ts"]
            elif e["tid"] in open_at:
                spans.append((open_at.pop(e["tid"]), e["ts"]))
        colls = [e for e in mine if e["ph"] == "X" and e.get("cat") == "collective"]
        total = sum(e["dur"] for e in colls)
        inside = sum(max(0.0, min(e["ts"] + e["dur"], b) - max(e["ts"], a))
                     for e in colls for a, b in spans)
        share = 100.0 * inside / total if total > 0 else 0.0
        lines.append(f"rank {pid}: {len(colls)} collectives, {total / 1000:.2f} ms, of which "
                     f"{inside / 1000:.2f} ms ({share:.0f}%) during {len(spans)} '{span}' spans")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("inputs", nargs="+", help="FILE.json (all ranks) or FILE.rank<r>.json")
    ap.add_argument("-o", "--output", help="merged file to write")
    ap.add_argument("--check", action="store_true", help="only check and summarise")
    ap.add_argument("--steps", type=int, metavar="SEQ",
                    help="print collective SEQ's ops per step and rank")
    ap.add_argument("--overlap", metavar="SPAN",
                    help="collective time per rank that ran during the SPAN spans")
    args = ap.parse_args()
    if not (args.check or args.output or args.steps is not None or args.overlap):
        ap.error("give -o OUTPUT, --check, --steps SEQ or --overlap SPAN")
    try:
        merged = []
        for path in expand(args.inputs):
            merged.extend(load(path))
        if args.steps is not None:
            print(steps_table(merged, args.steps))
            return 0
        if args.overlap:
            print(overlap(merged, args.overlap))
            return 0
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
