#!/usr/bin/env python3
"""Recovery of examples/elastic_ddp.py from SIGKILLs, against a restart from a checkpoint.

Per rank count N (--ranks), two cells, each one long run with many kills:
  in place  collrun -n N --replace R elastic_ddp.py: the survivors agree, shrink, redo the
            step; replacements join later. The first victim is the starting rank 0, the
            others random (any rank); with probability --double a second rank is killed
            0.05-0.4 s after the first, during the recovery (from 3 ranks: one must keep
            the state).
  restart   torchrun --nproc-per-node N --max-restarts M elastic_ddp.py --store env
            --checkpoint F --checkpoint-every K: a kill makes torchrun's agent stop every
            worker and start them all again from the last checkpoint.
Per kill: `detect` = kill -> the example's FAILURE line (in place only); `resume` = kill ->
the next committed step (any step); `lost` = kill -> the step
that was next at the kill committed (the time the job is set back); `steps lost` = steps
committed again. A kill is made only when the job is whole again (N ranks) and has
committed a few steps since the last recovery. Every cell prints n, p50, p99, min-max.

usage: torch_kill.py [--quick] [--ranks 2,4,8] [--kills 20] [--restarts N] [--build build]
                     [--python PY]"""
import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(ROOT, "examples", "elastic_ddp.py")
STEP = re.compile(r"STEP (\d+) t=([\d.]+) world=(\d+)")
FAILURE = re.compile(r"FAILURE t=([\d.]+)")


class Run:
    """A launcher whose output is parsed as it comes: committed steps (step, t, world)."""

    def __init__(self, cmd, env):
        self.p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, start_new_session=True)
        self.steps = []
        self.failures = []  # when the example saw a failure (in place only)
        self.tail = []
        self.lock = threading.Lock()
        threading.Thread(target=self.read, daemon=True).start()

    def read(self):
        for raw in self.p.stdout:
            line = raw.decode("utf-8", "replace")
            m = STEP.search(line)
            with self.lock:
                if m:
                    self.steps.append((int(m.group(1)), float(m.group(2)), int(m.group(3))))
                f = FAILURE.search(line)
                if f:
                    self.failures.append(float(f.group(1)))
                self.tail = (self.tail + [line.rstrip()])[-30:]

    def snapshot(self):
        with self.lock:
            return list(self.steps)

    def wait_for(self, predicate, timeout):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.p.poll() is not None:
                return False
            if predicate(self.snapshot()):
                return True
            time.sleep(0.05)
        return False

    def workers(self):
        """The launcher's children (the rank processes), by pid."""
        kids = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/stat" % pid) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == self.p.pid:
                        kids.append(int(pid))
            except (OSError, IndexError, ValueError):
                pass
        return kids

    def stop(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGTERM)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.p.pid, signal.SIGKILL)
                self.p.wait()


def environ_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            return dict(x.split(b"=", 1) for x in f.read().split(b"\0") if b"=" in x)
    except OSError:
        return {}


def kill_trials(run, n, kills, rng, double, first_rank0, settle_steps, whole_timeout):
    """Kill, measure, wait until the job is whole again; returns one dict per kill. A kill
    comes settle_steps to 2 x settle_steps committed steps after the last recovery (so
    that it lands anywhere in a checkpoint period)."""
    results = []
    t_kill = 0.0
    for k in range(kills):
        since = t_kill
        settle = rng.randint(settle_steps, 2 * settle_steps)
        ok = run.wait_for(lambda s: s and s[-1][2] == n and
                          sum(1 for x in s if x[2] == n and x[1] > since) >= settle,
                          whole_timeout)
        if not ok:
            with run.lock:
                tail = "\n    ".join(run.tail[-10:])
            print("  (the job did not become whole again within %d s (launcher exit code %s); "
                  "stopping this cell; last output:\n    %s)" % (whole_timeout, run.p.poll(), tail),
                  flush=True)
            break
        before = run.snapshot()
        last = before[-1][0]
        kids = run.workers()
        if not kids:
            break
        victim = rng.choice(kids)
        if k == 0 and first_rank0:
            starters = [p for p in kids if environ_of(p).get(b"RANK") == b"0" and
                        b"COLL_ELASTIC_JOIN" not in environ_of(p)]
            victim = starters[0] if starters else victim
        t_kill = time.time()
        os.kill(victim, signal.SIGKILL)
        second = None
        if n >= 3 and rng.random() < double:  # never every rank: someone keeps the state
            time.sleep(rng.uniform(0.05, 0.4))
            others = [p for p in run.workers() if p != victim]
            if others:
                second = rng.choice(others)
                os.kill(second, signal.SIGKILL)
        # The last step committed before the kill, by the example's clock (a step may be
        # printed between the snapshot above and the kill).
        last = max([last] + [st for st, t, _ in run.snapshot() if t <= t_kill])
        if not run.wait_for(lambda s: any(t > t_kill and st > last for st, t, _ in s),
                            whole_timeout):
            with run.lock:
                tail = "\n    ".join(run.tail)
            print("  (no step committed within %d s of a kill; stopping this cell; last "
                  "output:\n    %s)" % (whole_timeout, tail), flush=True)
            break
        after = [x for x in run.snapshot() if x[1] > t_kill]
        resume = after[0][1] - t_kill
        lost = next(t for st, t, _ in after if st > last) - t_kill
        with run.lock:
            seen = [t - t_kill for t in run.failures if t > t_kill]
        result = {"double": second is not None, "resume": resume, "lost": lost,
                  "steps_lost": last + 1 - after[0][0]}
        if seen:
            result["detect"] = seen[0]
        results.append(result)
        print("  kill %d%s: %sresume %.2f s, lost %.2f s, %d steps lost" % (
            k + 1, " (+ a second kill during recovery)" if second else "",
            "failure seen %.2f s, " % seen[0] if seen else "", resume, lost,
            last + 1 - after[0][0]), flush=True)
    return results


