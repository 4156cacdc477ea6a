#!/usr/bin/env python3
# Runs PyTorch's own distributed test suite (DistributedTest._DistTestBase from the
# installed wheel's torch/testing/_internal/distributed/distributed_test.py, one process
# per rank) on a backend, "coll" or "gloo", and writes one result per test as JSON; with
# --compare it prints the pass counts of several such files side by side and the tests
# gloo passes and coll does not. It is a diagnostic tool, not part of `meson test`.
#
#   run_torch_suite.py --backend coll --world 2 [--pattern REGEX] [--out FILE.json]
#   run_torch_suite.py --compare gloo-w2.json coll-w2.json [gloo-w3.json coll-w3.json]
#
# Three roles share this file:
#   driver  (the command above): no torch; lists the tests, runs them in a worker process,
#           kills and restarts the worker when one test runs past its limit, writes --out.
#   worker  (--worker, started by the driver): runs the tests with unittest and appends a
#           line per test event to a JSON-lines file the driver watches.
#   rank    (started by the suite itself with multiprocessing "spawn", which re-runs this
#           file as __mp_main__): the module-level code below, under RUN_TORCH_SUITE_ROLE,
#           imports torch_coll and declares the plugin before the suite is imported, so
#           every rank process sees the backend exactly as the worker does.
#
# --start-method forkserver starts each rank as a fork of a server that imported all of
# that once: ~0.5 s per test instead of ~7-13 s on 2 CPUs (the default, spawn, is what
# PyTorch's CI does; both gave the same result for every test here). --unskip REGEX runs
# tests the suite skips by backend name, to see what coll would do in them. A coll run
# loads a copy of the torch_coll module and libcoll taken at its start (the build tree
# may be rebuilt meanwhile) and records their mtimes in the result's "meta".
#
# A backend other than gloo/nccl/ucc/mpi is declared to the suite the way its files allow:
# added to DistTestCases.backend_feature["plugin"] (require_backend_is_available accepts
# it) and to backend_feature["ddp"] and ["subgroup"], before distributed_test.py is
# imported, since its decorators read those sets at import time.
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TORCH_COLL_PATH = os.path.join(os.path.dirname(os.path.dirname(HERE)), "build",
                                       "torch_coll", "torch2")
BUILTIN_BACKENDS = ("gloo", "nccl", "ucc", "mpi")
CLASS_NAME = "TestDistBackendWithSpawn"
STATUSES = ("passed", "failed", "error", "skipped", "timeout")


# --------------------------------------------------------------------------- suite
def _define_suite():
    """Imports the suite (after declaring the plugin) and defines the test class in this
    module's namespace. Runs in the worker and, through spawn, in every rank process."""
    backend = os.environ["BACKEND"]
    import torch
    import torch.distributed as dist  # noqa: F401

    if backend not in BUILTIN_BACKENDS:
        __import__(os.environ.get("RUN_TORCH_SUITE_BACKEND_MODULE", "torch_coll"))
        from torch.testing._internal.common_distributed import DistTestCases

        for feature in ("plugin", "ddp", "subgroup"):
            DistTestCases.backend_feature[feature].add(backend)
    from torch.testing._internal.distributed.distributed_test import (
        DistributedTest,
        TestDistBackend,
    )

    class TestDistBackendWithSpawn(TestDistBackend, DistributedTest._DistTestBase):
        def setUp(self):
            super().setUp()
            self._spawn_processes()

        def _spawn_processes(self):
            method = os.environ.get("RUN_TORCH_SUITE_START", "spawn")
            if method == "spawn":  # what PyTorch's test_distributed_spawn.py does
                return super()._spawn_processes()
            # forkserver: the server imports this file as a module (torch, the backend,
            # the suite) once; each rank is a fork of it and re-runs this file as
            # __mp_main__ with those modules already loaded. (Preloading "__main__" does
            # nothing on Python 3.11: forkserver drops the main path.) The server's
            # environment is the worker's at its start, so the parent's as it is now
            # (TEMP_DIR, INIT_METHOD set per test) goes to the ranks in a file.
            with open(self.file_name + ".env", "w") as f:
                json.dump(dict(os.environ), f)
            ctx = torch.multiprocessing.get_context(method)
            ctx.set_forkserver_preload(
                [os.path.splitext(os.path.basename(os.path.abspath(__file__)))[0]])
            self._start_processes(ctx.Process)

        def tearDown(self):
            super().tearDown()
            # The suite's store file (NamedTemporaryFile(delete=False) in its setUp) and
            # ours: without this, one file per test stays in /tmp.
            for f in (self.file_name + ".env", self.file_name):
                if os.path.exists(f):
                    os.unlink(f)

        @classmethod
        def _run(cls, rank, test_name, file_name, pipe, **kwargs):
            env_file = file_name + ".env"
            if os.environ.get("RUN_TORCH_SUITE_START", "spawn") != "spawn":
                with open(env_file) as f:
                    env = json.load(f)
                os.environ.clear()
                os.environ.update(env)
            return super()._run(rank, test_name, file_name, pipe, **kwargs)

    TestDistBackendWithSpawn.__module__ = __name__
    TestDistBackendWithSpawn.__qualname__ = CLASS_NAME  # pickled by name into the ranks
    globals()[CLASS_NAME] = TestDistBackendWithSpawn
    return torch, TestDistBackendWithSpawn


