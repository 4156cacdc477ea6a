"""Groups and objects on the "coll" backend against gloo, and the ends of a group's life.

In the harness's rank processes (worlds 2 and 4), coll and gloo with the same data:
- object collectives: all_gather_object, broadcast_object_list, gather_object,
  scatter_object_list, send_object_list/recv_object_list (objects of different pickled
  sizes, holding tensors);
- new_group subgroups (sorted, a subset, a single rank; new_subgroups) and
  dist.split_group (the parent coll's or gloo's; the order of a split's ranks is its group
  ranks' order; ranks in no split get no group): the group's backend, ranks and
  collectives on it, while the default group keeps working.

In processes of their own (world 2), since they end the default group (group timeout 45 s,
everything must be over well before it):
- destroy_process_group while an irecv nobody matches is pending on every rank: destroy
  returns promptly, the pending Work then fails (wait raises) instead of waiting, and the
  process exits promptly;
- the same with an all_reduce only rank 0 entered;
- _abort_process_group() (PyTorch 2.x's abort of the default group and all others) with
  an unmatched irecv pending: it returns promptly, the Work fails, and a new default coll
  group over a new store then works in the same processes;
- _abort_process_group(subgroup) with an irecv pending on the subgroup: the default group
  keeps working."""
import datetime
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coll_harness  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.distributed_c10d import GroupMember  # noqa: E402


def obj(rank):
    """An object whose pickled size depends on the rank."""
    return {"rank": rank, "name": "r" * (37 * rank + 1), "t": torch.arange(rank + 2) * 1.5,
            "nested": [rank, (rank, str(rank)), None]}


