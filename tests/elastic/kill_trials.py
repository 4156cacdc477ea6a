#!/usr/bin/python3
"""Kill trials for elastic jobs: run `collrun --elastic [--replace K] -n N PROG`, where PROG
is `train --elastic` (a small MLP on a subset of Fashion-MNIST, --bit-identical) or
elastic_worker (tests/elastic, coll.h alone), kill ranks at random moments or at chosen
points of libcoll (COLL_TEST_KILL_AT, libcoll/src/common/test_hook.h), and check each
trial: the job ends before its deadline with exit 0 (every survivor exits 0), only the
processes the trial killed died, the sample log shows each sample used exactly once, and
the final parameters equal the failure-free run's bit for bit. Also times each recovery
(detect, agree, shrink, resume, grow with state transfer) and, with --restart-compare, the
usual recovery: the whole job restarted from its last checkpoint.

Standard library only. `--ci` runs the short seeded set ./dev test runs;
bench/elastic/elastic_kill.sh runs the 200 trials."""
import argparse
import gzip
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time

FASHION = "/usr/share/datasets/fashion-mnist"
EV_RE = re.compile(r"^\[(\d+)\] EV (\d+\.\d+) (\d+) (\w+)(.*)$")
HOOK_RE = re.compile(r"COLL_TEST_KILL_AT: rank (\S+) pid (\d+) raises SIG(\w+) at (\w+) #(\d+) t=([\d.]+)")
DEATH_RE = re.compile(r"^collrun: rank (\d+) \(pid (\d+)\) (.*); the job goes on")
TRAIN_RESUME_RE = re.compile(r"elastic: step (\d+) committed on (\d+) ranks ([\d.]+) ms after the failure "
                             r"was seen \(rank\(s\) (\S+) lost; agree ([\d.]+) ms, shrink ([\d.]+) ms\) "
                             r"at unix time ([\d.]+)")
TRAIN_TOOKIN_RE = re.compile(r"took in (\d+) replacement\(s\) at step (\d+): (\d+) -> (\d+) ranks; "
                             r"stall ([\d.]+) ms \(grow ([\d.]+), state ([\d.]+)\)")
TRAIN_REPL_FIRST_RE = re.compile(r"replacement \(rank \d+ of \d+\) committed its first step")
TRAIN_DONE_RE = re.compile(r"^\[(\d+)\] elastic: rank \d+ of \d+ done at step (\d+), params hash (\w+)")


# ---- a small data set, so that a rank starts in a fraction of a second ----

def make_subset(dst, train_n, test_n):
    """The first train_n / test_n samples of Fashion-MNIST as plain IDX files."""
    os.makedirs(dst, exist_ok=True)
    for kind, n in (("train", train_n), ("t10k", test_n)):
        with gzip.open(os.path.join(FASHION, kind + "-images-idx3-ubyte.gz"), "rb") as f:
            magic, count, rows, cols = struct.unpack(">IIII", f.read(16))
            data = f.read(n * rows * cols)
        with open(os.path.join(dst, kind + "-images-idx3-ubyte"), "wb") as f:
            f.write(struct.pack(">IIII", magic, n, rows, cols) + data)
        with gzip.open(os.path.join(FASHION, kind + "-labels-idx1-ubyte.gz"), "rb") as f:
            magic, count = struct.unpack(">II", f.read(8))
            data = f.read(n)
        with open(os.path.join(dst, kind + "-labels-idx1-ubyte"), "wb") as f:
            f.write(struct.pack(">II", magic, n) + data)
    return dst


# ---- one collrun, its output timestamped line by line ----

