"""The "coll" backend's collectives against gloo on the same inputs, at 2, 3 and 4 ranks:
all_reduce (every dtype and op), broadcast, reduce, the all_gather family, reduce_scatter,
all_to_all_single with even splits, barrier, coalesced calls, non-contiguous and complex
tensors, subgroups. Integers must be equal, floats within TOL. Where Debian's gloo lacks
a dtype or call, the reference is built from calls it has (see gloo_all_reduce)."""
import datetime
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coll_harness  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch_coll  # noqa: E402,F401  (registers the backend "coll")

R = dist.ReduceOp
DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64]
OPS = [R.SUM, R.PRODUCT, R.MIN, R.MAX, R.AVG, R.BAND, R.BOR, R.BXOR]
# Relative and absolute tolerance per float dtype (gloo and libcoll sum in different
# orders; the bfloat16 reference is a float32 sum rounded once).
TOL = {torch.float16: 1e-2, torch.bfloat16: 3e-2, torch.float32: 1e-5, torch.float64: 1e-12,
       torch.complex64: 1e-5, torch.complex128: 1e-12}
BITWISE = (R.BAND, R.BOR, R.BXOR)


def make(dtype, rank, shape=(37,), seed=0):
    g = torch.Generator().manual_seed(1000 * seed + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point or dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=torch.float64).to(dtype) if not dtype.is_complex \
            else torch.randn(shape, generator=g, dtype=dtype)
    lo = 0 if dtype == torch.uint8 else -3
    return torch.randint(lo, 4, shape, generator=g, dtype=torch.int64).to(dtype)


def same(got, want, what):
    assert got.dtype == want.dtype, "%s: dtype %s, expected %s" % (what, got.dtype, want.dtype)
    assert got.shape == want.shape, "%s: shape %s, expected %s" % (what, got.shape, want.shape)
    if got.dtype in TOL:
        tol = TOL[got.dtype]
        torch.testing.assert_close(got, want, rtol=tol, atol=tol, msg=lambda m: what + ": " + m)
    else:
        assert torch.equal(got, want), "%s:\n got %s\nwant %s" % (what, got, want)


def gloo_all_reduce(ctx, x, op):
    """gloo's all_reduce of x, or the same built from what Debian's gloo has: AVG as SUM then
    divide, bool as uint8, bfloat16 as float32 then rounding."""
    if op == R.AVG:
        s = gloo_all_reduce(ctx, x, R.SUM)
        if x.is_floating_point():
            return (s.double() / ctx.world).to(x.dtype)
        return torch.div(s, ctx.world, rounding_mode="trunc")
    if x.dtype == torch.bool:
        return gloo_all_reduce(ctx, x.to(torch.uint8), op).bool()
    if x.dtype == torch.bfloat16:
        return gloo_all_reduce(ctx, x.float(), op).to(torch.bfloat16)
    y = x.clone()
    dist.all_reduce(y, op, group=ctx.gloo)
    return y


def refused(dtype, op):
    """The combinations that raise (as gloo's do): bitwise on floats, AVG on bool."""
    if op in BITWISE and dtype.is_floating_point:
        return "non-integral"
    if op == R.AVG and dtype == torch.bool:
        return "bool"
    return None


def all_reduce_every_dtype_and_op_matches_gloo(ctx):
    checked = 0
    for dtype in DTYPES:
        for op in OPS:
            x = make(dtype, ctx.rank, seed=checked)
            if refused(dtype, op):
                coll_harness.expect_raises(lambda: dist.all_reduce(x.clone(), op), "coll: rank",
                                           "all_reduce", refused(dtype, op))
                continue
            got = x.clone()
            dist.all_reduce(got, op)
            same(got, gloo_all_reduce(ctx, x, op), "all_reduce %s %s" % (dtype, op))
            checked += 1
    assert checked >= 50, checked


def all_reduce_complex_noncontiguous_and_empty_tensors(ctx):
    for dtype in (torch.complex64, torch.complex128):
        for op in (R.SUM, R.AVG):
            x = make(dtype, ctx.rank, (5, 3))
            got = x.clone()
            dist.all_reduce(got, op)
            want = x.clone()
            dist.all_reduce(want, R.SUM, group=ctx.gloo)
            if op == R.AVG:
                want = want / ctx.world
            same(got, want, "all_reduce %s %s" % (dtype, op))
        coll_harness.expect_raises(lambda: dist.all_reduce(make(dtype, 0), R.MAX), "complex")
    for dtype in (torch.float32, torch.int64, torch.bool):
        base = make(dtype, ctx.rank, (6, 8), seed=3)
        got = base.clone().t()[1::2]  # neither contiguous nor dense in memory
        assert not got.is_contiguous()
        dist.all_reduce(got, R.MAX)
        same(got, gloo_all_reduce(ctx, base.t()[1::2].contiguous(), R.MAX), "strided %s" % dtype)
        untouched = base.clone().t()
        untouched[1::2] = got
        assert torch.equal(untouched[0::2], base.t()[0::2]), "strided all_reduce wrote outside"
    empty = torch.zeros(0)
    dist.all_reduce(empty)
    assert empty.numel() == 0


