"""examples/elastic_ddp.py run as examples/README.md says, with ranks SIGKILLed.

1. Undisturbed: 3 ranks under collrun, --bit-identical: the reference parameter hash.
2. Killed: 3 ranks under collrun --replace 2, --bit-identical; the process that is rank 0 at
   step 4 SIGKILLs itself, later rank 1 too (EXAMPLE_KILL_AT). Checks: the job finishes,
   every sample is used exactly once (the sample log: one line per member per committed
   step, the members' slices disjoint and covering the step's batch), failures were seen
   and recovered from, a replacement joined, and every member ends with the reference's
   parameter hash, bit for bit.
3. torchrun: 2 ranks, one torchrun each (--max-restarts 1) meeting at a TCPStore this test
   hosts; rank 1 SIGKILLs itself, its torchrun restarts it, it joins; default (DDP) mode.
   Checks: both torchruns exit 0, samples used once, a replacement joined.

usage: test_elastic_ddp.py COLLRUN EXAMPLE"""
import collections
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import torch.distributed as dist

STEPS = 40
SHARDS, SHARD_SIZE = 6, 2
DEADLINE_S = 150
STARTED = []  # every Job, stopped at the end whatever happened


class Job:
    """A launcher process with its output in a file (the cases run side by side)."""

    def __init__(self, cmd, env):
        self.log = tempfile.TemporaryFile()
        self.start = time.monotonic()
        self.p = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        STARTED.append(self)

    def finish(self, end):
        try:
            self.p.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        self.took = time.monotonic() - self.start
        self.log.seek(0)
        self.out = self.log.read().decode("utf-8", "replace")
        return self.p.returncode, self.out


def check_samples(path, problems, label):
    """Every step 0..STEPS-1 committed once: its lines (one per member) agree on the
    world, name each rank once, and their ids are exactly the step's batch."""
    steps = collections.defaultdict(list)
    with open(path) as f:
        for line in f:
            step, world, rank, ids = line.split()
            steps[int(step)].append((int(world), int(rank), [int(i) for i in ids.split(",")]))
    batch = SHARDS * SHARD_SIZE
    for step in range(STEPS):
        lines = steps.pop(step, [])
        worlds = {w for w, _, _ in lines}
        ranks = sorted(r for _, r, _ in lines)
        ids = sorted(i for _, _, chunk in lines for i in chunk)
        if len(worlds) != 1 or ranks != list(range(worlds.pop())) or \
                ids != list(range(step * batch, (step + 1) * batch)):
            problems.append("%s: step %d's sample log is wrong: %s" % (label, step, lines))
    if steps:
        problems.append("%s: steps beyond %d logged: %s" % (label, STEPS - 1, sorted(steps)))


def hashes(out):
    return set(re.findall(r"FINAL step=%d world=\d+ params_sha256=([0-9a-f]+)" % STEPS, out))


def main():
    collrun, example = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    folder = tempfile.mkdtemp(prefix="elastic_ddp_")
    env = dict(os.environ, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")
    env.pop("EXAMPLE_KILL_AT", None)
    common = ["--steps", str(STEPS), "--shards", str(SHARDS), "--shard-size", str(SHARD_SIZE)]
    problems = []
    store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=60))
    try:
        # 1. undisturbed
        reference_job = Job([collrun, "-n", "3", "--timeout", str(DEADLINE_S), sys.executable,
                             example, "--bit-identical", "--store",
                             "file:" + os.path.join(folder, "store_reference")] + common, env)
        # 2. killed twice, replaced
        killed_log = os.path.join(folder, "samples_killed")
        killed_job = Job([collrun, "-n", "3", "--replace", "2", "--timeout", str(DEADLINE_S),
                          sys.executable, example, "--bit-identical", "--step-delay", "0.1",
                          "--wait-for-replacements", "60", "--sample-log", killed_log,
                          "--store", "file:" + os.path.join(folder, "store_killed")] + common,
                         dict(env, EXAMPLE_KILL_AT="4:0,%d:1" % (STEPS - 8)))
        # 3. one torchrun per rank, meeting at the TCPStore hosted here
        torchrun_log = os.path.join(folder, "samples_torchrun")
        torchruns = [Job([sys.executable, "-m", "torch.distributed.run", "--standalone",
                          "--nnodes", "1", "--nproc-per-node", "1", "--max-restarts", "1",
                          example, "--rank", str(rank), "--world", "2", "--step-delay", "0.1",
                          "--wait-for-replacements", "60", "--sample-log", torchrun_log,
                          "--store", "tcp:127.0.0.1:%d" % store.port] + common,
                         dict(env, EXAMPLE_KILL_AT="3:1")) for rank in range(2)]
        end = time.monotonic() + DEADLINE_S

        rc, out = reference_job.finish(end)
        reference = hashes(out)
        print("undisturbed, 3 ranks: rc %s, %.1f s, params %s" % (rc, reference_job.took,
                                                                   sorted(reference)))
        if rc != 0 or len(reference) != 1 or len(re.findall(r"(?m)^\[\d\] FINAL", out)) != 3:
            problems.append("the undisturbed run failed (rc %s):\n%s" % (rc, out))

        rc, out = killed_job.finish(end)
        final = hashes(out)
        events = [line for line in out.splitlines()
                  if re.match(r"\[\d\] (KILL|FAILURE|GROW|RECOVERED|JOINED|FINAL)", line)]
        count = collections.Counter(line.split()[1] for line in events)
        print("killed twice, 3 ranks, --replace 2: rc %s, %.1f s, %s, params %s" % (
            rc, killed_job.took, dict(count), sorted(final)))
        for line in events:
            print("  " + line)
        if rc != 0 or count["KILL"] != 2 or count["FAILURE"] < 2 or count["RECOVERED"] < 2 \
                or count["JOINED"] != 2 or count["FINAL"] != 3:
            problems.append("the killed run did not go as planned (rc %s):\n%s" % (rc, out))
        if final != reference:
            problems.append("killed run's parameters %s differ from the undisturbed run's %s"
                            % (sorted(final), sorted(reference)))
        check_samples(killed_log, problems, "collrun")

        outs = [job.finish(end) for job in torchruns]
        out = "\n".join(o for _, o in outs)
        print("torchrun per rank, 2 ranks, rank 1 killed: rc %s, %.1f s, %d joined" % (
            [rc for rc, _ in outs], max(job.took for job in torchruns),
            out.count("JOINED t=")))
        if any(rc != 0 for rc, _ in outs) or out.count("JOINED t=") != 1 or \
                out.count("FINAL step=%d" % STEPS) != 2:
            problems.append("the torchrun run did not go as planned:\n%s" % out)
        check_samples(torchrun_log, problems, "torchrun")
    finally:
        for job in STARTED:
            if job.p.poll() is None:
                job.p.kill()
        del store
        shutil.rmtree(folder, ignore_errors=True)
    for p in problems:
        print("PROBLEM: " + p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
