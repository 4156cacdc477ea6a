#!/usr/bin/python3
"""ref_torch: PyTorch's all-reduce over its gloo backend (CPU tensors, float32 sum), timed
like allreduce_bench (median of separately timed iterations after a barrier, max over
ranks) and printed in the same columns (in-place: torch reduces in place).

One process per rank with RANK and WORLD_SIZE set (collrun does). Rendezvous through a
file: REF_TORCH_STORE (default /tmp/ref_torch.<COLL_JOB_TOKEN or MASTER_PORT>), because
collrun's own store already holds MASTER_PORT.
"""
import argparse
import os
import statistics
import sys
import time


def parse_size(text):
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    if text and text[-1].lower() in units:
        return int(float(text[:-1]) * units[text[-1].lower()])
    return int(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-b", "--minbytes", type=parse_size, default=8)
    ap.add_argument("-e", "--maxbytes", type=parse_size, default=8)
    ap.add_argument("-f", "--stepfactor", type=int, default=2)
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup_iters", type=int, default=5)
    args = ap.parse_args()
    try:
        import torch
        import torch.distributed as dist
    except ImportError:
        print("ref_torch: PyTorch is not installed (apt-get install python3-torch)",
              file=sys.stderr)
        return 2
    rank = int(os.environ["RANK"])
    size = int(os.environ["WORLD_SIZE"])
    tag = os.environ.get("COLL_JOB_TOKEN") or os.environ.get("MASTER_PORT", "0")
    store = os.environ.get("REF_TORCH_STORE") or f"/tmp/ref_torch.{tag}"
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank,
                            world_size=size)
    if rank == 0:
        print(f"# ref_torch: torch {torch.__version__} distributed all_reduce, gloo backend, "
              f"nRanks {size}, in-place")
        print(f"# time: MEDIAN of {args.iters} iterations, each timed alone after a barrier, "
              "max over ranks; busbw = algbw * 2(n-1)/n")
        print("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s" %
              ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"))
    factor = 2.0 * (size - 1) / size
    nbytes = args.minbytes
    total, rows = 0.0, 0
    while nbytes <= args.maxbytes:
        count = nbytes // 4
        data = torch.ones(count, dtype=torch.float32)
        for _ in range(args.warmup_iters):
            dist.all_reduce(data)
        samples = []
        for _ in range(args.iters):
            data.fill_(1.0)
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(data)
            samples.append((time.perf_counter() - t0) * 1e6)
        wrong = int((data != float(size)).sum().item())
        stats = torch.tensor([statistics.median(samples)], dtype=torch.float64)
        dist.all_reduce(stats, op=dist.ReduceOp.MAX)
        wrong_t = torch.tensor([wrong], dtype=torch.int64)
        dist.all_reduce(wrong_t)
        t_us = stats.item()
        algbw = count * 4 / 1e3 / t_us if t_us > 0 else 0.0
        busbw = algbw * factor
        if rank == 0:
            ts = "%7.0f" % t_us if t_us >= 10000 else ("%7.1f" % t_us if t_us >= 100 else
                                                        "%7.2f" % t_us)
            print("%12d  %12d  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %5d" %
                  (count * 4, count, "float", "sum", -1, ts, algbw, busbw, wrong_t.item()))
        total += busbw
        rows += 1
        nxt = nbytes * args.stepfactor if args.stepfactor > 1 else nbytes + 1
        if nxt <= nbytes:
            break
        nbytes = nxt
    if rank == 0:
        print("# Avg bus bandwidth    : %g \n#" % (total / rows if rows else 0.0))
    dist.destroy_process_group()
    if rank == 0:
        try:
            os.unlink(store)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