def norm(o):
    """o with tensors turned into comparable tuples."""
    if isinstance(o, torch.Tensor):
        return ("tensor", str(o.dtype), o.tolist())
    if isinstance(o, dict):
        return {k: norm(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return type(o)(norm(v) for v in o)
    return o


def object_collectives_match_gloo(ctx):
    w, r = ctx.world, ctx.rank
    for group in (ctx.gloo, None):  # gloo, then coll (the default group)
        name = "gloo" if group is not None else "coll"
        out = [None] * w
        dist.all_gather_object(out, obj(r), group=group)
        assert norm(out) == norm([obj(k) for k in range(w)]), (name, out)

        src = w - 1
        lst = [obj(src), 42, "end"] if r == src else [None, None, None]
        dist.broadcast_object_list(lst, src=src, group=group)
        assert norm(lst) == norm([obj(src), 42, "end"]), (name, lst)

        dst = w - 1
        out = [None] * w if r == dst else None
        dist.gather_object(obj(r), out, dst=dst, group=group)
        if r == dst:
            assert norm(out) == norm([obj(k) for k in range(w)]), (name, out)

        got = [None]
        dist.scatter_object_list(got, [obj(10 + k) for k in range(w)] if r == 0 else None,
                                 src=0, group=group)
        assert norm(got[0]) == norm(obj(10 + r)), (name, got)

        # point to point: 0 -> 1, then 1 -> 0
        if r in (0, 1):
            peer = 1 - r
            lst = [obj(r), "from %d" % r] if r == 0 else [None, None]
            (dist.send_object_list if r == 0 else dist.recv_object_list)(lst, peer, group=group)
            if r == 1:
                assert norm(lst) == norm([obj(0), "from 0"]), (name, lst)
            lst = [obj(r)] if r == 1 else [None]
            (dist.send_object_list if r == 1 else dist.recv_object_list)(lst, peer, group=group)
            if r == 0:
                assert norm(lst) == norm([obj(1)]), (name, lst)
        dist.barrier(group=group)


def exercise(group, members, r, what):
    """Collectives on `group` whose members are the global ranks `members` in group-rank
    order; returns their results (to compare coll's with gloo's)."""
    assert dist.get_world_size(group) == len(members), what
    assert dist.get_rank(group) == members.index(r), (what, dist.get_rank(group))
    assert dist.get_process_group_ranks(group) == members, (what,
                                                            dist.get_process_group_ranks(group))
    for i, g in enumerate(members):
        assert dist.get_global_rank(group, i) == g and dist.get_group_rank(group, g) == i
    t = torch.full((3,), float(r + 1))
    dist.all_reduce(t, group=group)
    assert torch.equal(t, torch.full((3,), float(sum(m + 1 for m in members)))), (what, t)
    b = torch.full((2,), float(100 + r))
    dist.broadcast(b, group=group, group_src=0)
    assert torch.equal(b, torch.full((2,), float(100 + members[0]))), \
        "%s: broadcast from group rank 0 (global rank %d) gave global rank %d's data" % (
            what, members[0], int(b[0]) - 100)
    out = [torch.zeros(2) for _ in members]
    dist.all_gather(out, torch.full((2,), float(r)), group=group)
    assert [int(o[0]) for o in out] == members, \
        "%s: all_gather in group-rank order holds global ranks %s" % (
            what, [int(o[0]) for o in out])
    return [t, b] + out


def in_subgroups(ctx, make, splits, what):
    """make(backend) -> {my split's tuple: group} for both backends; checks and compares."""
    r = ctx.rank
    mine = [s for s in splits if r in s]
    results = {}
    for backend in ("gloo", "coll"):
        groups = make(backend)
        for s in splits:
            g = groups[tuple(s)]
            if r not in s:
                assert g is GroupMember.NON_GROUP_MEMBER or g is None, (what, backend, s, g)
                continue
            assert dist.get_backend(g) == backend, (what, s, dist.get_backend(g))
            assert g._get_backend(torch.device("cpu")).name() == backend
            results[backend] = exercise(g, list(s), r, "%s %s %s" % (what, backend, s))
    if mine:
        for a, b in zip(results["coll"], results["gloo"]):
            assert torch.equal(a, b), what
    # the default group still works
    t = torch.ones(1)
    dist.all_reduce(t)
    assert t.item() == ctx.world


def new_group_subgroups_match_gloo(ctx):
    w = ctx.world
    for ranks in ([0, 1], list(range(1, w)), [w - 1], list(range(w))[::-1]):
        def make(backend, ranks=ranks):
            g = dist.new_group(ranks, backend=None if backend == "coll" else "gloo")
            return {tuple(sorted(ranks)): g}  # new_group orders group ranks by global rank
        in_subgroups(ctx, make, [sorted(ranks)], "new_group %s" % ranks)
    # new_subgroups: consecutive groups of 2 (both backends)
    for backend in ("gloo", "coll"):
        cur, subs = dist.new_subgroups(group_size=2,
                                       backend=None if backend == "coll" else "gloo")
        assert len(subs) == w // 2
        assert dist.get_backend(cur) == backend
        exercise(cur, [ctx.rank - ctx.rank % 2, ctx.rank - ctx.rank % 2 + 1], ctx.rank,
                 "new_subgroups " + backend)
    # a subgroup's collective and the default group's in flight together
    sub = dist.new_group([0, 1])
    a = torch.ones(4)
    b = torch.full((4,), 2.0)
    works = []
    if ctx.rank in (0, 1):
        works.append(dist.all_reduce(a, group=sub, async_op=True))
    works.append(dist.all_reduce(b, async_op=True))
    for wk in works:
        wk.wait()
    assert ctx.rank not in (0, 1) or torch.equal(a, torch.full((4,), 2.0)), a
    assert torch.equal(b, torch.full((4,), 2.0 * w)), b


def split_group_matches_gloo(ctx):
    w = ctx.world
    plans = [[[1, 0]], [[0], [1]]] if w == 2 else [[[3, 1], [0, 2]], [[0, 1]], [[2, 0, 1, 3]]]
    for splits in plans:
        def make(backend, splits=splits):
            parent = None if backend == "coll" else ctx.gloo
            g = dist.split_group(parent_pg=parent, split_ranks=splits)
            in_one = any(ctx.rank in s for s in splits)  # if not, g must be NON_GROUP_MEMBER
            return {tuple(s): g if ctx.rank in s or not in_one else GroupMember.NON_GROUP_MEMBER
                    for s in splits}
        in_subgroups(ctx, make, splits, "split_group %s" % splits)


CASES = {f.__name__: f for f in [
    object_collectives_match_gloo,
    new_group_subgroups_match_gloo,
    split_group_matches_gloo,
]}

# ---------------------------------------------------------------------------------------
# The ends of a group's life: each in processes of its own.

GROUP_TIMEOUT_S = 45
PROMPT_S = 10  # destroy/abort must return, a failed Work must raise, within this


def lifecycle_init():
    import torch_coll  # noqa: F401
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("coll", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=GROUP_TIMEOUT_S))
    return rank, world


def timed(fn, what):
    print("calling %s" % what, flush=True)  # the last line of a rank killed while in it
    start = time.monotonic()
    fn()
    took = time.monotonic() - start
    assert took < PROMPT_S, "%s took %.1f s" % (what, took)
    print("%s returned in %.2f s" % (what, took), flush=True)


def must_fail(work, what):
    """The pending Work fails (wait raises) promptly rather than waiting for a peer that
    will never come."""
    start = time.monotonic()
    try:
        work.wait()
    except RuntimeError as e:
        took = time.monotonic() - start
        assert took < PROMPT_S, "%s: failed only after %.1f s: %s" % (what, took, e)
        print("%s: wait raised in %.2f s: %s" % (what, took, str(e).splitlines()[0]), flush=True)
        return
    raise AssertionError("%s: the pending Work completed without error after %.1f s" % (
        what, time.monotonic() - start))


def destroy_with_pending_irecv(rank, world):
    dist.barrier()
    t = torch.zeros(8)
    work = dist.irecv(t, src=(rank + 1) % world, tag=7)  # nobody sends
    dist.barrier()  # every rank has its irecv posted
    timed(dist.destroy_process_group, "destroy_process_group")
    must_fail(work, "irecv after destroy_process_group")


def destroy_with_pending_collective(rank, world):
    dist.barrier()
    work = None
    if rank == 0:  # the others never join this all_reduce
        work = dist.all_reduce(torch.ones(1 << 12), async_op=True)
        time.sleep(0.2)
    timed(dist.destroy_process_group, "destroy_process_group")
    if work is not None:
        must_fail(work, "all_reduce after destroy_process_group")


def abort_with_pending_irecv_then_reinit(rank, world):
    dist.barrier()
    t = torch.zeros(8)
    work = dist.irecv(t, src=(rank + 1) % world, tag=9)
    dist.barrier()
    timed(lambda: dist.distributed_c10d._abort_process_group(), "_abort_process_group")
    assert not dist.is_initialized()
    must_fail(work, "irecv after _abort_process_group")
    store = dist.TCPStore("127.0.0.1", int(os.environ["SECOND_STORE_PORT"]), world, rank == 0,
                          datetime.timedelta(seconds=30))
    dist.init_process_group("coll", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=30))
    x = torch.full((4,), float(rank + 1))
    dist.all_reduce(x)
    assert torch.equal(x, torch.full((4,), world * (world + 1) / 2.0)), x
    dist.destroy_process_group()