def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100.0 * (len(v) - 1))))]


def summary(label, results):
    if not results:
        print("%-34s no kills measured" % label, flush=True)
        return
    for key, unit in (("detect", "s"), ("resume", "s"), ("lost", "s"), ("steps_lost", "steps")):
        v = [r[key] for r in results if key in r]
        if not v:
            continue
        print("%-34s %-10s n=%-3d p50 %7.2f  p99 %7.2f  spread %.2f-%.2f %s" % (
            label, key, len(v), percentile(v, 50), percentile(v, 99), min(v), max(v), unit),
            flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="3 ranks, 3 kills in place and 2 restarts (the plumbing, not figures)")
    p.add_argument("--ranks", default="2,4,8")
    p.add_argument("--kills", type=int, default=20, help="kills per cell (default 20)")
    p.add_argument("--double", type=float, default=0.25,
                   help="probability of a second kill during a recovery (default 0.25)")
    p.add_argument("--step-delay", type=float, default=0.05,
                   help="simulated compute per step, seconds (default 0.05)")
    p.add_argument("--checkpoint-every", type=int, default=20)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--restarts", type=int, default=0,
                   help="kills per restart cell (default: half of --kills, at least 3): each "
                        "restarts every rank, so they cost far more time than in-place kills")
    p.add_argument("--no-restart", action="store_true",
                   help="only the in-place cells (no torchrun reference)")
    p.add_argument("--store", default="env", choices=("file", "tcp", "env"),
                   help="the in-place cells' store: collrun's own (env://, the default), a "
                        "FileStore (at 8 ranks its re-reads made recoveries 2-3x slower), or "
                        "a TCPStore this script hosts")
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--python", default=os.path.expanduser(
        "~/.cache/libcoll/venv-torch-2.15.0-py3.11/bin/python"))
    a = p.parse_args()
    if a.quick:
        a.ranks, a.kills = "3", 3
    try:
        ranks = [int(x) for x in a.ranks.split(",")]
    except ValueError:
        p.error("--ranks: comma-separated rank counts, e.g. 2,4,8")
    if any(n < 2 for n in ranks) or a.kills < 1:
        p.error("--ranks must be 2 or more and --kills at least 1")
    collrun = os.path.join(a.build, "tools", "collrun")
    module = os.path.join(a.build, "torch_coll", "torch2")
    for path in (collrun, module, a.python):
        if not os.path.exists(path):
            p.error("%s is missing: build torch_coll for PyTorch 2.x (--build, --python)" % path)
    rng = random.Random(a.seed)
    env = dict(os.environ, PYTHONPATH=module, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1",
               TORCH_INCLUDE_STACK_TRACE="0")
    common = ["--steps", "1000000", "--step-delay", str(a.step_delay), "--shards", "48",
              "--shard-size", "2"]
    folder = tempfile.mkdtemp(prefix="torch_kill_")
    cells = []
    bad = 0
    for n in ranks:
        label = "in place, %d ranks" % n
        print("%s: collrun -n %d --replace, %d kills" % (label, n, a.kills), flush=True)
        if a.store == "tcp":  # hosted here: no rank
            import datetime
            import torch.distributed as dist
            host = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                                 timeout=datetime.timedelta(seconds=60))
            store = "tcp:127.0.0.1:%d" % host.port
        elif a.store == "env":  # collrun's store, through torch_coll's env:// handler
            store = "env"
        else:
            store = "file:" + os.path.join(folder, "store_%d" % n)
        run = Run([collrun, "-n", str(n), "--replace", str(3 * a.kills), a.python, EXAMPLE,
                   "--store", store] + common, env)
        try:
            results = kill_trials(run, n, a.kills, rng, a.double, True, 5, 120)
        finally:
            run.stop()
        cells.append((label, results))
        bad += len(results) < a.kills

        if a.no_restart:
            continue
        label = "restart from checkpoint, %d ranks" % n
        restarts = 2 if a.quick else (a.restarts if a.restarts > 0 else max(3, a.kills // 2))
        print("%s: torchrun --nproc-per-node %d, checkpoint every %d steps, %d kills" % (
            label, n, a.checkpoint_every, restarts), flush=True)
        checkpoint = os.path.join(folder, "checkpoint_%d.pt" % n)
        run = Run([a.python, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1",
                   "--nproc-per-node", str(n), "--max-restarts", str(restarts + 1), EXAMPLE,
                   "--store", "env", "--checkpoint", checkpoint, "--checkpoint-every",
                   str(a.checkpoint_every)] + common, env)
        try:
            results = kill_trials(run, n, restarts, rng, 0.0, False, a.checkpoint_every, 180)
        finally:
            run.stop()
        cells.append((label, results))
        bad += len(results) < restarts
    print("\nstep delay %.3f s, seed %d; kill -> next committed step (resume), kill -> the "
          "step due at the kill committed (lost), steps committed again:" % (a.step_delay,
                                                                             a.seed))
    for label, results in cells:
        summary(label, results)
        doubles = [r for r in results if r["double"]]
        if doubles:
            summary(label + " (2 kills)", doubles)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