if os.environ.get("RUN_TORCH_SUITE_ROLE") == "worker":
    _define_suite()


# --------------------------------------------------------------------------- worker
def _summary(text):
    """The most telling line of a failure: the last 'SomethingError: ...' line of the
    first rank's traceback, else the last non-empty line."""
    if not text:
        return ""
    lines = text.splitlines()
    first_rank = []
    started = False
    for line in lines:
        if re.match(r"Process \d+ exited with error code", line):
            if started:
                break
            started = True
        first_rank.append(line)
    pat = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Failure|Timeout)\w*|torch\.\w+\.\w+Error)\b.*:")
    for candidates in (first_rank, lines):
        hits = [l.strip() for l in candidates if pat.match(l)]
        if hits:
            return hits[-1][:400]
    nonempty = [l.strip() for l in lines if l.strip()]
    return nonempty[-1][:400] if nonempty else ""


def _first_lines(text, n=40):
    """The failure from the first failing rank's traceback on (the parent's own frames
    before it say only that a rank failed), n lines."""
    lines = (text or "").splitlines()
    for i, line in enumerate(lines):
        if re.search(r"Process \d+ (exited with error code|terminated or timed out)", line):
            lines = lines[i:]
            break
    return "\n".join(lines[:n]) + ("\n..." if len(lines) > n else "")


def _worker_main(args):
    import unittest

    import torch

    cls = globals().get(CLASS_NAME) or _define_suite()[1]
    if args.list:
        names = unittest.TestLoader().getTestCaseNames(cls)
        print(json.dumps({"torch": torch.__version__, "tests": list(names)}))
        return 0
    names = [l.strip() for l in open(args.tests) if l.strip()]
    if args.unskip:
        # Experiment: run tests the suite skips statically (its skip-by-backend-name
        # decorators set __unittest_skip__ on the function at import). Runtime skips
        # (world size, devices) still apply.
        rx = re.compile(args.unskip)
        for n in names:
            fn = getattr(cls, n)
            if rx.search(n) and getattr(fn, "__unittest_skip__", False):
                fn.__unittest_skip__ = False
    events = open(args.events, "a", buffering=1)

    def emit(**kw):
        kw["t"] = time.time()
        events.write(json.dumps(kw) + "\n")
        events.flush()

    class Result(unittest.TestResult):
        def startTest(self, test):
            super().startTest(test)
            self._t0 = time.time()
            emit(event="start", test=test._testMethodName)

        def _done(self, test, status, text=""):
            emit(event="end", test=test._testMethodName, status=status,
                 duration=round(time.time() - self._t0, 2),
                 summary=_summary(text) if status != "skipped" else text[:400],
                 message=_first_lines(text))

        def addSuccess(self, test):
            super().addSuccess(test)
            self._done(test, "passed")

        def addFailure(self, test, err):
            super().addFailure(test, err)
            self._done(test, "failed", self.failures[-1][1])

        def addError(self, test, err):
            super().addError(test, err)
            self._done(test, "error", self.errors[-1][1])

        def addSkip(self, test, reason):
            super().addSkip(test, reason)
            self._done(test, "skipped", str(reason))

        def addExpectedFailure(self, test, err):
            super().addExpectedFailure(test, err)
            self._done(test, "passed", "expected failure")

        def addUnexpectedSuccess(self, test):
            super().addUnexpectedSuccess(test)
            self._done(test, "failed", "unexpected success")

    suite = unittest.TestSuite(cls(n) for n in names)
    suite.run(Result())
    emit(event="worker_done")
    return 0