def premul_sum_scales_before_summing(ctx):
    x = make(torch.float64, ctx.rank)
    op = dist._make_nccl_premul_sum(2.5)
    got = x.clone()
    dist.all_reduce(got, op)
    same(got, gloo_all_reduce(ctx, x * 2.5, R.SUM), "premul_sum")


def broadcast_and_reduce_match_gloo_from_every_root(ctx):
    for root in range(ctx.world):
        for dtype in DTYPES + [torch.int16, torch.complex64]:
            x = make(dtype, ctx.rank, (4, 5), seed=root)
            got = x.clone()
            dist.broadcast(got, root)
            same(got, make(dtype, root, (4, 5), seed=root), "broadcast %s root %d" % (dtype, root))
        for dtype in (torch.int32, torch.float32, torch.float64, torch.bool, torch.bfloat16):
            x = make(dtype, ctx.rank, seed=root + 7)
            got = x.clone()
            dist.reduce(got, root, R.SUM)
            if ctx.rank == root:
                same(got, gloo_all_reduce(ctx, x, R.SUM), "reduce %s root %d" % (dtype, root))
            else:
                gloo_all_reduce(ctx, x, R.SUM)  # keep gloo's calls in step on every rank
                same(got, x, "reduce leaves non-root %s alone" % dtype)
        t = torch.arange(12.).view(3, 4).t()  # non-contiguous broadcast
        if ctx.rank != root:
            t.zero_()
        dist.broadcast(t, root)
        same(t, torch.arange(12.).view(3, 4).t(), "strided broadcast")


def all_gather_family_matches_gloo(ctx):
    w = ctx.world
    for dtype in (torch.float32, torch.int64, torch.uint8, torch.float16, torch.complex64):
        x = make(dtype, ctx.rank, (3, 4))
        got = [torch.empty_like(x) for _ in range(w)]
        want = [torch.empty_like(x) for _ in range(w)]
        dist.all_gather(got, x)
        dist.all_gather(want, x, group=ctx.gloo)
        for r in range(w):
            same(got[r], want[r], "all_gather %s from %d" % (dtype, r))
        flat = torch.empty(w * 3, 4, dtype=dtype)
        dist._all_gather_base(flat, x)  # gloo lacks it: all_gather then cat
        same(flat, torch.cat(want), "_allgather_base %s" % dtype)
    for dtype in (torch.bool, torch.bfloat16, torch.int16):  # gloo cannot move these at all
        x = make(dtype, ctx.rank, (5,))
        got = [torch.empty_like(x) for _ in range(w)]
        dist.all_gather(got, x)
        for r in range(w):
            same(got[r], make(dtype, r, (5,)), "all_gather %s from %d" % (dtype, r))
    strided = [torch.zeros(4, 3).t() for _ in range(w)]
    dist.all_gather(strided, make(torch.float32, ctx.rank, (3, 4)))
    for r in range(w):
        same(strided[r], make(torch.float32, r, (3, 4)), "all_gather into strided outputs")
    empty = [torch.zeros(0) for _ in range(w)]  # gloo hangs on this one
    dist.all_gather(empty, torch.zeros(0))
    inputs = [make(torch.float32, ctx.rank, (2, 3)), make(torch.float32, ctx.rank, (5,), seed=1)]
    got = [[torch.empty_like(t) for t in inputs] for _ in range(w)]
    want = [[torch.empty_like(t) for t in inputs] for _ in range(w)]
    dist.all_gather_coalesced(got, inputs)
    dist.all_gather_coalesced(want, inputs, group=ctx.gloo)
    for r in range(w):
        for j in range(len(inputs)):
            same(got[r][j], want[r][j], "all_gather_coalesced %d.%d" % (r, j))
    tensors = [make(torch.float64, ctx.rank, (3,)), make(torch.float64, ctx.rank, (2, 2), seed=2)]
    want = [t.clone() for t in tensors]
    dist.all_reduce_coalesced(tensors)
    dist.all_reduce_coalesced(want, group=ctx.gloo)
    for j in range(2):
        same(tensors[j], want[j], "all_reduce_coalesced %d" % j)