class Job:
    def __init__(self, argv, env, cwd):
        self.lines = []  # (arrival time, stream, text)
        self.lock = threading.Lock()
        self.start = time.time()
        self.proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.readers = [threading.Thread(target=self._read, args=(s, name), daemon=True)
                        for s, name in ((self.proc.stdout, "out"), (self.proc.stderr, "err"))]
        for t in self.readers:
            t.start()

    def _read(self, stream, name):
        for raw in iter(stream.readline, b""):
            with self.lock:
                self.lines.append((time.time(), name, raw.decode(errors="replace").rstrip("\n")))

    def snapshot(self):
        with self.lock:
            return list(self.lines)

    def wait_for(self, pattern, count=1, timeout=30.0, after=0.0):
        """Time of the count-th line matching pattern (arriving after `after`), or None."""
        rx = re.compile(pattern)
        deadline = time.time() + timeout
        while True:
            ended = self.proc.poll() is not None
            hits = [t for t, _, text in self.snapshot() if t >= after and rx.search(text)]
            if len(hits) >= count:
                return hits[count - 1]
            if ended or time.time() >= deadline:
                return None
            time.sleep(0.005)

    def ranks(self):
        """{pid: (RANK, replacement)} of collrun's running children, from /proc."""
        out = {}
        try:
            kids = set()
            for tid in os.listdir("/proc/%d/task" % self.proc.pid):
                with open("/proc/%d/task/%s/children" % (self.proc.pid, tid)) as f:
                    kids.update(int(p) for p in f.read().split())
        except OSError:
            return out
        for pid in kids:
            try:
                with open("/proc/%d/environ" % pid, "rb") as f:
                    env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
                with open("/proc/%d/stat" % pid) as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        continue
            except OSError:
                continue
            if b"RANK" in env:
                out[pid] = (int(env[b"RANK"]), env.get(b"COLL_ELASTIC_JOIN") == b"1")
        return out

    def pid_of(self, rank, replacement=False):
        for pid, (r, rep) in self.ranks().items():
            if r == rank and rep == replacement:
                return pid
        return None

    def finish(self, timeout):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = None
        for t in self.readers:
            t.join(timeout=5)
        self.end = time.time()
        return rc


# ---- the programs under test ----

class Worker:
    name = "worker"
    collectives = ("all_reduce",)  # the step's collectives (COLL_TEST_KILL_AT points), one call each
    step_re = r"EV \S+ \d+ commit step=%d "
    restart_progress = r"EV \S+ \d+ commit step=%d "
    restart_any = r"EV \S+ \d+ commit step=(\d+) "
    restart_offset = 1  # "commit step=s": s + 1 steps done
    restart_resumed = r"resumed step=(\d+)"

    def __init__(self, path, steps=40, step_ms=15):
        self.path, self.steps, self.step_ms = path, steps, step_ms

    def argv(self, n, work, extra=()):
        return [self.path, "--steps", str(self.steps), "--batch", "64", "--dim", "8192",
                "--step-ms", str(self.step_ms), "--sample-log", os.path.join(work, "samples"),
                "--out", os.path.join(work, "params.bin")] + list(extra)

    def result(self, job, work):
        path = os.path.join(work, "params.bin")
        return open(path, "rb").read() if os.path.exists(path) else None

    def check_samples(self, work):
        path = os.path.join(work, "samples")
        used, committed = {}, set()
        for line in open(path):
            f = line.split()
            if f[0] == "C":
                committed.add((int(f[1]), int(f[2])))
        count = {}
        for line in open(path):
            f = line.split()
            if f[0] != "U" or (int(f[1]), int(f[2])) not in committed:
                continue
            first, stride, k = int(f[5]), int(f[6]), int(f[7])
            for i in range(k):
                count[first + i * stride] = count.get(first + i * stride, 0) + 1
        want = self.steps * 64
        bad = [s for s in range(want) if count.get(s, 0) != 1]
        if bad:
            return "sample %d used %d times (%d samples wrong)" % (bad[0], count.get(bad[0], 0), len(bad))
        return None

    def phases(self, job, kill_t):
        """Per-phase times in ms for one failure at kill_t (None where not seen)."""
        ev = {}
        for t, _, text in job.snapshot():
            m = EV_RE.match(text)
            if m and float(m.group(2)) >= kill_t:
                ev.setdefault(m.group(4), []).append((float(m.group(2)), int(m.group(3))))
        first = lambda name: min((t for t, _ in ev.get(name, [])), default=None)
        last_per_pid = lambda name: max((min(t for t, p in ev[name] if p == pid) for pid in {p for _, p in ev[name]}),
                                        default=None) if name in ev else None
        detect = min([x for x in (first("detect"), first("agreed")) if x is not None], default=None)
        agreed, shrunk = last_per_pid("agreed"), last_per_pid("shrunk")
        resume = None
        if shrunk is not None:
            resume = min((t for t, _ in ev.get("commit", []) if t >= shrunk), default=None)
        ms = lambda a, b: None if a is None or b is None else (a - b) * 1e3
        out = {"detect": ms(detect, kill_t), "agree": ms(agreed, detect), "shrink": ms(shrunk, agreed),
               "resume": ms(resume, kill_t)}
        starts = {p: t for t, p in ev.get("start", [])}
        joined = [(t, p) for t, p in ev.get("state_received", []) if p in starts]
        if joined:
            t, p = joined[0]
            out["grow"] = ms(t, starts[p])
            trained = min((t2 for t2, p2 in ev.get("commit", []) if p2 == p), default=None)
            out["replacement_trains"] = ms(trained, kill_t)
        return out

    def restart_argv(self, n, work):
        return self.argv(n, work, ["--checkpoint", os.path.join(work, "ckpt"), "--checkpoint-every", "10",
                                   "--resume"])