# --------------------------------------------------------------------------- driver
def _worker_env(args):
    env = dict(os.environ)
    env["BACKEND"] = args.backend
    env["WORLD_SIZE"] = str(args.world)
    env["RUN_TORCH_SUITE_ROLE"] = "worker"
    # The suite's own per-test limit (parent kills the ranks and reports their stacks);
    # the driver's hard limit is above it.
    env["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.timeout)
    env.setdefault("PYTHONWARNINGS", "ignore")
    env["PYTHONUNBUFFERED"] = "1"
    env.setdefault("PYTORCH_PRINT_REPRO_ON_FAILURE", "0")
    env["RUN_TORCH_SUITE_START"] = args.start_method
    # HERE: Python 3.11's forkserver ignores the parent's sys.path, and imports this file
    # by name from PYTHONPATH.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (
        args.torch_coll_path if args.backend not in BUILTIN_BACKENDS else None,
        HERE, env.get("PYTHONPATH")) if p)
    for var in ("MASTER_PORT", "RANK", "LOCAL_RANK", "INIT_METHOD", "TEMP_DIR"):
        env.pop(var, None)
    return env


def _snapshot_build(args):
    """Copies the torch_coll module and the libcoll it loads ($ORIGIN/../../libcoll) out
    of the build tree, so that a rebuild during the run cannot mix two builds (the worker
    restarts after a timeout). Returns the module's new folder and the files' mtimes."""
    import shutil

    src_mod = os.path.abspath(args.torch_coll_path)
    build = os.path.dirname(os.path.dirname(src_mod))
    snap = f"/tmp/torch_suite_snap_{os.getpid()}"
    import atexit
    atexit.register(shutil.rmtree, snap, ignore_errors=True)
    dst_mod = os.path.join(snap, "torch_coll", os.path.basename(src_mod))
    os.makedirs(dst_mod, exist_ok=True)
    os.makedirs(os.path.join(snap, "libcoll"), exist_ok=True)
    stamps = {}
    for f in os.listdir(src_mod):
        if f.startswith("torch_coll") and f.endswith(".so"):
            shutil.copy2(os.path.join(src_mod, f), dst_mod)
            stamps[os.path.join(src_mod, f)] = os.path.getmtime(os.path.join(src_mod, f))
    lib = os.path.join(build, "libcoll", "libcoll.so.0")
    if os.path.exists(lib):
        shutil.copy2(os.path.realpath(lib), os.path.join(snap, "libcoll", "libcoll.so.0"))
        stamps[os.path.realpath(lib)] = os.path.getmtime(os.path.realpath(lib))
    stamps = {k: time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(v))
              for k, v in stamps.items()}
    return dst_mod, stamps