def reduce_scatter_matches_gloo_all_reduce_then_slice(ctx):
    w = ctx.world
    for dtype in (torch.float32, torch.int32, torch.float64, torch.bool):
        for op in (R.SUM, R.MAX, R.MIN):
            inputs = [make(dtype, ctx.rank, (2, 3), seed=10 * p + 1) for p in range(w)]
            whole = gloo_all_reduce(ctx, torch.stack(inputs), op)
            got = torch.empty(2, 3, dtype=dtype)
            dist.reduce_scatter(got, inputs, op)
            same(got, whole[ctx.rank], "reduce_scatter %s %s" % (dtype, op))
            flat_in = torch.cat(inputs)
            flat_out = torch.empty(2, 3, dtype=dtype)
            dist._reduce_scatter_base(flat_out, flat_in, op)
            same(flat_out, whole[ctx.rank], "_reduce_scatter_base %s %s" % (dtype, op))


def all_to_all_single_even_matches_gloo(ctx):
    w = ctx.world
    for dtype in (torch.float32, torch.int64, torch.float64):
        x = make(dtype, ctx.rank, (w * 2, 3))
        got = torch.empty_like(x)
        want = torch.empty_like(x)
        dist.all_to_all_single(got, x)
        dist.all_to_all_single(want, x, group=ctx.gloo)
        same(got, want, "all_to_all_single %s" % dtype)
    coll_harness.expect_raises(
        lambda: dist.all_to_all_single(torch.empty(w * 2 + 1), torch.empty(w * 2 + 1)),
        "divide equally")


def outcome(fn):
    try:
        return ("returns", repr(fn()))
    except Exception as e:  # compared, not hidden
        return ("raises", type(e).__name__)


def async_work_wait_test_future_and_barrier(ctx):
    x = make(torch.float32, ctx.rank, (1000,))
    want = gloo_all_reduce(ctx, x, R.SUM)
    got = x.clone()
    work = dist.all_reduce(got, async_op=True)
    fut = work.get_future()
    assert work.wait(), "wait() returns True"
    assert work.is_completed() and work.is_success()
    # torch 1.13's Python binding of Work.exception() cannot convert its result for any
    # backend: coll's must behave exactly as gloo's does.
    gloo_work = dist.all_reduce(x.clone(), group=ctx.gloo, async_op=True)
    gloo_work.wait()
    assert outcome(work.exception) == outcome(gloo_work.exception), \
        (outcome(work.exception), outcome(gloo_work.exception))
    same(got, want, "async all_reduce")
    value = fut.wait()
    assert isinstance(value, list) and len(value) == 1, value
    same(value[0], want, "future value")
    # several in flight from this thread, waited out of order, with timeouts
    bufs = [make(torch.float64, ctx.rank, (50,), seed=s) for s in range(5)]
    wants = [gloo_all_reduce(ctx, b, R.SUM) for b in bufs]
    works = [dist.all_reduce(b, async_op=True) for b in bufs]
    for work, b, wnt in reversed(list(zip(works, bufs, wants))):
        work.wait(timeout=datetime.timedelta(seconds=30))
        same(b, wnt, "one of several in flight")
    chained = dist.all_reduce(torch.ones(4), async_op=True).get_future().then(
        lambda f: f.value()[0] * 2)
    same(chained.wait(), torch.full((4,), 2.0 * ctx.world), "then() on the future")
    # wait(timeout) on a call a late rank has not joined yet raises as gloo's does, and
    # a later wait() still completes it
    for group in (ctx.gloo, None):
        t = torch.ones(16)
        if ctx.rank == 1:
            import time
            time.sleep(1.0)
        work = dist.all_reduce(t, group=group, async_op=True)
        if ctx.rank == 0:
            coll_harness.expect_raises(
                lambda: work.wait(timeout=datetime.timedelta(milliseconds=100)), "timed out")
            assert not work.is_completed()
        work.wait()
        same(t, torch.full((16,), float(ctx.world)), "all_reduce after a wait that timed out")
    dist.barrier()
    b = dist.barrier(async_op=True)
    b.wait()
    assert b.is_completed()


def unwaited_calls_complete_after_synchronous_ones(ctx):
    # Synchronous calls (their Works waited at once) switch the group's worker to leaving
    # new calls to the waiting thread for a moment; a call then waited only through its
    # future (DDP's reducer, comm hooks) or not at all must still start and complete.
    for _ in range(20):
        dist.all_reduce(torch.ones(8))
    futures = [dist.all_reduce(torch.full((8,), float(i)), async_op=True).get_future()
               for i in range(3)]
    for i, fut in enumerate(futures):
        same(fut.wait()[0], torch.full((8,), float(i * ctx.world)), "future-only call %d" % i)
    for _ in range(20):
        dist.all_reduce(torch.ones(8))
    t = torch.ones(8)
    work = dist.all_reduce(t, async_op=True)
    import time
    end = time.monotonic() + 30
    while not work.is_completed() and time.monotonic() < end:
        time.sleep(0.001)  # nobody waits: the worker must start it
    assert work.is_completed(), "an unwaited call did not complete in 30 s"
    same(t, torch.full((8,), float(ctx.world)), "unwaited call")


