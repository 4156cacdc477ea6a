"""Surviving a lost rank with the "coll" backend: 3 rank processes, one kills itself
(SIGKILL) between two all-reduces; the survivors see the second fail, call
torch_coll.agree() (every survivor gets the same flag AND and failed set) and
torch_coll.shrink() (libcoll agrees on who failed, then shrinks it away: no new store, no
new rendezvous) and all-reduce on the new group, which has become the default group.

torch's TCPStore, which must outlive the killed rank, is hosted here, in the parent, which
is no rank. From PyTorch 2.10 the group lives on that store alone, so rank 0 is the one
killed; on 1.13 libcoll's own store is hosted by rank 0 of the group (the rank that made
its unique id), so rank 2 is."""
import datetime
import os
import signal
import subprocess
import sys
import tempfile
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coll_harness  # noqa: E402

WORLD = 3
DEADLINE_S = 120


def victim():
    import torch_coll
    return 0 if torch_coll.features().get("c10d_store") else 2


def rank_main(rank, port):
    import torch_coll
    assert torch_coll.features()["elastic"], "torch_coll was built without the elastic calls"
    lost = victim()
    store = dist.TCPStore("127.0.0.1", port, is_master=False,
                          timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("coll", store=store, rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=30))
    t = torch.ones(16)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((16,), float(WORLD))), t
    if rank == lost:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    try:
        dist.all_reduce(t)
        raise AssertionError("the all-reduce without rank %d succeeded" % lost)
    except RuntimeError as e:
        text = str(e)
        assert "coll: rank %d" % rank in text, text
    # The agreement, as a training step makes it: every survivor gets the same answer.
    flag, failed, joiners = torch_coll.agree(flag=0xF0 | (1 << rank))
    assert (flag, failed, joiners) == (0xF0, [lost], 0), (flag, failed, joiners)
    group = torch_coll.shrink()  # who failed is agreed by the survivors (agreed again)
    took = time.monotonic() - start
    survivors = [r for r in range(WORLD) if r != lost]
    assert group.size() == len(survivors), group.size()
    assert group.rank() == survivors.index(rank), group.rank()
    assert dist.get_world_size() == len(survivors), dist.get_world_size()
    assert dist.get_rank() == survivors.index(rank), dist.get_rank()
    # On the new group by name and as the default group; then a broadcast and a barrier.
    t = torch.full((16,), float(rank))
    dist.all_reduce(t, group=group)
    assert torch.equal(t, torch.full((16,), float(sum(survivors)))), t
    t = torch.arange(8, dtype=torch.float64) * (rank + 1)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    assert torch.equal(t, torch.arange(8, dtype=torch.float64) * (max(survivors) + 1)), t
    b = torch.full((4,), float(rank))
    dist.broadcast(b, src=0)
    assert torch.equal(b, torch.full((4,), float(survivors[0]))), b
    dist.barrier()
    # Nobody failed since: the group goes on as it is.
    assert torch_coll.shrink() is dist.distributed_c10d._get_default_group()
    answer = torch_coll.agree(group, 0xFFFFFFFF ^ rank)
    assert answer == (0xFFFFFFFF ^ (survivors[0] | survivors[1]), [], 0), answer
    print("ELASTIC rank %d: failure to a working %d-rank group in %.2f s"
          % (rank, len(survivors), took), flush=True)
    dist.destroy_process_group()


def main():
    if "--rank-process" in sys.argv:
        rank_main(int(os.environ["RANK"]), int(os.environ["MASTER_PORT"]))
        return
    port = coll_harness.free_port()
    # The parent hosts torch's store: it outlives every rank.
    store = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                          timeout=datetime.timedelta(seconds=60))
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               WORLD_SIZE=str(WORLD), OMP_NUM_THREADS="1")
    procs = []
    for rank in range(WORLD):
        log = tempfile.TemporaryFile()
        procs.append((subprocess.Popen([sys.executable, os.path.abspath(__file__),
                                        "--rank-process"], env=dict(env, RANK=str(rank)),
                                       stdout=log, stderr=subprocess.STDOUT), log))
    end = time.monotonic() + DEADLINE_S
    bad = 0
    lost = victim()
    for rank, (p, log) in enumerate(procs):
        try:
            p.wait(timeout=max(0.1, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        log.seek(0)
        out = log.read().decode("utf-8", "replace")
        want = -signal.SIGKILL if rank == lost else 0
        ok = p.returncode == want and (rank == lost or "ELASTIC rank" in out)
        print("rank %d exited %s (want %d)%s" % (rank, p.returncode, want,
                                                 "" if ok else ":\n" + out))
        for line in out.splitlines():
            if line.startswith("ELASTIC"):
                print("  " + line)
        bad += not ok
    del store
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