def _list_tests(args, env):
    out = subprocess.run([args.python, os.path.abspath(__file__), "--worker", "--list"],
                         env=env, capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        sys.exit(f"listing the suite failed:\n{out.stderr[-4000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# Tests the suite itself allows longer than its default (common_distributed TIMEOUT_OVERRIDE).
SUITE_TIMEOUT_OVERRIDE = {"test_ddp_uneven_inputs": 400, "test_DistributedDataParallel": 500}


def _hard_limit(args, name):
    return max(args.timeout, SUITE_TIMEOUT_OVERRIDE.get(name, 0)) + args.grace


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the worker's own session: it and its ranks
    except ProcessLookupError:
        pass
    proc.wait()


def _driver_main(args):
    stamps = None
    if args.backend not in BUILTIN_BACKENDS and not args.no_snapshot:
        args.torch_coll_path, stamps = _snapshot_build(args)
    env = _worker_env(args)
    listing = _list_tests(args, env)
    names = listing["tests"]
    if args.pattern:
        rx = re.compile(args.pattern)
        names = [n for n in names if rx.search(n)]
    if args.skip_pattern:
        rx = re.compile(args.skip_pattern)
        names = [n for n in names if not rx.search(n)]
    out = args.out or f"/tmp/torch_suite_{args.backend}_w{args.world}.json"
    log = args.log or os.path.splitext(out)[0] + ".log"
    events_path = os.path.splitext(out)[0] + ".events.jsonl"
    build = os.path.join(args.torch_coll_path, "")
    so = [f for f in os.listdir(args.torch_coll_path) if f.startswith("torch_coll")] \
        if os.path.isdir(args.torch_coll_path) else []
    meta = {
        "backend": args.backend, "world": args.world, "pattern": args.pattern,
        "skip_pattern": args.skip_pattern, "unskip": args.unskip, "torch": listing["torch"],
        "python": args.python, "start_method": args.start_method, "timeout_s": args.timeout, "grace_s": args.grace,
        "selected": len(names), "suite_size": len(listing["tests"]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "torch_coll_path": build if args.backend not in BUILTIN_BACKENDS else None,
        "torch_coll_mtime": (time.strftime(
            "%Y-%m-%dT%H:%M:%S%z", time.localtime(os.path.getmtime(os.path.join(
                args.torch_coll_path, so[0]))))
            if so and args.backend not in BUILTIN_BACKENDS else None),
        "build_files": stamps,
        "log": log,
    }
    results = {}
    t_start = time.time()
    deadline = t_start + args.max_minutes * 60 if args.max_minutes else None
    open(events_path, "w").close()
    logf = open(log, "a")
    print(f"[{meta['started']}] {args.backend} world {args.world}: {len(names)} of "
          f"{len(listing['tests'])} tests; log {log}", flush=True)

    def save(final=False):
        meta["finished" if final else "updated"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        meta["duration_s"] = round(time.time() - t_start, 1)
        meta["counts"] = {s: sum(1 for r in results.values() if r["status"] == s)
                          for s in STATUSES}
        meta["not_run"] = len(names) - len(results)
        tmp = out + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"meta": meta, "tests": results}, f, indent=1, sort_keys=True)
        os.replace(tmp, out)

    pos = 0  # events file offset already read
    stopped = False
    while not stopped:
        todo = [n for n in names if n not in results]
        if not todo:
            break
        if deadline and time.time() > deadline:
            meta["stopped"] = f"--max-minutes {args.max_minutes} reached"
            break
        tests_file = os.path.splitext(out)[0] + ".todo"
        with open(tests_file, "w") as f:
            f.write("\n".join(todo) + "\n")
        cmd = [args.python, os.path.abspath(__file__), "--worker",
               "--tests", tests_file, "--events", events_path]
        if args.unskip:
            cmd += ["--unskip", args.unskip]
        logf.write(f"\n==== worker for {len(todo)} tests at {time.ctime()}\n")
        logf.flush()
        proc = subprocess.Popen(cmd, env=env, stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd="/tmp")
        current, t0 = None, time.time()
        while True:
            time.sleep(0.5)
            with open(events_path) as f:
                f.seek(pos)
                chunk = f.read()
            complete = chunk[: chunk.rfind("\n") + 1]
            pos += len(complete)
            for line in complete.splitlines():
                ev = json.loads(line)
                if ev["event"] == "start":
                    current, t0 = ev["test"], ev["t"]
                    logf.write(f"==== start {current} at {time.ctime(ev['t'])}\n")
                    logf.flush()
                elif ev["event"] == "end":
                    results[ev["test"]] = {k: ev[k] for k in
                                           ("status", "duration", "summary", "message")}
                    print(f"  {ev['status']:8s} {ev['duration']:7.1f}s {ev['test']}"
                          + (f"  -- {ev['summary'][:150]}" if ev["status"] in
                             ("failed", "error") else ""), flush=True)
                    current = None
                    save()
            if proc.poll() is not None:
                if current is not None and current not in results:
                    results[current] = {
                        "status": "error", "duration": round(time.time() - t0, 2),
                        "summary": f"worker exited with {proc.returncode} during the test",
                        "message": f"worker exited with {proc.returncode}; see {log}"}
                    save()
                break
            if current is not None and time.time() - t0 > _hard_limit(args, current):
                _kill_group(proc)
                results[current] = {
                    "status": "timeout", "duration": round(time.time() - t0, 2),
                    "summary": f"killed after {_hard_limit(args, current)}s (driver limit)",
                    "message": f"no result within {_hard_limit(args, current)}s; see {log}"}
                print(f"  timeout  {time.time() - t0:7.1f}s {current}", flush=True)
                save()
                break
            if deadline and time.time() > deadline:
                _kill_group(proc)
                meta["stopped"] = f"--max-minutes {args.max_minutes} reached"
                stopped = True
                break
        if proc.poll() is None:
            _kill_group(proc)
    save(final=True)
    for leftover in (os.path.splitext(out)[0] + ".todo",):
        if os.path.exists(leftover):
            os.unlink(leftover)
    if stamps is not None:
        import shutil

        shutil.rmtree(os.path.dirname(os.path.dirname(args.torch_coll_path)),
                      ignore_errors=True)
    c = meta["counts"]
    print(f"done in {meta['duration_s']}s: " + ", ".join(f"{k} {v}" for k, v in c.items())
          + (f", not run {meta['not_run']}" if meta["not_run"] else "") + f"; wrote {out}",
          flush=True)
    return 0


# --------------------------------------------------------------------------- compare
def _label(meta):
    """backend, and how the run differs from a plain one: start method, --unskip."""
    label = meta["backend"]
    if meta.get("start_method", "spawn") != "spawn":
        label += "/" + meta["start_method"]
    if meta.get("unskip"):
        label += "/unskip"
    return label


def _compare_main(files):
    runs = []
    for path in files:
        with open(path) as f:
            runs.append(json.load(f))
    cols = ("passed", "failed", "error", "timeout", "skipped")
    print(f"{'run':22s} {'world':>5s} {'tests':>5s} " + " ".join(f"{c:>7s}" for c in cols)
          + "  started, duration, coll build")
    for r in runs:
        m, t = r["meta"], r["tests"]
        counts = {c: sum(1 for v in t.values() if v["status"] == c) for c in cols}
        build = f", {m['torch_coll_mtime']}" if m.get("torch_coll_mtime") else ""
        print(f"{_label(m):22s} {m['world']:5d} {len(t):5d} "
              + " ".join(f"{counts[c]:7d}" for c in cols)
              + f"  {m['started']}, {m.get('duration_s', 0) / 60:.1f} min{build}"
              + (f", pattern {m['pattern'][:40]}" if m.get("pattern") else "")
              + (f", NOT RUN {m['not_run']}" if m.get("not_run") else ""))
    # Each non-gloo run against the gloo run of its world (same start method if there is one).
    for r in runs:
        m = r["meta"]
        if m["backend"] == "gloo":
            continue
        bases = [g for g in runs if g["meta"]["backend"] == "gloo"
                 and g["meta"]["world"] == m["world"]]
        same = [g for g in bases if g["meta"].get("start_method") == m.get("start_method")]
        if not bases:
            continue
        gl, co = (same or bases)[0]["tests"], r["tests"]
        glabel = _label((same or bases)[0]["meta"])
        common = [n for n in sorted(gl) if n in co]
        lost = [n for n in common if gl[n]["status"] == "passed" and co[n]["status"] != "passed"]
        gained = [n for n in common if co[n]["status"] == "passed" and gl[n]["status"] != "passed"]
        other = [n for n in common if n not in lost and n not in gained
                 and gl[n]["status"] != co[n]["status"]]
        print(f"\nworld {m['world']}: {len(lost)} tests {glabel} passes and {_label(m)} does not")
        for n in lost:
            print(f"  {n:58s} {co[n]['status']:8s} {co[n]['summary'][:300]}")
        if gained:
            print(f"world {m['world']}: {len(gained)} tests {_label(m)} passes and {glabel} does not")
            for n in gained:
                print(f"  {n:58s} gloo {gl[n]['status']:8s} {gl[n]['summary'][:200]}")
        if other:
            print(f"world {m['world']}: {len(other)} other differences ({glabel} -> {_label(m)})")
            for n in other:
                print(f"  {n:58s} {gl[n]['status']} -> {co[n]['status']}: {co[n]['summary'][:200]}")
    return 0


def _read_gaps(path):
    """{test: (kind, reason)} from the gaps file (see its header)."""
    gaps = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, kind, reason = line.split(None, 2)
            if kind not in ("forced-pass", "gap"):
                sys.exit(f"{path}: {name}: kind must be forced-pass or gap, not {kind}")
            gaps[name] = (kind, reason)
    return gaps


def _check_main(args):
    """gloo, then coll, then coll on the forced-pass tests with --unskip, each into a
    temporary folder; fails on a test gloo passes that coll does not and the gaps file does
    not explain, on a forced-pass test that fails when forced, on a listed test coll now
    passes, and on any test neither backend finished (timeout, error of the runner)."""
    import tempfile

    gaps = _read_gaps(args.check)
    forced = sorted(n for n, (k, _) in gaps.items() if k == "forced-pass")
    tmp = tempfile.mkdtemp(prefix="torch_suite_check_")
    me = [args.python, os.path.abspath(__file__), "--world", str(args.world),
          "--start-method", args.start_method, "--torch-coll-path", args.torch_coll_path,
          "--timeout", str(args.timeout)]
    runs = {}
    for label, extra in (("gloo", ["--backend", "gloo"]), ("coll", ["--backend", "coll"]),
                         ("forced", ["--backend", "coll", "--unskip", "|".join(forced),
                                     "--pattern", "^(" + "|".join(forced) + ")$"])):
        out = os.path.join(tmp, label + ".json")
        print(f"== {label}: {' '.join(extra)}", flush=True)
        rc = subprocess.call(me + extra + ["--out", out])
        if rc != 0 or not os.path.exists(out):
            print(f"check: the {label} run failed (exit {rc}); its log: {out[:-5]}.log")
            return 1
        with open(out) as f:
            runs[label] = json.load(f)["tests"]
    _compare_main([os.path.join(tmp, n + ".json") for n in ("gloo", "coll")])
    gl, co, fo = runs["gloo"], runs["coll"], runs["forced"]
    problems = []
    for n in sorted(gl):
        if gl[n]["status"] == "passed" and co.get(n, {}).get("status") != "passed" and n not in gaps:
            problems.append(f"{n}: gloo passes it, coll: {co.get(n, {}).get('status')} "
                            f"{co.get(n, {}).get('summary', '')[:300]} (not in {args.check})")
    for n, (kind, _) in sorted(gaps.items()):
        if co.get(n, {}).get("status") == "passed":
            problems.append(f"{n}: listed as {kind} in {args.check}, but coll passes it now")
        if kind == "forced-pass" and fo.get(n, {}).get("status") != "passed":
            problems.append(f"{n}: forced-pass, but run anyway on coll it is "
                            f"{fo.get(n, {}).get('status')}: {fo.get(n, {}).get('summary', '')[:300]}")
    for label, tests in runs.items():
        for n, v in sorted(tests.items()):
            if v["status"] == "timeout":
                problems.append(f"{n}: timed out on the {label} run")
    passed = {k: sum(1 for v in r.values() if v["status"] == "passed") for k, r in runs.items()}
    print(f"\nworld {args.world}: gloo passed {passed['gloo']}, coll passed {passed['coll']} "
          f"of {len(co)}; {sum(1 for k, _ in gaps.values() if k == 'forced-pass')} more pass on "
          f"coll when run anyway ({passed['forced']} passed); {len(gaps)} explained in {args.check}")
    for p_ in problems:
        print("PROBLEM " + p_)
    if not problems:
        import shutil
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if problems else 0


def main():
    p = argparse.ArgumentParser(
        description="Run PyTorch's DistributedTest suite on backend coll or gloo, or compare "
        "result files (--compare).")
    p.add_argument("--backend", choices=("coll", "gloo"), default="coll")
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--pattern", help="run only tests whose name matches this regex")
    p.add_argument("--skip-pattern", help="leave out tests whose name matches this regex")
    p.add_argument("--unskip", metavar="REGEX",
                   help="experiment: run the matching tests even where the suite skips "
                   "them statically (by backend name); results say so in meta.unskip")
    p.add_argument("--out", help="result file (default /tmp/torch_suite_BACKEND_wN.json)")
    p.add_argument("--log", help="worker and rank output (default: --out with .log)")
    p.add_argument("--timeout", type=int, default=150,
                   help="per-test limit in s given to the suite; the driver kills at +grace")
    p.add_argument("--grace", type=int, default=60)
    p.add_argument("--max-minutes", type=float, default=0, help="stop the run after this")
    p.add_argument("--start-method", choices=("spawn", "forkserver"), default="spawn",
                   help="how rank processes start: spawn (as PyTorch's CI) or forkserver "
                   "(a server that imported the suite once forks each rank: much faster)")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--torch-coll-path", default=DEFAULT_TORCH_COLL_PATH,
                   help="folder of the torch_coll module, in a build tree")
    p.add_argument("--no-snapshot", action="store_true",
                   help="load torch_coll from the build tree instead of a copy")
    p.add_argument("--compare", nargs="+", metavar="FILE.json",
                   help="print counts and the gloo-pass/other-fail tests of result files")
    p.add_argument("--check", metavar="GAPS.txt",
                   help="run gloo and coll and fail on a difference GAPS.txt does not explain")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--list", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--tests", help=argparse.SUPPRESS)
    p.add_argument("--events", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.compare:
        return _compare_main(args.compare)
    if args.check:
        return _check_main(args)
    if args.worker:
        return _worker_main(args)
    return _driver_main(args)


if __name__ == "__main__":
    sys.exit(main())
