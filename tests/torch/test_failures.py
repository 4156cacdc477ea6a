"""Failures on the "coll" backend: a rank that dies (SIGKILL), a rank that never calls (the
group's timeout), mismatched calls, a monitored barrier a rank misses. Every surviving
rank must get a RuntimeError with a useful message (the peer, the call) within the
deadline, for its pending call and for its next one; nothing may hang."""
import datetime
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coll_harness  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch_coll  # noqa: F401,E402

GROUP_TIMEOUT_S = 6


def init():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("coll", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S))
    return rank, world


def raises_within(fn, seconds, *needles):
    start = time.monotonic()
    text = coll_harness.expect_raises(fn, *needles)
    took = time.monotonic() - start
    assert took < seconds, "raised after %.1f s, deadline %.1f s: %s" % (took, seconds, text)
    print("raised in %.2f s: %s" % (took, text.splitlines()[0]), flush=True)
    return text


def killed_rank(rank, world):
    victim = world - 1
    dist.barrier()
    if rank == victim:
        time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGKILL)
    t = torch.ones(1 << 16)
    work = dist.all_reduce(t, async_op=True)  # pending when the victim dies
    text = raises_within(work.wait, GROUP_TIMEOUT_S + 3, "coll: rank %d" % rank)
    assert str(victim) in text, "the message does not name rank %d: %s" % (victim, text)
    raises_within(lambda: dist.all_reduce(torch.ones(4)), 3, "coll: rank %d" % rank)


def rank_never_calls(rank, world):
    late = world - 1
    dist.barrier()
    if rank == late:
        time.sleep(GROUP_TIMEOUT_S + 8)
        return
    text = raises_within(lambda: dist.all_reduce(torch.ones(8)), GROUP_TIMEOUT_S + 3,
                         "coll: rank %d" % rank, "all_reduce")
    assert "TIMEOUT" in text or "REMOTE" in text, text
    raises_within(lambda: dist.broadcast(torch.ones(8), 0), 3, "coll: rank %d" % rank)


def mismatched_calls(rank, world):
    dist.barrier()
    t = torch.ones(64)
    if rank == 0:
        fn = lambda: dist.broadcast(t, 0)  # noqa: E731
    else:
        fn = lambda: dist.all_reduce(t)  # noqa: E731
    text = raises_within(fn, GROUP_TIMEOUT_S + 3, "coll: rank %d" % rank, "MISMATCH")
    assert "broadcast" in text and "all_reduce" in text, text


def monitored_barrier_names_the_missing_rank(rank, world):
    pg = dist.distributed_c10d._get_default_group()
    pg.monitored_barrier(datetime.timedelta(seconds=5))  # everyone arrives
    late = world - 1
    if rank == late:
        time.sleep(8)
        return
    text = raises_within(lambda: pg.monitored_barrier(datetime.timedelta(seconds=2)), 5.5,
                         "coll: rank %d" % rank, "monitored_barrier")
    assert str(late) in text, text


CASES = {f.__name__: f for f in [killed_rank, rank_never_calls, mismatched_calls,
                                 monitored_barrier_names_the_missing_rank]}
PLAN = [("killed_rank", 2), ("killed_rank", 4), ("rank_never_calls", 3),
        ("mismatched_calls", 2), ("mismatched_calls", 3),
        ("monitored_barrier_names_the_missing_rank", 3)]


def main():
    if "--rank-process" in sys.argv:
        name = sys.argv[sys.argv.index("--rank-process") + 1]
        rank, world = init()
        CASES[name](rank, world)
        print("CASE %s ok on rank %d" % (name, rank), flush=True)
        os._exit(0)  # the group is failed; skip its orderly teardown
    bad = 0
    for name, world in PLAN:
        start = time.monotonic()
        results = coll_harness.launch(os.path.abspath(__file__), world, [name], timeout_s=45)
        took = time.monotonic() - start
        for rank, (rc, out) in enumerate(results):
            victim = name == "killed_rank" and rank == world - 1
            if victim:
                ok = rc == -signal.SIGKILL
            else:
                ok = rc == 0
            if not ok:
                bad += 1
                print("--- %s world %d rank %d exited %s:\n%s" % (name, world, rank, rc, out))
        print("%s at %d ranks: %.1f s, %s" % (name, world, took, "FAILED" if bad else "ok"))
        for line in results[0][1].splitlines():
            if line.startswith("raised"):
                print("  rank 0 " + line[:300])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
