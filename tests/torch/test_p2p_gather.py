"""The "coll" backend's gather, scatter, uneven and list all-to-all and point to point
against gloo on the same inputs, at 2, 3 and 4 ranks."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coll_harness  # noqa: E402
from test_collectives import make, same  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch_coll  # noqa: E402,F401  (registers the backend "coll")



def gather_and_scatter_match_gloo_from_every_root(ctx):
    w = ctx.world
    for root in range(w):
        for dtype in (torch.float32, torch.int64, torch.bool):
            x = make(dtype, ctx.rank, (2, 3), seed=root)
            outs = [torch.empty_like(x) for _ in range(w)] if ctx.rank == root else None
            dist.gather(x, outs, root)
            if ctx.rank == root:
                for r in range(w):
                    same(outs[r], make(dtype, r, (2, 3), seed=root), "gather %s" % dtype)
            if dtype != torch.bool:  # Debian's gloo has no bool
                gouts = [torch.empty_like(x) for _ in range(w)] if ctx.rank == root else None
                dist.gather(x, gouts, root, group=ctx.gloo)
                if ctx.rank == root:
                    for r in range(w):
                        same(outs[r], gouts[r], "gather %s vs gloo" % dtype)
        for dtype in (torch.float64, torch.int32):
            ins = [make(dtype, 10 * root + p, (4,)) for p in range(w)] if ctx.rank == root else None
            out = torch.empty(4, dtype=dtype)
            dist.scatter(out, ins, root)
            gout = torch.empty(4, dtype=dtype)
            dist.scatter(gout, ins, root, group=ctx.gloo)
            same(out, gout, "scatter %s root %d" % (dtype, root))
            same(out, make(dtype, 10 * root + ctx.rank, (4,)), "scatter %s value" % dtype)


def all_to_all_uneven_and_list_match_gloo(ctx):
    w = ctx.world
    # rank r sends (r + p) % 3 rows to rank p, so rank p receives (q + p) % 3 from rank q
    in_splits = [(ctx.rank + p) % 3 for p in range(w)]
    out_splits = [(q + ctx.rank) % 3 for q in range(w)]
    x = make(torch.float32, ctx.rank, (sum(in_splits), 2))
    got = torch.empty(sum(out_splits), 2)
    dist.all_to_all_single(got, x, out_splits, in_splits)
    want = torch.empty(sum(out_splits), 2)
    dist.all_to_all_single(want, x, out_splits, in_splits, group=ctx.gloo)
    same(got, want, "all_to_all_single uneven")
    # the list form (gloo lacks it): gloo's all_to_all_single over the flattened lists
    ins = [make(torch.int64, 100 * ctx.rank + p, ((ctx.rank + p) % 3 + 1,)) for p in range(w)]
    outs = [torch.empty((q + ctx.rank) % 3 + 1, dtype=torch.int64) for q in range(w)]
    dist.all_to_all(outs, ins)
    flat = torch.empty(sum(o.numel() for o in outs), dtype=torch.int64)
    dist.all_to_all_single(flat, torch.cat(ins), [o.numel() for o in outs],
                           [i.numel() for i in ins], group=ctx.gloo)
    same(torch.cat(outs), flat, "all_to_all list")
    wrong = [x.size(0) + 1] + [0] * (w - 1)  # one row more than the input has
    coll_harness.expect_raises(lambda: dist.all_to_all_single(got, x, out_splits, wrong),
                               "split sizes add up")


def send_recv_in_order_match_gloo(ctx):
    # rank 0 sends rank r a tensor with tag 0, r receives it; then the same through gloo
    for group in (None, ctx.gloo):
        if ctx.rank == 0:
            for r in range(1, ctx.world):
                dist.send(make(torch.float32, r, (7,)), r, group=group)
        else:
            t = torch.zeros(7)
            dist.recv(t, 0, group=group)
            same(t, make(torch.float32, ctx.rank, (7,)), "recv from 0")
    if ctx.rank == 0:
        t = torch.ones(2, 3).t()  # non-contiguous send
        dist.send(t, 1)
    elif ctx.rank == 1:
        t = torch.zeros(3, 2)
        dist.recv(t, 0)
        same(t, torch.ones(3, 2), "non-contiguous send")
    dist.barrier()


def tags_and_nonblocking_exchanges(ctx):
    w = ctx.world
    right, left = (ctx.rank + 1) % w, (ctx.rank - 1) % w
    # every rank isends first, then irecvs: must not deadlock
    for group in (None, ctx.gloo):
        out = make(torch.float64, ctx.rank, (11,))
        inc = torch.zeros(11, dtype=torch.float64)
        s = dist.isend(out, right, group=group, tag=4)
        r = dist.irecv(inc, left, group=group, tag=4)
        s.wait()
        r.wait()
        same(inc, make(torch.float64, left, (11,)), "ring isend/irecv")
    # tags keep messages apart: sent as tag 2 then 1, received as 1 then 2
    if ctx.rank == 0:
        a = dist.isend(torch.full((3,), 2.0), 1, tag=2)
        b = dist.isend(torch.full((3,), 1.0), 1, tag=1)
        a.wait()
        b.wait()
    elif ctx.rank == 1:
        one, two = torch.zeros(3), torch.zeros(3)
        dist.recv(one, 0, tag=1)
        dist.recv(two, 0, tag=2)
        same(one, torch.full((3,), 1.0), "tag 1")
        same(two, torch.full((3,), 2.0), "tag 2")
    # batch_isend_irecv: both directions around the ring
    ops_in = [torch.zeros(5), torch.zeros(5)]
    ops = [dist.P2POp(dist.isend, torch.full((5,), float(ctx.rank)), right),
           dist.P2POp(dist.isend, torch.full((5,), float(ctx.rank)), left),
           dist.P2POp(dist.irecv, ops_in[0], left),
           dist.P2POp(dist.irecv, ops_in[1], right)]
    reqs = dist.batch_isend_irecv(ops)
    if tuple(int(v) for v in torch.__version__.split(".")[:2]) >= (2, 1):  # coll coalesces
        assert len(reqs) == 1, "batch_isend_irecv gave %d Works, not one" % len(reqs)
    for req in reqs:
        req.wait()
    same(ops_in[0], torch.full((5,), float(left)), "batch from left")
    same(ops_in[1], torch.full((5,), float(right)), "batch from right")
    dist.barrier()


def recv_from_any_source_reports_the_sender(ctx):
    for group in (None, ctx.gloo):
        if ctx.rank == 0:
            seen = []
            for _ in range(ctx.world - 1):
                t = torch.zeros(4)
                src = dist.recv(t, group=group, tag=9)
                same(t, torch.full((4,), float(src)), "any-source payload from %d" % src)
                seen.append(src)
            assert sorted(seen) == list(range(1, ctx.world)), seen
        else:
            dist.send(torch.full((4,), float(ctx.rank)), 0, group=group, tag=9)
        dist.barrier(group=group)


def send_from_a_thread_beside_a_waiting_all_reduce(ctx):
    # Rank 0's main thread waits in all_reduce while a second thread sends to rank 1, which
    # receives that before it joins the all_reduce: the send must not queue behind it.
    # Then the reverse: a receive waited for must not hold back another thread's all_reduce.
    import threading
    import time
    for group in (None, ctx.gloo):
        for numel in (256, 1 << 18):  # eager and rendezvous sizes (1 KiB, 1 MiB)
            x = torch.full((8,), float(ctx.rank))
            payload = make(torch.float32, 5, (numel,))
            if ctx.rank == 0:
                errors = []

                def send_later():
                    try:
                        time.sleep(0.2)  # the main thread is in all_reduce by now
                        dist.send(payload, 1, group=group, tag=6)
                    except Exception as e:  # reported below, on the main thread
                        errors.append(e)
                t = threading.Thread(target=send_later)
                t.start()
                dist.all_reduce(x, group=group)
                t.join()
                assert not errors, errors
            else:
                if ctx.rank == 1:
                    got = torch.zeros(numel)
                    dist.recv(got, 0, group=group, tag=6)
                    same(got, payload, "message sent beside the all_reduce")
                dist.all_reduce(x, group=group)
            same(x, torch.full((8,), float(sum(range(ctx.world)))), "all_reduce beside a send")
    # The other way round: rank 0 waits in recv while its second thread joins an all_reduce
    # that rank 1 must finish before it sends: the receive must not hold the all_reduce back.
    for group in (None, ctx.gloo):
        x = torch.full((8,), float(ctx.rank))
        payload = make(torch.float32, 6, (256,))
        if ctx.rank == 0:
            got = torch.zeros(256)
            errors = []

            def reduce_later():
                try:
                    time.sleep(0.2)  # the main thread is in recv by now
                    dist.all_reduce(x, group=group)
                except Exception as e:  # reported below, on the main thread
                    errors.append(e)
            t = threading.Thread(target=reduce_later)
            t.start()
            dist.recv(got, 1, group=group, tag=7)
            t.join()
            assert not errors, errors
            same(got, payload, "message sent after the all_reduce")
        else:
            dist.all_reduce(x, group=group)
            if ctx.rank == 1:
                dist.send(payload, 0, group=group, tag=7)
        same(x, torch.full((8,), float(sum(range(ctx.world)))), "all_reduce beside a recv")
    dist.barrier()


def p2p_bad_arguments_raise(ctx):
    # A send to oneself: torch 2.x refuses it in Python before any backend sees it, 1.13
    # leaves it to the backend (and 1.13's gloo crashes on it, so gloo is not asked).
    to_self = ("should not be the same as the rank" if torch.__version__ >= "2"
               else "is this rank")
    coll_harness.expect_raises(lambda: dist.send(torch.ones(1), ctx.rank), to_self)
    coll_harness.raises_like_gloo(ctx, lambda g: dist.recv(torch.ones(1), ctx.world + 1, group=g),
                                  "invalid peer")
    dist.barrier()


CASES = {f.__name__: f for f in [
    gather_and_scatter_match_gloo_from_every_root,
    all_to_all_uneven_and_list_match_gloo,
    send_recv_in_order_match_gloo,
    tags_and_nonblocking_exchanges,
    recv_from_any_source_reports_the_sender,
    send_from_a_thread_beside_a_waiting_all_reduce,
    p2p_bad_arguments_raise,
]}

if __name__ == "__main__":
    coll_harness.main(CASES)