class Train:
    name = "train"
    # --bit-identical: all-reduce MAX of the largest |gradient|, reduce-scatter of the int64
    # fixed-point rows, all-gather of the summed floats
    collectives = ("all_reduce", "reduce_scatter", "all_gather")
    step_re = r"^\[\d+\] step %d \(epoch"
    restart_progress = r"\(global %d\)"
    restart_any = r"\(global (\d+)\)"
    restart_offset = 0
    restart_resumed = r"resumed from \S+: epoch \d+, step (\d+)"

    def __init__(self, path, data, steps=48, timeout_ms=3000):
        self.path, self.data, self.steps, self.timeout_ms = path, data, steps, timeout_ms

    def argv(self, n, work, extra=()):
        return [self.path, "--elastic", "--bit-identical", "--data", self.data, "--epochs", "1000", "--hidden", "32",
                "--batch", "16", "--shards", "8", "--max-steps", str(self.steps), "--no-eval",
                "--log-every", "1", "--elastic-timeout-ms", str(self.timeout_ms),
                "--sample-log", os.path.join(work, "samples")] + list(extra)

    def result(self, job, work):
        hashes = {m.group(3) for _, _, text in job.snapshot() for m in [TRAIN_DONE_RE.match(text)] if m}
        return hashes.pop() if len(hashes) == 1 else (None if not hashes else "differ:" + ",".join(sorted(hashes)))

    def check_samples(self, work):
        steps = {}
        for name in os.listdir(work):
            if not name.startswith("samples."):
                continue
            for line in open(os.path.join(work, name)):
                head, _, ids = line.partition(":")
                f = head.split()
                ids = ids.split()
                if not ids or ids[-1] != "end":
                    return "a cut line in %s" % name
                key, val = int(f[1]), (int(f[3]), tuple(ids[:-1]))
                if steps.setdefault(key, val) != val:
                    return "step %d logged differently by two processes" % key
        if sorted(steps) != list(range(self.steps)):
            missing = sorted(set(range(self.steps)) - set(steps))
            return "steps missing from the sample log: %s" % missing[:5]
        per_epoch = {}
        for step, (epoch, ids) in steps.items():
            per_epoch.setdefault(epoch, []).extend(ids)
        for epoch, ids in per_epoch.items():
            if len(ids) != len(set(ids)):
                return "epoch %d: a sample used twice" % epoch
        return None

    def phases(self, job, kill_t):
        out = {}
        for t, _, text in job.snapshot():
            m = TRAIN_RESUME_RE.search(text)
            if m and "resume" not in out and float(m.group(7)) >= kill_t - 0.01:
                commit_t = float(m.group(7))
                out["resume"] = (commit_t - kill_t) * 1e3
                # (unix time printed to the ms: a detection within 1 ms may read as -0.x)
                out["detect"] = max(0.0, (commit_t - float(m.group(3)) / 1e3 - kill_t) * 1e3)
                out["agree"], out["shrink"] = float(m.group(5)), float(m.group(6))
            m = TRAIN_TOOKIN_RE.search(text)
            if m and "grow" not in out:
                out["grow"] = float(m.group(5))
            if TRAIN_REPL_FIRST_RE.search(text) and "replacement_trains" not in out:
                out["replacement_trains"] = (t - kill_t) * 1e3
        return out

    def restart_argv(self, n, work):
        return [
            self.path, "--data", self.data, "--epochs", "1000", "--hidden", "32", "--batch", str(128 // n), "--max-steps", str(self.steps),
            "--no-eval", "--log-every", "1", "--checkpoint", os.path.join(work, "ckpt"),
            "--checkpoint-every", "10", "--resume"]


# ---- trials ----

class Trial:
    def __init__(self, h, n, scenario, seed):
        self.h, self.n, self.scenario, self.seed = h, n, scenario, seed
        self.rng = random.Random(seed)
        self.killed, self.notes, self.problems = set(), [], []
        self.kill_t = None

    def env(self, kill_at=None):
        env = dict(os.environ)
        env.pop("COLL_TEST_KILL_AT", None)
        # train's calls after its start use --elastic-timeout-ms; COLL_TIMEOUT_MS is then only
        # its first rendezvous, which on a loaded 2-core host can take longer than 3 s.
        env["COLL_TIMEOUT_MS"] = str(self.h.args.timeout_ms if self.h.prog.name == "worker" else 20000)
        if kill_at:
            env["COLL_TEST_KILL_AT"] = kill_at
        return env

    def collrun(self, replace, work):
        argv = [self.h.args.collrun, "--elastic", "--timeout", str(self.h.args.deadline), "-n", str(self.n)]
        if replace:
            # The delay lets the survivors see the death and shrink before the replacement
            # registers: a joiner counted by an agreement the dead rank still took part in
            # would be grown into a communicator with that dead member, and the grow waits
            # out the communicator's timeout (reported in docs/elastic.md).
            argv += ["--replace", str(replace), "--replace-delay-ms", str(self.h.args.replace_delay_ms)]
        return argv + self.h.prog.argv(self.n, work)

    def kill(self, job, rank, sig=signal.SIGKILL, replacement=False):
        pid = job.pid_of(rank, replacement)
        if pid is None:
            self.problems.append("rank %d was not running when the trial meant to kill it" % rank)
            return None
        t = time.time()
        os.kill(pid, sig)
        self.killed.add(pid)
        if self.kill_t is None:
            self.kill_t = t
        return pid

    def random_moment(self, job):
        """A random step of the run's first quarter, then a random fraction of a step."""
        step = self.rng.randint(3, max(4, self.h.prog.steps // 4))
        job.wait_for(self.h.prog.step_re % step, timeout=self.h.args.deadline)
        time.sleep(self.rng.uniform(0.0, 0.005))

    def run(self):
        work = tempfile.mkdtemp(prefix="elastic-trial-", dir=self.h.tmp)
        sc, n, rng = self.scenario, self.n, self.rng
        replace, kill_at = 0, None
        victim = rng.randrange(n)
        other = rng.choice([r for r in range(n) if r != victim]) if n > 1 else victim
        k = rng.randint(3, max(3, self.h.prog.steps // 3))
        if sc in ("replace", "grow_kill", "state_kill"):
            replace = 2 if sc == "state_kill" else 1
        if sc == "allreduce_hook":  # on entry to one of step k + 1's collectives
            points = self.h.prog.collectives
            kill_at = "%s:%d@%d" % (points[(k + 1) % len(points)], k + 2, victim)
        elif sc == "agree_hook":
            kill_at = "agree:%d@%d" % (k, victim)
        elif sc == "shrink_hook":
            kill_at = "agree:%d@%d,shrink:1@%d" % (k, victim, other)
        elif sc == "grow_kill":
            kill_at = "agree:%d@%d,grow:1@%d" % (k, victim, other)
        elif sc == "state_kill":
            kill_at = "agree:%d@%d,joined:1@j%d" % (k, victim, victim)
        env = self.env(kill_at)
        if sc == "replace" and n == 2 and self.h.prog.name == "train":
            # A sole survivor runs its remaining steps in a fraction of a second, before a
            # replacement could start: it waits for one after the kill window (train's hook).
            env["TRAIN_TEST_AWAIT_JOIN"] = str(self.h.prog.steps // 4 + 20)
        job = Job(self.collrun(replace, work), env, work)
        if sc in ("random", "rank0", "last_but_one", "two", "replace"):
            self.random_moment(job)
            target = {"rank0": 0, "last_but_one": max(n - 2, 0)}.get(sc, victim)
            self.kill(job, target)
            if sc == "two":
                self.kill(job, other)
        elif sc == "stop":
            self.random_moment(job)
            pid = self.kill(job, victim, signal.SIGSTOP)
            # Declared failed once the survivors' deadline passed: they go on without it.
            seen = job.wait_for(r"EV \S+ \d+ shrunk|committed on \d+ ranks", timeout=self.h.args.deadline,
                                after=self.kill_t or 0)
            if pid is not None:
                os.kill(pid, signal.SIGCONT if rng.random() < 0.5 else signal.SIGKILL)
                self.notes.append("survivors went on %.0f ms after the stop" % ((seen - self.kill_t) * 1e3)
                                  if seen else "survivors never went on")
        rc = job.finish(self.h.args.deadline + 15)
        return self.judge(job, rc, work, sc)

    def judge(self, job, rc, work, sc):
        lines = job.snapshot()
        for _, _, text in lines:
            m = HOOK_RE.search(text)
            if m:
                self.killed.add(int(m.group(2)))
                if self.kill_t is None:
                    self.kill_t = float(m.group(6))
        problems = list(self.problems)
        if not self.killed:
            problems.append("nothing was killed (the hook's point never came)")
        if rc is None:
            problems.append("collrun did not end by the deadline")
        elif rc != 0:
            problems.append("collrun exited %d" % rc)
        replacements = {int(m.group(1)) for _, _, text in lines
                        for m in [re.search(r"started a replacement for rank \d+ \(pid (\d+)", text)] if m}
        for _, stream, text in lines:
            m = DEATH_RE.match(text)
            if not m:
                continue
            pid = int(m.group(2))
            if pid in self.killed:
                continue
            # A joiner taken into a grow that lost a member fails with it.
            if pid in replacements and sc in ("grow_kill", "state_kill"):
                self.notes.append("replacement pid %d: %s" % (pid, m.group(3)))
                continue
            problems.append("rank %s (pid %d) died unasked: %s" % (m.group(1), pid, m.group(3)))
        why = self.h.prog.check_samples(work) if rc == 0 else None
        if why:
            problems.append(why)
        result = self.h.prog.result(job, work) if rc == 0 else None
        ref = self.h.reference(self.n)
        if rc == 0 and result != ref:
            problems.append("final parameters differ from the failure-free run's (%s vs %s)" %
                            (str(result)[:40], str(ref)[:40]))
        phases = self.h.prog.phases(job, self.kill_t) if self.kill_t else {}
        if sc == "replace" and rc == 0 and phases.get("replacement_trains") is None:
            problems.append("the replacement never trained")
        record = {"n": self.n, "scenario": sc, "seed": self.seed, "ok": not problems, "problems": problems,
                  "wall_s": round(job.end - job.start, 2), "phases_ms": {k: round(v, 1) for k, v in phases.items()
                                                                         if v is not None},
                  "notes": self.notes}
        if problems:  # what collrun and the ranks said last, to tell a failure's story
            record["stderr_tail"] = [text[:300] for _, stream, text in lines if stream == "err"][-12:]
        if problems and self.h.args.keep_failed:
            dump = os.path.join(work, "output.txt")
            with open(dump, "w") as f:
                f.writelines("%.6f %s %s\n" % x for x in lines)
            record["output"] = dump
        else:
            shutil.rmtree(work, ignore_errors=True)
        return record


def snapshot_binaries(args, dst):
    """Copies of collrun, the programs and libcoll, laid out as in the build folder (their
    RUNPATH is relative), so that a rebuild of the shared checkout during the trials does
    not replace a program under a starting replacement."""
    build = os.path.dirname(os.path.dirname(os.path.abspath(args.collrun)))
    libdir = os.path.join(build, "libcoll")
    for name in os.listdir(libdir):
        if name.startswith("libcoll.so") and not name.endswith(".p"):
            os.makedirs(os.path.join(dst, "libcoll"), exist_ok=True)
            shutil.copy2(os.path.join(libdir, name), os.path.join(dst, "libcoll", name), follow_symlinks=True)
    for attr in ("collrun", "worker", "train"):
        path = getattr(args, attr)
        if path is None:
            continue
        rel = os.path.relpath(os.path.abspath(path), build)
        if rel.startswith(".."):
            continue
        os.makedirs(os.path.dirname(os.path.join(dst, rel)), exist_ok=True)
        shutil.copy2(path, os.path.join(dst, rel))
        setattr(args, attr, os.path.join(dst, rel))


class Harness:
    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="elastic-kill-")
        snapshot_binaries(args, os.path.join(self.tmp, "build"))
        if args.program == "train":
            data = make_subset(os.path.join(self.tmp, "data"), args.train_samples, 256)
            self.prog = Train(args.train, data, steps=args.steps or 400, timeout_ms=args.timeout_ms)
        else:
            self.prog = Worker(args.worker, steps=args.steps or 60)
        self.refs = {}

    def reference(self, n):
        if n not in self.refs:
            work = tempfile.mkdtemp(dir=self.tmp)
            argv = [self.args.collrun, "--timeout", str(self.args.deadline), "-n", str(n)] + self.prog.argv(n, work)
            job = Job(argv, job_env(self), work)
            rc = job.finish(self.args.deadline + 15)
            self.refs[n] = self.prog.result(job, work) if rc == 0 else "reference run failed (%s)" % rc
            if rc != 0:
                sys.stderr.write("".join(t + "\n" for _, _, t in job.snapshot()[-20:]))
            shutil.rmtree(work, ignore_errors=True)
        return self.refs[n]


# ---- the store's host dies ----

def store_dies(args, tmp):
    """Two collruns as two nodes of one job; node 0's (it hosts the store) is SIGKILLed. Each
    rank of node 1 must fail with an error naming the store within its deadline."""
    # A port the kernel just gave out and nobody holds: a random one could be taken by a
    # test running beside this one, and node 0's store would not start.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    work = tempfile.mkdtemp(dir=tmp)
    worker = Worker(args.worker, steps=100000, step_ms=10)
    common = ["--elastic", "--nnodes", "2", "--master-port", str(port), "--token", "t%d" % port,
              "--timeout", str(args.deadline)]
    env = dict(os.environ, COLL_TIMEOUT_MS="5000")
    node0 = Job([args.collrun, "-n", "2", "--node-rank", "0"] + common + worker.argv(1, work), env, work)
    node1 = Job([args.collrun, "-n", "2", "--node-rank", "1"] + common + worker.argv(1, work), env, work)
    ok = node1.wait_for(r"commit step=5 ", count=2, timeout=30)
    problems = [] if ok else ["node 1 never trained; node 0 said: %s; node 1 said: %s" % (
        " | ".join(t for _, _, t in node0.snapshot()[-5:]),
        " | ".join(t for _, _, t in node1.snapshot()[-5:]))]
    kill_t = time.time()
    node0.proc.kill()
    rc1 = node1.finish(30)
    node0.finish(5)
    took = node1.end - kill_t
    errors = [t for _, s, t in node1.snapshot() if "elastic_worker" in t and "store" in t]
    if rc1 is None:
        problems.append("node 1's collrun still running 30 s after the store died")
    elif rc1 == 0:
        problems.append("node 1's collrun exited 0 without the store")
    if len(errors) < 2:
        problems.append("%d of node 1's 2 ranks named the store in their error" % len(errors))
    shutil.rmtree(work, ignore_errors=True)
    return {"n": 4, "scenario": "store_dies", "seed": 0, "ok": not problems, "problems": problems,
            "wall_s": round(took, 2), "phases_ms": {"all_ranks_failed": round(took * 1e3, 1)},
            "notes": errors[:1]}


# ---- the usual recovery: restart everything from the last checkpoint ----

def restart_trial(h, n, seed):
    """Kill a random rank of a plain (non-elastic) job at a random step, restart the whole
    job with --resume from its last checkpoint (every 10 steps), and time kill -> the
    first step after the restart."""
    rng = random.Random(seed)
    prog = h.prog
    work = tempfile.mkdtemp(dir=h.tmp)
    argv = [h.args.collrun, "--timeout", str(h.args.deadline), "-n", str(n)] + prog.restart_argv(n, work)
    job = Job(argv, job_env(h), work)
    target = rng.randint(prog.steps // 4, prog.steps // 2)
    job.wait_for(prog.restart_progress % target, timeout=h.args.deadline)
    time.sleep(rng.uniform(0.0, 0.005))
    pids = list(job.ranks())
    kill_t = time.time()
    if pids:
        os.kill(rng.choice(pids), signal.SIGKILL)
    job.finish(h.args.deadline)
    done = max([int(m.group(1)) + prog.restart_offset for _, _, text in job.snapshot()
                for m in [re.search(prog.restart_any, text)] if m] or [0])
    again = Job(argv, job_env(h), work)
    t_back = again.wait_for(prog.restart_any, timeout=h.args.deadline)
    rc = again.finish(h.args.deadline)
    resumed = None
    for _, _, text in again.snapshot():
        m = re.search(prog.restart_resumed, text)
        if m:
            resumed = int(m.group(1))
            break
    lost = None if resumed is None else done - resumed
    shutil.rmtree(work, ignore_errors=True)
    problems = [] if t_back and rc == 0 else ["the restarted job did not train to its end (rc %s)" % rc]
    return {"n": n, "scenario": "restart_from_checkpoint", "seed": seed, "ok": not problems,
            "problems": problems, "wall_s": round(again.end - job.start, 2),
            "phases_ms": {"resume": round((t_back - kill_t) * 1e3, 1) if t_back else None},
            "notes": ["killed after %d steps, restarted from step %s" % (done, resumed)],
            "steps_lost": lost}


# ---- two hosts made of network namespaces (as tests/cluster/netns.sh makes them) ----

class Both:
    """The lines of several collruns, as one job's."""

    def __init__(self, jobs):
        self.jobs = jobs
        self.start = min(j.start for j in jobs)
        self.end = max(j.end for j in jobs)

    def snapshot(self):
        return sorted(line for j in self.jobs for line in j.snapshot())


def netns_trials(h, count, seed):
    """N ranks over two namespaces (N/2 each, tcp between them over a veth pair); a random
    rank of either host SIGKILLed at a random step; the same checks as on one host."""
    if os.getuid() != 0 or shutil.which("ip") is None:
        return [{"n": 4, "scenario": "netns_kill", "seed": seed, "ok": True, "problems": [],
                 "wall_s": 0, "phases_ms": {}, "notes": ["skipped: needs root and ip"]}]
    tag = str(os.getpid())
    ns, addr = ["ekh1-" + tag, "ekh2-" + tag], ["10.98.0.1", "10.98.0.2"]
    ip = lambda *a: subprocess.run(["ip"] + list(a), check=True, capture_output=True)
    records = []
    try:
        ip("netns", "add", ns[0])
        ip("netns", "add", ns[1])
        ip("link", "add", "ek1-" + tag, "netns", ns[0], "type", "veth", "peer", "name", "ek2-" + tag, "netns", ns[1])
        for i in (0, 1):
            ip("-n", ns[i], "addr", "add", addr[i] + "/24", "dev", "ek%d-%s" % (i + 1, tag))
            ip("-n", ns[i], "link", "set", "lo", "up")
            ip("-n", ns[i], "link", "set", "ek%d-%s" % (i + 1, tag), "up")
        time.sleep(0.5)
        rng = random.Random(seed)
        for t in range(count):
            records.append(netns_trial(h, ns, addr, rng, seed * 100 + t))
            print(json.dumps(records[-1]), flush=True)
    finally:
        for n in ns:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
    return records


def netns_trial(h, ns, addr, rng, seed):
    prog, n = h.prog, 4
    work = tempfile.mkdtemp(dir=h.tmp)
    port = str(20000 + rng.randrange(20000))
    jobs = []
    for k in (0, 1):
        argv = ["ip", "netns", "exec", ns[k], h.args.collrun, "--elastic", "-n", "2", "--nnodes", "2",
                "--node-rank", str(k), "--master-addr", addr[0], "--master-port", port, "--token", "t" + port,
                "--timeout", str(h.args.deadline)] + prog.argv(n, work)
        jobs.append(Job(argv, job_env(h), work))
    step = rng.randint(3, max(4, prog.steps // 4))
    jobs[0].wait_for(prog.step_re % step, timeout=h.args.deadline)
    victim_job = jobs[rng.randrange(2)]
    pids = list(victim_job.ranks())
    kill_t, killed = time.time(), None
    if pids:
        killed = rng.choice(pids)
        os.kill(killed, signal.SIGKILL)
    rcs = [j.finish(h.args.deadline + 15) for j in jobs]
    both = Both(jobs)
    problems = [] if killed else ["nobody to kill"]
    if rcs != [0, 0]:
        problems.append("collruns exited %s" % rcs)
    why = prog.check_samples(work) if rcs == [0, 0] else None
    if why:
        problems.append(why)
    result, ref = prog.result(both, work), h.reference(n)
    if rcs == [0, 0] and result != ref:
        problems.append("final parameters differ from the failure-free run's (%s vs %s)" % (result, ref))
    phases = prog.phases(both, kill_t)
    shutil.rmtree(work, ignore_errors=True)
    return {"n": n, "scenario": "netns_kill", "seed": seed, "ok": not problems, "problems": problems,
            "wall_s": round(both.end - both.start, 2),
            "phases_ms": {k: round(v, 1) for k, v in phases.items() if v is not None},
            "notes": ["killed a rank on host %d" % jobs.index(victim_job)]}


def job_env(h):
    timeout = h.args.timeout_ms if h.prog.name == "worker" else 20000  # see Trial.env
    return dict(os.environ, COLL_TIMEOUT_MS=str(timeout))


# ---- reporting ----

def percentile(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q / 100.0 * (len(v) - 1))))]


# Scenarios grouped by what bounds their recovery: a SIGKILL is seen at once (dead
# connections, liveness keys); a stopped rank only at the deadline; a second death inside
# a shrink or grow makes its rendezvous wait out the communicator's timeout.
GROUPS = {"random": "kill", "rank0": "kill", "last_but_one": "kill", "two": "kill",
          "allreduce_hook": "kill", "agree_hook": "kill", "replace": "kill",
          "stop": "stop", "shrink_hook": "kill+shrink", "grow_kill": "kill+grow",
          "state_kill": "kill+state", "restart_from_checkpoint": "restart", "store_dies": "store",
          "netns_kill": "2hosts-kill"}


def summarize(records):
    print("\nsummary: %d trials, %d passed, %d failed" % (len(records), sum(r["ok"] for r in records),
                                                        sum(not r["ok"] for r in records)))
    groups = {}
    for r in records:
        for phase, v in r["phases_ms"].items():
            if v is not None:
                key = (r["n"], GROUPS.get(r["scenario"], r["scenario"]), phase)
                groups.setdefault(key, []).append(v)
    print("%-4s %-12s %-20s %6s %9s %9s" % ("n", "kind", "phase (ms)", "count", "p50", "p99"))
    for (n, kind, phase), vals in sorted(groups.items()):
        print("%-4d %-12s %-20s %6d %9.1f %9.1f" % (n, kind, phase, len(vals), percentile(vals, 50),
                                                    percentile(vals, 99)))
    by_scenario = {}
    for r in records:
        ok, bad = by_scenario.get(r["scenario"], (0, 0))
        by_scenario[r["scenario"]] = (ok + r["ok"], bad + (not r["ok"]))
    print("per scenario (passed/failed): " +
          ", ".join("%s %d/%d" % (k, v[0], v[1]) for k, v in sorted(by_scenario.items())))
    lost = [r["steps_lost"] for r in records if r.get("steps_lost") is not None]
    if lost:
        print("restart from checkpoint: steps lost p50 %s, max %s" % (percentile(lost, 50), max(lost)))


# The last two kill a rank on entry to a step's collective: with train --bit-identical,
# seed 50 (k = 8) on entry to the all-reduce MAX, seed 51 (k = 6) to the reduce-scatter.
CI_PLAN = [(3, "random"), (3, "agree_hook"), (4, "shrink_hook"), (3, "replace"), (3, "stop"),
           (3, "state_kill"), (3, "allreduce_hook"), (3, "allreduce_hook")]
SCENARIOS = ["random", "rank0", "last_but_one", "two", "allreduce_hook", "agree_hook", "shrink_hook",
             "stop", "replace", "grow_kill", "state_kill"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--collrun", required=True)
    p.add_argument("--worker", required=True, help="elastic_worker (also used for the store test)")
    p.add_argument("--train", help="train; with it the trials run train --elastic")
    p.add_argument("--program", choices=["train", "worker"])
    p.add_argument("--ci", action="store_true", help="the short seeded set of ./dev test")
    p.add_argument("--trials", type=int, default=0, help="random trials (seeded)")
    p.add_argument("--ranks", default="2,4,8")
    p.add_argument("--scenarios", default=",".join(SCENARIOS))
    p.add_argument("--seed", type=int, default=44)
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--train-samples", type=int, default=2048)
    p.add_argument("--timeout-ms", type=int, default=3000, help="COLL_TIMEOUT_MS / --elastic-timeout-ms")
    p.add_argument("--deadline", type=float, default=60, help="collrun --timeout of a trial, s")
    p.add_argument("--replace-delay-ms", type=int, default=200)
    p.add_argument("--restart-compare", type=int, default=0, help="checkpoint-restart trials per rank count")
    p.add_argument("--store-test", action="store_true")
    p.add_argument("--netns", type=int, default=0, help="trials at 4 ranks on two network-namespace hosts")
    p.add_argument("--only", action="append", default=[], metavar="N:SCENARIO:SEED",
                   help="run this one trial (again: the seed fixes its kills)")
    p.add_argument("--json", help="write every record here")
    p.add_argument("--keep-failed", action="store_true")
    p.add_argument("--summarize", metavar="FILE", help="only summarize the JSON lines of an earlier run")
    args = p.parse_args()
    if args.summarize:
        summarize([json.loads(line) for line in open(args.summarize) if line.startswith("{")])
        return
    if args.program is None:
        args.program = "train" if args.train else "worker"
    h = Harness(args)
    records = []
    rng = random.Random(args.seed)
    ranks = [int(x) for x in args.ranks.split(",")]
    plan = []
    if args.ci:
        plan = [(n, sc, args.seed + i) for i, (n, sc) in enumerate(CI_PLAN)]
        args.store_test = True
    for spec in args.only:
        n, sc, seed = spec.split(":")
        plan.append((int(n), sc, int(seed)))
    scenarios = args.scenarios.split(",")
    for i in range(args.trials):
        n = ranks[i % len(ranks)]
        choices = [s for s in scenarios if n >= 3 or s not in ("two", "shrink_hook", "grow_kill")]
        plan.append((n, choices[rng.randrange(len(choices))], args.seed * 1000 + i))
    t0 = time.time()
    try:
        for n, sc, seed in plan:
            r = Trial(h, n, sc, seed).run()
            records.append(r)
            print(json.dumps(r), flush=True)
        for n in ranks if args.restart_compare else []:
            for i in range(args.restart_compare):
                r = restart_trial(h, n, args.seed * 7 + i)
                records.append(r)
                print(json.dumps(r), flush=True)
        if args.netns:
            records += netns_trials(h, args.netns, args.seed)
        if args.store_test:
            r = store_dies(args, h.tmp)
            records.append(r)
            print(json.dumps(r), flush=True)
    finally:
        shutil.rmtree(h.tmp, ignore_errors=True) if not args.keep_failed else None
    summarize(records)
    print("took %.1f s" % (time.time() - t0))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    sys.exit(0 if all(r["ok"] for r in records) else 1)


if __name__ == "__main__":
    main()