def abort_subgroup_with_pending_irecv(rank, world):
    sub = dist.new_group(list(range(world)))
    assert dist.get_backend(sub) == "coll"
    t = torch.zeros(8)
    work = dist.irecv(t, src=(rank + 1) % world, tag=11, group=sub)
    dist.barrier()
    timed(lambda: dist.distributed_c10d._abort_process_group(sub), "_abort_process_group(sub)")
    must_fail(work, "irecv on the subgroup after aborting it")
    x = torch.ones(3)
    dist.all_reduce(x)  # the default group is untouched
    assert torch.equal(x, torch.full((3,), float(world))), x
    dist.destroy_process_group()


LIFECYCLE = {f.__name__: f for f in [
    destroy_with_pending_irecv,
    destroy_with_pending_collective,
    abort_with_pending_irecv_then_reinit,
    abort_subgroup_with_pending_irecv,
]}
LIFECYCLE_DEADLINE_S = 30  # < GROUP_TIMEOUT_S: a wait for the group's timeout fails the test


def lifecycle_rank(name):
    rank, world = lifecycle_init()
    LIFECYCLE[name](rank, world)
    print("LIFECYCLE %s ok on rank %d" % (name, rank), flush=True)
    sys.exit(0)  # an orderly interpreter exit: the destructors must not wait either


def main():
    if "--rank-process" in sys.argv:
        args = sys.argv[sys.argv.index("--rank-process") + 1:]
        if args and args[0] == "--lifecycle":
            lifecycle_rank(args[1])
        else:
            coll_harness.rank_process(CASES, args)
        return
    script = os.path.abspath(__file__)
    bad = coll_harness.run_worlds((2, 4), script)
    for name in LIFECYCLE:
        world = 2
        start = time.monotonic()
        results = coll_harness.launch(
            script, world, ["--lifecycle", name], timeout_s=LIFECYCLE_DEADLINE_S,
            env_extra={"SECOND_STORE_PORT": str(coll_harness.free_port())})
        took = time.monotonic() - start
        ok = all(rc == 0 for rc, _ in results)
        print("%s at %d ranks: %.1f s, %s" % (name, world, took, "ok" if ok else "FAILED"))
        for rank, (rc, out) in enumerate(results):
            if rc != 0:
                bad += 1
                print("--- %s rank %d exited %s:\n%s" % (name, rank, rc, out))
            else:
                for line in out.splitlines():
                    if "returned in" in line or "raised in" in line:
                        print("  rank %d %s" % (rank, line[:300]))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
