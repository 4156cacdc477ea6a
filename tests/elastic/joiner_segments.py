#!/usr/bin/python3
"""A replacement killed while it joins leaves nothing in /dev/shm: collrun --replace runs
elastic_worker at 4 ranks, rank 2 dies (COLL_TEST_KILL_AT agree), and its replacement is
killed at a point of its coll_comm_join: on entry (nothing made yet), just after the shm
transport created its inbox segment, before the peers mapped it ('shm_inbox': its name is
in /dev/shm then, 12.6 MB at 4 ranks), and after the join returned. After the job no
segment named with that process's pid (every libcoll segment name holds "-p<pid>-",
libcoll/src/common/segment_name.h) may be left, and the survivors must finish (exit 0).
Usage: joiner_segments.py COLLRUN ELASTIC_WORKER"""
import os
import re
import subprocess
import sys

COLLRUN, WORKER = sys.argv[1], sys.argv[2]
STARTED_RE = re.compile(r"collrun: started a replacement for rank 2 \(pid (\d+)")


def segments_of(pid):
    mark = "-p%d-" % pid
    return [f for f in os.listdir("/dev/shm") if f.startswith("coll-") and mark in f]


def trial(point):
    env = dict(os.environ, COLL_TIMEOUT_MS="3000",
               COLL_TEST_KILL_AT="agree:5@2,%s:1@j2" % point)
    argv = [COLLRUN, "--replace", "1", "--replace-delay-ms", "200", "--timeout", "60", "-n", "4",
            WORKER, "--steps", "60", "--batch", "64", "--dim", "8192", "--step-ms", "15"]
    p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=90)
    pids = [int(x) for x in STARTED_RE.findall(p.stderr)]
    problems = []
    if p.returncode != 0:
        problems.append("collrun exited %d" % p.returncode)
    if len(pids) != 1:
        problems.append("expected one replacement, collrun started %d" % len(pids))
    elif "raises SIGKILL at %s #1" % point not in p.stderr:
        problems.append("the replacement was not killed at %s" % point)
    left = [name for pid in pids for name in segments_of(pid)]
    for name in left:  # do not leave them to the next test
        try:
            os.unlink(os.path.join("/dev/shm", name))
        except OSError:
            pass
    if left:
        problems.append("the killed replacement's segments are left in /dev/shm: %s" % left)
    if problems:
        tail = "\n".join(p.stderr.splitlines()[-15:])
        print("FAIL: replacement killed at %s: %s\n%s" % (point, "; ".join(problems), tail))
        return False
    print("ok: replacement killed at %s: nothing of it left in /dev/shm" % point)
    return True


def main():
    results = [trial(point) for point in ("join", "shm_inbox", "joined")]
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
