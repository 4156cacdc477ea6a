#!/usr/bin/python3
"""torch_allreduce: torch.distributed.all_reduce through the `coll` backend (torch_coll on
libcoll) against PyTorch's own `gloo`, on the same torch, the same CPU float32 tensors and
the same rank processes; prints per size both times and bus bandwidths, the ratio and a
verdict against the targets, with the median and the min-max spread over rounds.

  bench/pytorch/torch_allreduce.py [--build DIR] [-n 2 4] [-b 8] [-e 64M] [-f 2]
                                   [--rounds 5] [-i 100] [--min-iters 5] [--fresh] [--quick]

Run it with the interpreter whose torch is to be measured: PyTorch 2.x from ./dev's
virtual environment (its torch_coll is BUILD/torch_coll/torch2) or Debian's 1.13 as
/usr/bin/python3 (BUILD/torch_coll); torch_compare.sh beside it picks both for a build. With
no --build, `import torch_coll` is tried from PYTHONPATH first, then ./build.

Method. Each rank process joins three groups over the same ranks: a "coll" group and a
"gloo" group that are measured, and the default group (gloo) that only collects the
figures. A round walks every size; at each size both backends run back to back, coll
first in even rounds and gloo first in odd ones, so that a noisy spell of this shared
machine hits both and neither always follows the other. Rounds share the processes (the
same CPUs, memory and torch state for both backends); --fresh starts new rank processes
for every round instead, which also samples where the scheduler puts them. A backend's
figure for a round is the median of its timed iterations, each timed alone after a 4-byte
all-reduce on the same group lines the ranks up (as allreduce_bench does), and the
slowest rank's median. Each size gets warm-up calls on both backends first in every round.
The table: median over rounds [min-max]; busbw = bytes / time * 2(n-1)/n (nccl-tests);
ratio = gloo's time / coll's (= coll's busbw / gloo's), the median of the rounds' own
ratios [their min-max]. Every result is checked exactly (rank-dependent integers in
float32): a wrong element fails the run.

Targets (issues 15 and 42): coll's busbw >= 1.5x gloo's from 1 MiB up; coll's time <= 0.5x gloo's
at 8 B (ratio >= 2). Verdict on the median ratio; "k/R" says in how many rounds it held.
Exit status: 0 every target met, 1 a target missed, 2 bad options or no PyTorch/torch_coll,
3 a rank failed (an error or a wrong result).
"""
import argparse
import os
import socket
import statistics
import sys
import time

TARGET_BW = 1.5           # coll busbw / gloo busbw, from TARGET_FROM bytes up
TARGET_FROM = 1 << 20
TARGET_LAT = 2.0          # gloo time / coll time at 8 bytes (coll <= 0.5x gloo)
BACKENDS = ("coll", "gloo")