def work_duration_sequence_numbers_and_names(ctx):
    # torch 2.2 and later: a Work's duration (ms of the libcoll call) and sequence number,
    # the group's count of calls, the backend's name (getBackendOptions is split_group's, in
    # test_groups.py); 1.13 has none of these.
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) < (2, 2):
        return
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    assert backend.name() == "coll", backend.name()
    before = backend._get_sequence_number_for_group()
    work = dist.all_reduce(torch.ones(1 << 16), async_op=True)
    work.wait()
    assert backend._get_sequence_number_for_group() == before + 1
    assert work._get_duration() > 0.0, work._get_duration()
    pending = dist.all_reduce(torch.ones(4), async_op=True)
    pending.wait()
    assert pending._get_duration() >= 0.0


def calls_from_several_threads_are_serialised(ctx):
    import threading
    errors = []
    results = {}

    def worker(tid):
        try:
            group = groups[tid]
            t = torch.full((100,), float(ctx.rank + tid))
            for _ in range(20):
                dist.all_reduce(t, group=group)
                t /= ctx.world
            results[tid] = t
        except Exception as e:  # collected for the assert below
            errors.append(e)
    # one group per thread: each thread's calls are ordered, the groups share the process
    groups = [dist.new_group(backend="coll") for _ in range(2)]
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for tid in range(2):
        mean = sum(r + tid for r in range(ctx.world)) / ctx.world
        torch.testing.assert_close(results[tid], torch.full((100,), mean))
    # two threads on ONE group, each waiting its own async work: the backend serialises
    done = []
    t = threading.Thread(target=lambda: done.append(dist.all_reduce(torch.ones(8), async_op=True)))
    t.start()
    t.join(30)
    done[0].wait()
    for g in groups:
        dist.destroy_process_group(g)


def subgroups_match_gloo_subgroups(ctx):
    ranks = list(range(0, ctx.world, 2)) if ctx.world > 2 else [0, 1]
    sub = dist.new_group(ranks, backend="coll")
    gsub = dist.new_group(ranks, backend="gloo")
    if ctx.rank in ranks:
        x = make(torch.float32, ctx.rank, (9,))
        got, want = x.clone(), x.clone()
        dist.all_reduce(got, group=sub)
        dist.all_reduce(want, group=gsub)
        same(got, want, "subgroup all_reduce")
        b = torch.full((3,), float(ctx.rank))
        dist.broadcast(b, ranks[-1], group=sub)  # a global rank as the root
        same(b, torch.full((3,), float(ranks[-1])), "subgroup broadcast")
        assert dist.get_rank(sub) == ranks.index(ctx.rank)
        dist.destroy_process_group(sub)
    dist.barrier()


def bad_arguments_raise_naming_the_call(ctx):
    t = torch.ones(3)
    coll_harness.expect_raises(lambda: dist.broadcast(t, ctx.world + 3), "invalid root rank")
    coll_harness.expect_raises(lambda: dist.all_gather([torch.ones(3)], t), "all_gather",
                               "expected %d" % ctx.world)
    coll_harness.expect_raises(
        lambda: dist.all_gather([torch.ones(2) for _ in range(ctx.world)], t), "elements")
    coll_harness.expect_raises(
        lambda: dist._all_gather_base(torch.ones(ctx.world * 3, dtype=torch.int32), t), "dtype")
    coll_harness.expect_raises(lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16)),
                               "cannot reduce tensors of dtype Short")
    dist.barrier()  # every rank is still in step


CASES = {f.__name__: f for f in [
    all_reduce_every_dtype_and_op_matches_gloo,
    all_reduce_complex_noncontiguous_and_empty_tensors,
    premul_sum_scales_before_summing,
    broadcast_and_reduce_match_gloo_from_every_root,
    all_gather_family_matches_gloo,
    reduce_scatter_matches_gloo_all_reduce_then_slice,
    all_to_all_single_even_matches_gloo,
    async_work_wait_test_future_and_barrier,
    unwaited_calls_complete_after_synchronous_ones,
    work_duration_sequence_numbers_and_names,
    calls_from_several_threads_are_serialised,
    subgroups_match_gloo_subgroups,
    bad_arguments_raise_naming_the_call,
]}

if __name__ == "__main__":
    coll_harness.main(CASES)
