#!/usr/bin/python3
"""torch_allreduce: torch.distributed.all_reduce through the `coll` backend (torch_coll,
libcoll) and through PyTorch's own `gloo`, on the same CPU float32 tensors, side by side.

Every rank process joins both: the default group is gloo, and a second group over the same
ranks uses coll. Rounds alternate the two at each size (gloo, coll, gloo, coll, ...) so a
noisy spell of this shared machine hits both; each round's figure is the median of its
timed iterations (each timed alone after a barrier of its own backend, max over ranks),
and the table shows the median over rounds with the spread (min-max over rounds). busbw
= algbw * 2(n-1)/n, as nccl-tests and allreduce_bench print it; ratio = coll's busbw /
gloo's (equally gloo's time / coll's). Every result is checked (sum of rank-dependent
values, exact in float32): a wrong element fails the run.

  bench/torch_allreduce.py [--build DIR] [-n RANKS...] [-b 8] [-e 64M] [-f 8] [--rounds 5]

Targets (issue 15, this 2-core machine): >= 1.5x gloo's busbw from 1 MiB up, and an 8-byte
all_reduce taking <= half of gloo's time.
"""
import argparse
import os
import socket
import statistics
import sys
import time


def parse_size(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    if text and text[-1].lower() in units:
        return int(float(text[:-1]) * units[text[-1].lower()])
    return int(text)


def human(nbytes):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= div and nbytes % div == 0:
            return f"{nbytes // div} {unit}"
    return f"{nbytes} B"


def sizes(args):
    """minbytes, times stepfactor each step, and maxbytes itself at the end."""
    out, n = [], args.minbytes
    while n <= args.maxbytes:
        out.append(n)
        n *= args.stepfactor
    if out and out[-1] != args.maxbytes:
        out.append(args.maxbytes)
    return out


def iterations(nbytes):
    """Enough timed iterations for a stable median, fewer for the big sizes."""
    if nbytes <= 64 << 10:
        return 50
    if nbytes <= 4 << 20:
        return 12
    return 4


def time_one(dist, group, data, expect, rank):
    """Median microseconds of separately timed all_reduces of data over group."""
    import torch
    samples = []
    for _ in range(iterations(data.numel() * 4)):
        data.fill_(float(rank + 1))
        dist.barrier(group=group)
        t0 = time.perf_counter()
        dist.all_reduce(data, group=group)
        samples.append((time.perf_counter() - t0) * 1e6)
        if not torch.equal(data, expect):
            bad = int((data != expect).sum().item())
            raise RuntimeError(f"rank {rank}: {bad} wrong elements of {data.numel()}")
    return statistics.median(samples)


def worker(rank, args, port, queue):
    import torch
    import torch.distributed as dist
    from datetime import timedelta
    torch.set_num_threads(1)
    sys.path.insert(0, os.path.join(args.build, "torch_coll"))
    import torch_coll  # noqa: F401  (registers the "coll" backend)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=args.nranks,
                            timeout=timedelta(seconds=120))
    coll = dist.new_group(backend="coll")
    groups = {"gloo": None, "coll": coll}
    n = args.nranks
    table = {}  # (backend, bytes) -> [per-round median us]
    for nbytes in sizes(args):
        count = max(1, nbytes // 4)
        data = torch.empty(count, dtype=torch.float32)
        expect = torch.full((count,), float(n * (n + 1) // 2), dtype=torch.float32)
        for name, group in groups.items():  # warm-up: connections, pages, caches
            for _ in range(3):
                dist.all_reduce(data, group=group)
        for _ in range(args.rounds):
            for name, group in groups.items():
                us = time_one(dist, group, data, expect, rank)
                t = torch.tensor([us], dtype=torch.float64)
                dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's median
                table.setdefault((name, nbytes), []).append(t.item())
    dist.destroy_process_group(coll)
    dist.destroy_process_group()
    if rank == 0:
        queue.put(table)


def spread(values):
    return f"{min(values):.1f}-{max(values):.1f}"


def report(args, table):
    n = args.nranks
    factor = 2.0 * (n - 1) / n
    print(f"# {n} ranks: torch.distributed.all_reduce, float32 sum, in place; time in us "
          f"(median over {args.rounds} rounds [min-max]), busbw in GB/s")
    print("%10s %24s %24s %9s %9s %7s" % ("bytes", "gloo us", "coll us", "gloo bw",
                                          "coll bw", "ratio"))
    for nbytes in sizes(args):
        g = table[("gloo", nbytes)]
        c = table[("coll", nbytes)]
        gm, cm = statistics.median(g), statistics.median(c)
        real = max(1, nbytes // 4) * 4
        gbw = real / 1e3 / gm * factor
        cbw = real / 1e3 / cm * factor
        print("%10s %9.1f [%12s] %9.1f [%12s] %9.3f %9.3f %6.2fx" %
              (human(nbytes), gm, spread(g), cm, spread(c), gbw, cbw, gm / cm))
    sys.stdout.flush()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.path.join(os.path.dirname(here), "build"),
                    help="meson build directory holding torch_coll/ (default: build)")
    ap.add_argument("-n", "--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("-b", "--minbytes", type=parse_size, default=8)
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=64 << 20)
    ap.add_argument("-f", "--stepfactor", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if args.stepfactor < 2 or args.minbytes < 1 or args.rounds < 1:
        ap.error("need -f >= 2, -b >= 1 and --rounds >= 1")
    try:
        import torch.multiprocessing as mp
    except ImportError:
        print("torch_allreduce: PyTorch is not installed (apt-get install python3-torch)",
              file=sys.stderr)
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    for n in args.ranks:
        args.nranks = n
        ctx = mp.get_context("spawn")
        queue = ctx.SimpleQueue()
        mp.spawn(worker, args=(args, free_port(), queue), nprocs=n, join=True)
        report(args, queue.get())
    return 0


if __name__ == "__main__":
    sys.exit(main())