def parse_size(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip()
    if text and text[-1].lower() in units:
        return int(float(text[:-1]) * units[text[-1].lower()])
    return int(text)


def human(nbytes):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= div and nbytes % div == 0:
            return f"{nbytes // div} {unit}"
    return f"{nbytes} B"


def size_list(args):
    """minbytes, times stepfactor each step, and maxbytes itself at the end."""
    out, n = [], args.minbytes
    while n <= args.maxbytes:
        out.append(n)
        n *= args.stepfactor
    if out and out[-1] != args.maxbytes:
        out.append(args.maxbytes)
    return out


def iterations(args, nbytes):
    """args.iters up to 64 KiB, then fewer as the size grows (about the same bytes per
    size), never under args.min_iters."""
    if nbytes <= 64 << 10:
        return args.iters
    return max(args.min_iters, min(args.iters, args.iters * (64 << 10) // nbytes))


def target(nbytes):
    """(wanted ratio, wording) or None where no target applies."""
    if nbytes == 8:
        return TARGET_LAT, "time<=0.5x"
    if nbytes >= TARGET_FROM:
        return TARGET_BW, "bw>=1.5x"
    return None


def module_dir(build, torch_version):
    """Where a build keeps the torch_coll made for this torch: torch2/ for 2.x."""
    major = int(torch_version.split(".")[0])
    sub = os.path.join(build, "torch_coll", "torch2") if major >= 2 else os.path.join(build, "torch_coll")
    return sub


def import_torch_coll(build):
    """Imports torch_coll (registers "coll") from BUILD when given, else from the path or
    ./build; returns the module's file."""
    import torch
    if build:
        sys.path.insert(0, module_dir(build, torch.__version__))
        import torch_coll
        return torch_coll.__file__
    try:
        import torch_coll
    except ImportError:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        sys.path.insert(0, module_dir(os.path.join(root, "build"), torch.__version__))
        import torch_coll
    return torch_coll.__file__


def time_backend(dist, torch, group, data, src, expect, token, iters, rank, name):
    """Median microseconds of `iters` all_reduces of data over group, each timed alone."""
    samples = []
    for _ in range(iters):
        data.copy_(src)
        dist.all_reduce(token, group=group)  # line the ranks up (untimed)
        t0 = time.perf_counter()
        dist.all_reduce(data, group=group)
        samples.append((time.perf_counter() - t0) * 1e6)
        if not torch.equal(data, expect):
            bad = int((data != expect).sum().item())
            raise RuntimeError(f"rank {rank}: {name}: {bad} wrong elements of {data.numel()}")
    return statistics.median(samples)


def worker(rank, args, nranks, port, rounds, queue):
    import torch
    import torch.distributed as dist
    from datetime import timedelta
    torch.set_num_threads(1)
    where = import_torch_coll(args.build)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    timeout = timedelta(seconds=args.timeout)
    dist.init_process_group("gloo", rank=rank, world_size=nranks, timeout=timeout)
    groups = {"coll": dist.new_group(backend="coll", timeout=timeout),
              "gloo": dist.new_group(backend="gloo", timeout=timeout)}
    token = torch.zeros(1, dtype=torch.float32)
    sizes = size_list(args)
    records = []  # (round, backend, bytes, us)
    for rnd in rounds:
        order = BACKENDS if rnd % 2 == 0 else BACKENDS[::-1]
        medians = []
        for nbytes in sizes:
            count = max(1, nbytes // 4)
            # Small integers, different on each rank and element: sums are exact in float32.
            base = torch.arange(count, dtype=torch.float32).remainder_(251)
            src = base + float(rank)
            expect = base * nranks + float(nranks * (nranks - 1) // 2)
            data = torch.empty_like(src)
            for name in order:  # warm-up: connections, pages, caches, schedules
                for _ in range(args.warmup):
                    data.copy_(src)
                    dist.all_reduce(data, group=groups[name])
            for name in order:
                us = time_backend(dist, torch, groups[name], data, src, expect, token,
                                  iterations(args, nbytes), rank, name)
                medians.append((name, nbytes, us))
            del base, src, expect, data
        t = torch.tensor([m[2] for m in medians], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's median
        records += [(rnd, name, nbytes, us) for (name, nbytes, _), us in zip(medians, t.tolist())]
    for g in groups.values():
        dist.destroy_process_group(g)
    dist.destroy_process_group()
    if rank == 0:
        queue.put((torch.__version__, where, records))


def fmt_range(values, form):
    return "%s [%s-%s]" % (form % statistics.median(values), form % min(values), form % max(values))


def report(args, nranks, version, where, records, mode):
    """Prints the table for one rank count; returns (met, cells, misses)."""
    factor = 2.0 * (nranks - 1) / nranks
    by = {}
    for rnd, name, nbytes, us in records:
        by.setdefault((name, nbytes), {})[rnd] = us
    rounds = sorted({r[0] for r in records})
    print(f"\n# {nranks} ranks: torch {version}, torch_coll {where}")
    print(f"# all_reduce float32 sum in place, {len(rounds)} rounds ({mode}), "
          f"{args.iters} timed iterations a round up to 64 KiB (fewer above, >= {args.min_iters}), "
          f"{args.warmup} warm-up; time us and busbw GB/s: median [min-max] over rounds")
    head = "%9s  %-27s %-27s %-30s %-30s %-22s %-11s %s" % (
        "size", "coll us", "gloo us", "coll busbw", "gloo busbw", "ratio gloo/coll",
        "target", "verdict")
    print(head)
    met = cells = 0
    misses = []
    for nbytes in size_list(args):
        c, g = by[("coll", nbytes)], by[("gloo", nbytes)]
        real = max(1, nbytes // 4) * 4
        cus, gus = [c[r] for r in rounds], [g[r] for r in rounds]
        cbw = [real / 1e3 / u * factor for u in cus]
        gbw = [real / 1e3 / u * factor for u in gus]
        ratios = [g[r] / c[r] for r in rounds]
        ratio = statistics.median(ratios)
        tgt = target(nbytes)
        if tgt is None:
            tword, verdict = "-", "-"
        else:
            cells += 1
            held = sum(1 for x in ratios if x >= tgt[0])
            ok = ratio >= tgt[0]
            met += ok
            tword = tgt[1]
            verdict = "%s (%d/%d)" % ("PASS" if ok else "MISS", held, len(ratios))
            if not ok:
                misses.append(f"{nranks} ranks {human(nbytes)} {ratio:.2f}x")
        print("%9s  %-27s %-27s %-30s %-30s %-22s %-11s %s" % (
            human(nbytes), fmt_range(cus, "%.1f"), fmt_range(gus, "%.1f"),
            fmt_range(cbw, "%.3g"), fmt_range(gbw, "%.3g"),
            "%.2fx [%.2f-%.2f]" % (ratio, min(ratios), max(ratios)), tword, verdict))
    sys.stdout.flush()
    return met, cells, misses


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_state():
    """Load averages and the steal ticks so far (a VM's host taking CPU time)."""
    load = os.getloadavg()
    steal = 0
    try:
        with open("/proc/stat") as f:
            steal = int(f.readline().split()[8])
    except (OSError, IndexError, ValueError):
        pass
    return load, steal


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=None,
                    help="meson build directory (its torch_coll/ or torch_coll/torch2/ for "
                         "torch 2.x); default: torch_coll from PYTHONPATH, else ./build")
    ap.add_argument("-n", "--ranks", type=int, nargs="+", default=None,
                    help="rank counts (default 2 4)")
    ap.add_argument("-b", "--minbytes", type=parse_size, default=None, help="default 8")
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=None, help="default 64M")
    ap.add_argument("-f", "--stepfactor", type=int, default=None, help="default 2")
    ap.add_argument("--rounds", type=int, default=None, help="default 5")
    ap.add_argument("-i", "--iters", type=int, default=None,
                    help="timed iterations a round up to 64 KiB (default 100)")
    ap.add_argument("--min-iters", type=int, default=None,
                    help="timed iterations a round at the largest sizes (default 5)")
    ap.add_argument("-w", "--warmup", type=int, default=None,
                    help="warm-up calls per size, backend and round (default 2)")
    ap.add_argument("--fresh", action="store_true",
                    help="new rank processes for every round (default: one set per rank count)")
    ap.add_argument("--timeout", type=int, default=300, help="groups' timeout, seconds")
    ap.add_argument("--quick", action="store_true",
                    help="a plumbing check: 8 B, 256 B, 8 KiB, 256 KiB, 1 MiB, 2 rounds of "
                         "5 iterations (options given still apply)")
    args = ap.parse_args()
    quick = dict(ranks=[2, 4], minbytes=8, maxbytes=1 << 20, stepfactor=32, rounds=2,
                 iters=5, min_iters=2, warmup=1)
    full = dict(ranks=[2, 4], minbytes=8, maxbytes=64 << 20, stepfactor=2, rounds=5,
                iters=100, min_iters=5, warmup=2)
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if (args.stepfactor < 2 or args.minbytes < 1 or args.maxbytes < args.minbytes
            or args.rounds < 1 or args.iters < 1 or args.min_iters < 1 or args.warmup < 0
            or any(n < 2 for n in args.ranks)):
        ap.error("need -f >= 2, 1 <= -b <= -e, --rounds/-i/--min-iters >= 1, -w >= 0, ranks >= 2")
    try:
        import torch
        import torch.multiprocessing as mp
        import torch.distributed  # noqa: F401
    except ImportError as e:
        print(f"torch_allreduce: {sys.executable} cannot import PyTorch ({e})", file=sys.stderr)
        return 2
    try:
        where = import_torch_coll(args.build)
    except ImportError as e:
        print(f"torch_allreduce: torch_coll for torch {torch.__version__} not found ({e}); "
              "give --build DIR or PYTHONPATH", file=sys.stderr)
        return 2
    if args.build:  # the rank processes must find the same module
        args.build = os.path.abspath(args.build)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    load0, steal0 = host_state()
    t0 = time.time()
    print(f"torch_allreduce: {sys.executable}, torch {torch.__version__}, torch_coll {where}")
    print("load average at start: %.2f %.2f %.2f on %d CPUs" % (load0 + (os.cpu_count(),)))
    sys.stdout.flush()
    met = cells = 0
    misses = []
    ctx = mp.get_context("spawn")
    for n in args.ranks:
        records = []
        plans = [[r] for r in range(args.rounds)] if args.fresh else [list(range(args.rounds))]
        for rounds in plans:
            queue = ctx.SimpleQueue()
            try:
                mp.spawn(worker, args=(args, n, free_port(), rounds, queue), nprocs=n, join=True)
            except Exception as e:  # a rank raised or died: its message is above
                print(f"torch_allreduce: {n} ranks failed: {e}", file=sys.stderr)
                return 3
            version, where, got = queue.get()
            records += got
        m, c, miss = report(args, n, version, where, records,
                            "fresh processes each round" if args.fresh else
                            "same processes, order alternating")
        met, cells, misses = met + m, cells + c, misses + miss
    load1, steal1 = host_state()
    took = time.time() - t0
    print("\nload average at end: %.2f %.2f %.2f; host steal %.0f%% of CPU time; %.0f s" % (
        load1 + (100.0 * (steal1 - steal0) / (100.0 * max(took, 1e-9) * (os.cpu_count() or 1)), took)))
    print("targets met in %d of %d cells%s" % (met, cells,
                                                 ("; missed: " + ", ".join(misses)) if misses else ""))
    return 0 if met == cells else 1


if __name__ == "__main__":
    sys.exit(main())
