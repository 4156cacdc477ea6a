#!/usr/bin/python3
"""torch_step_compare: the training step time of two PyTorch programs over the `coll`
backend (torch_coll on libcoll) against PyTorch's own `gloo`, the same model, data and
optimizer on both, in the same rank processes; prints the median step time of each, the
ratio gloo/coll with its spread over rounds and a verdict against the target.

  bench/pytorch/torch_step_compare.py [--build DIR] [-n 2 4] [--models fsdp ddp]
                                      [--rounds 5] [--steps-ddp 200] [--steps-fsdp 20]
                                      [--warmup 3] [--quick]

The programs (CPU, float32, one thread per rank):
  fsdp  FSDP2 (torch.distributed.fsdp.fully_shard on each encoder layer, then the root) of
        a small transformer classifier: embedding (vocab 1024), 4 nn.TransformerEncoderLayer
        (d_model 128, 4 heads, feed-forward 512, no dropout), mean pooling, a 10-way head
        (0.93 M parameters); per-rank batch 8 sequences of 64 tokens; AdamW (lr 1e-3).
        Every step all-gathers each layer's parameters (forward, and again in backward:
        reshard_after_forward) and reduce-scatters its gradients. PyTorch 2.x only.
  ddp   DistributedDataParallel of the 784-256-256-10 MLP of bench/training/ddp_compare.sh:
        per-rank batch 64, SGD (lr 0.05, momentum 0.9); one all-reduce of 1.08 MB of
        gradients (DDP's buckets) a step.
The data are random (tokens, pixels, labels from a fixed seed per rank, a pool of 16
batches cycled): the step time does not depend on their values, and no data set is needed.

Method. Each rank process joins a "coll" and a "gloo" group over the same ranks (and the
default group, gloo, which only collects the figures) and builds one model per backend
from the same seed: DDP over one group each, FSDP2 over a DeviceMesh made from each group
(with different dim names; PyTorch's DeviceMesh equality ignores the group). A third
copy, "local", is the same model trained with no collective at all (each rank alone, not
wrapped): the step's compute on this machine with all ranks running, so that "over local"
(coll - local, gloo - local, medians of the rounds' differences) is what communication and
waiting for the other ranks add. A round runs the three back to back, coll, gloo, local in
even rounds and local, gloo, coll in odd ones: each runs --warmup steps (not timed), lines
the ranks up with a 4-byte all-reduce, then runs S steps; its figure is the elapsed time
/ S of the slowest rank. The coll and gloo models
see the same batches in the same order, so they stay the same model: the largest
difference between their parameters at the end is printed (0 at 2 ranks, where float32
averages of two do not depend on the order; rounding-level at 4). The table shows the
median over rounds [min-max]; the ratio is gloo's step time / coll's, the median of the
rounds' own ratios [their min-max]. Target (issues 15 and 42): >= 1.2x. Verdict on the median;
"k/R" says in how many rounds it held.

Exit status: 0 every target met, 1 a target missed, 2 bad options or no PyTorch/torch_coll,
3 a rank failed.
"""
import argparse
import os
import socket
import statistics
import sys
import time

TARGET = 1.2
POOL = 16  # batches per rank, cycled

# The transformer (fsdp) and the MLP (ddp).
VOCAB, DMODEL, HEADS, FF, LAYERS, SEQ, CLASSES, FSDP_BATCH = 1024, 128, 4, 512, 4, 64, 10, 8
DDP_BATCH = 64


def module_dir(build, torch_version):
    major = int(torch_version.split(".")[0])
    return os.path.join(build, "torch_coll", "torch2") if major >= 2 else os.path.join(build, "torch_coll")


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


def have_fsdp2():
    """Whether this torch has FSDP2 (fully_shard, DeviceMesh.from_group). Debian's torch
    1.13 on Python 3.11 cannot even import torch.distributed.fsdp (a dataclass error):
    any exception means no."""
    try:
        import torch.distributed.fsdp as fsdp
        from torch.distributed.device_mesh import DeviceMesh
        return hasattr(fsdp, "fully_shard") and hasattr(DeviceMesh, "from_group")
    except Exception:
        return False


def make_transformer(torch):
    nn = torch.nn

    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, DMODEL)
            self.layers = nn.ModuleList([
                nn.TransformerEncoderLayer(DMODEL, HEADS, dim_feedforward=FF, dropout=0.0,
                                           batch_first=True) for _ in range(LAYERS)])
            self.head = nn.Linear(DMODEL, CLASSES)

        def forward(self, tokens):
            x = self.embed(tokens)
            for layer in self.layers:
                x = layer(x)
            return self.head(x.mean(dim=1))

    return Classifier()


def make_mlp(torch):
    nn = torch.nn
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


class Program:
    """One backend's copy of a model, its optimizer and its step."""

    def __init__(self, torch, dist, kind, name, group, rank):
        self.torch, self.kind, self.steps_done = torch, kind, 0
        torch.manual_seed(1234)  # the same initial model on every rank and for both backends
        if kind == "ddp":
            from torch.nn.parallel import DistributedDataParallel as DDP
            model = make_mlp(torch)
            self.model = model if group is None else DDP(model, process_group=group)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.05, momentum=0.9)
            gen = torch.Generator().manual_seed(77 + rank)
            self.batches = [(torch.randn(DDP_BATCH, 784, generator=gen),
                             torch.randint(0, 10, (DDP_BATCH,), generator=gen))
                            for _ in range(POOL)]
        elif group is None:
            model = make_transformer(torch)
        else:
            from torch.distributed.device_mesh import DeviceMesh
            from torch.distributed.fsdp import fully_shard
            mesh = DeviceMesh.from_group(group, "cpu", mesh_dim_names=(name + "_dp",))
            model = make_transformer(torch)
            for layer in model.layers:
                fully_shard(layer, mesh=mesh)
            fully_shard(model, mesh=mesh)
            want = group.group_name
            for pname, p in model.named_parameters():  # every shard on this backend's group
                got = p.device_mesh.get_group().group_name
                if got != want:
                    raise RuntimeError(f"{name}: parameter {pname} on group {got}, not {want}")
        if kind == "fsdp":
            self.model = model
            self.opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            gen = torch.Generator().manual_seed(77 + rank)
            self.batches = [(torch.randint(0, VOCAB, (FSDP_BATCH, SEQ), generator=gen),
                             torch.randint(0, CLASSES, (FSDP_BATCH,), generator=gen))
                            for _ in range(POOL)]

    def step(self):
        x, y = self.batches[self.steps_done % POOL]
        self.steps_done += 1
        self.opt.zero_grad(set_to_none=True)
        loss = self.torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss

    def local_params(self):
        out = []
        for p in self.model.parameters():
            t = p.to_local() if hasattr(p, "to_local") else p
            out.append(t.detach())
        return out


def worker(rank, args, nranks, port, queue):
    import torch
    import torch.distributed as dist
    from datetime import timedelta
    torch.set_num_threads(1)
    import_torch_coll(args.build)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    timeout = timedelta(seconds=args.timeout)
    dist.init_process_group("gloo", rank=rank, world_size=nranks, timeout=timeout)
    groups = {"coll": dist.new_group(backend="coll", timeout=timeout),
              "gloo": dist.new_group(backend="gloo", timeout=timeout)}
    # "local": the same model and steps with no collective at all (each rank its own copy).
    measured = {"coll": groups["coll"], "gloo": groups["gloo"], "local": None}
    token = torch.zeros(1)
    results = {}  # kind -> {"rounds": [(round, backend, ms)], "diff": float, "steps": int}
    for kind in args.models:
        progs = {name: Program(torch, dist, kind, name, group, rank)
                 for name, group in measured.items()}
        steps = args.steps_ddp if kind == "ddp" else args.steps_fsdp
        per_round = []
        for rnd in range(args.rounds):
            order = ("coll", "gloo", "local") if rnd % 2 == 0 else ("local", "gloo", "coll")
            for name in order:
                prog = progs[name]
                for _ in range(args.warmup):
                    prog.step()
                dist.all_reduce(token, group=measured[name])  # line the ranks up (untimed)
                t0 = time.perf_counter()
                for _ in range(steps):
                    loss = prog.step()
                per_round.append((rnd, name, (time.perf_counter() - t0) * 1e3 / steps))
                if not torch.isfinite(loss):
                    raise RuntimeError(f"rank {rank}: {kind} over {name}: loss {loss.item()}")
        t = torch.tensor([ms for _, _, ms in per_round], dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank's time
        # Both copies trained on the same batches: how far apart they ended.
        diff = max((a.double() - b.double()).abs().max().item()
                   for a, b in zip(progs["coll"].local_params(), progs["gloo"].local_params()))
        d = torch.tensor([diff], dtype=torch.float64)
        dist.all_reduce(d, op=dist.ReduceOp.MAX)
        results[kind] = {"rounds": [(r, n, ms) for (r, n, _), ms in zip(per_round, t.tolist())],
                         "diff": d.item(), "steps": progs["coll"].steps_done}
        del progs
    for g in groups.values():
        dist.destroy_process_group(g)
    dist.destroy_process_group()
    if rank == 0:
        queue.put(results)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_state():
    load = os.getloadavg()
    steal = 0
    try:
        with open("/proc/stat") as f:
            steal = int(f.readline().split()[8])
    except (OSError, IndexError, ValueError):
        pass
    return load, steal


def fmt_range(values, form):
    return "%s [%s-%s]" % (form % statistics.median(values), form % min(values), form % max(values))


TITLES = {
    "fsdp": f"FSDP2 transformer ({LAYERS} layers, d_model {DMODEL}, batch {FSDP_BATCH}x{SEQ} tokens/rank, AdamW)",
    "ddp": f"DDP MLP 784-256-256-10 (batch {DDP_BATCH}/rank, SGD momentum 0.9)",
}


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=None,
                    help="meson build directory (its torch_coll/ or torch_coll/torch2/ for "
                         "torch 2.x); default: torch_coll from PYTHONPATH, else ./build")
    ap.add_argument("-n", "--ranks", type=int, nargs="+", default=None, help="default 2 4")
    ap.add_argument("--models", nargs="+", choices=("fsdp", "ddp"), default=None,
                    help="default fsdp ddp (fsdp only where torch has fully_shard)")
    ap.add_argument("--rounds", type=int, default=None, help="default 5")
    ap.add_argument("--steps-ddp", type=int, default=None, help="timed DDP steps a round (200)")
    ap.add_argument("--steps-fsdp", type=int, default=None, help="timed FSDP2 steps a round (20)")
    ap.add_argument("-w", "--warmup", type=int, default=None,
                    help="untimed steps before each timed run (default 3)")
    ap.add_argument("--timeout", type=int, default=300, help="groups' timeout, seconds")
    ap.add_argument("--quick", action="store_true",
                    help="a plumbing check: 2 rounds of 5 DDP and 2 FSDP2 steps, 1 warm-up")
    args = ap.parse_args()
    quick = dict(ranks=[2, 4], rounds=2, steps_ddp=5, steps_fsdp=2, warmup=1)
    full = dict(ranks=[2, 4], rounds=5, steps_ddp=200, steps_fsdp=20, warmup=3)
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if (args.rounds < 1 or args.steps_ddp < 1 or args.steps_fsdp < 1 or args.warmup < 0
            or any(n < 2 for n in args.ranks)):
        ap.error("need --rounds and steps >= 1, --warmup >= 0, ranks >= 2")
    try:
        import torch
        import torch.multiprocessing as mp
        import torch.distributed  # noqa: F401
    except ImportError as e:
        print(f"torch_step_compare: {sys.executable} cannot import PyTorch ({e})", file=sys.stderr)
        return 2
    try:
        where = import_torch_coll(args.build)
    except ImportError as e:
        print(f"torch_step_compare: torch_coll for torch {torch.__version__} not found ({e}); "
              "give --build DIR or PYTHONPATH", file=sys.stderr)
        return 2
    if args.build:
        args.build = os.path.abspath(args.build)
    skipped = []
    if args.models is None:
        args.models = ["fsdp", "ddp"]
        if not have_fsdp2():
            args.models = ["ddp"]
            skipped.append(f"fsdp: torch {torch.__version__} has no "
                           "torch.distributed.fsdp.fully_shard (FSDP2): left out")
    elif "fsdp" in args.models and not have_fsdp2():
        print(f"torch_step_compare: torch {torch.__version__} has no fully_shard (FSDP2)",
              file=sys.stderr)
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    load0, steal0 = host_state()
    t0 = time.time()
    print(f"torch_step_compare: {sys.executable}, torch {torch.__version__}, torch_coll {where}")
    print("load average at start: %.2f %.2f %.2f on %d CPUs" % (load0 + (os.cpu_count(),)))
    for line in skipped:
        print(line)
    sys.stdout.flush()
    ctx = mp.get_context("spawn")
    table = {}  # (kind, n) -> results
    for n in args.ranks:
        queue = ctx.SimpleQueue()
        try:
            mp.spawn(worker, args=(args, n, free_port(), queue), nprocs=n, join=True)
        except Exception as e:  # a rank raised or died: its message is above
            print(f"torch_step_compare: {n} ranks failed: {e}", file=sys.stderr)
            return 3
        for kind, res in queue.get().items():
            table[(kind, n)] = res
    met = cells = 0
    misses = []
    for kind in args.models:
        steps = args.steps_ddp if kind == "ddp" else args.steps_fsdp
        print(f"\n# {TITLES[kind]}: step time in ms, median [min-max] over {args.rounds} "
              f"rounds of {steps} timed steps per backend ({args.warmup} warm-up steps before "
              "each excluded); same processes, order alternating")
        print("%5s  %-26s %-26s %-22s %-8s %-12s %-26s %-20s %s" % (
            "ranks", "coll ms/step", "gloo ms/step", "ratio gloo/coll", "target", "verdict",
            "local ms/step (no comm)", "over local coll/gloo", "max |coll-gloo| param"))
        for n in args.ranks:
            res = table[(kind, n)]
            by = {(r, name): ms for r, name, ms in res["rounds"]}
            rounds = sorted({r for r, _, _ in res["rounds"]})
            c = [by[(r, "coll")] for r in rounds]
            g = [by[(r, "gloo")] for r in rounds]
            loc = [by[(r, "local")] for r in rounds]
            over_c = statistics.median(by[(r, "coll")] - by[(r, "local")] for r in rounds)
            over_g = statistics.median(by[(r, "gloo")] - by[(r, "local")] for r in rounds)
            ratios = [by[(r, "gloo")] / by[(r, "coll")] for r in rounds]
            ratio = statistics.median(ratios)
            ok = ratio >= TARGET
            cells += 1
            met += ok
            if not ok:
                misses.append(f"{kind} {n} ranks {ratio:.2f}x")
            print("%5d  %-26s %-26s %-22s %-8s %-12s %-26s %-20s %.3g after %d steps" % (
                n, fmt_range(c, "%.2f"), fmt_range(g, "%.2f"),
                "%.2fx [%.2f-%.2f]" % (ratio, min(ratios), max(ratios)), ">=%.1fx" % TARGET,
                "%s (%d/%d)" % ("PASS" if ok else "MISS", sum(x >= TARGET for x in ratios),
                                len(ratios)), fmt_range(loc, "%.2f"),
                "%+.2f / %+.2f" % (over_c, over_g), res["diff"], res["steps"]))
    load1, steal1 = host_state()
    took = time.time() - t0
    print("\nload average at end: %.2f %.2f %.2f; host steal %.0f%% of CPU time; %.0f s" % (
        load1 + (100.0 * (steal1 - steal0) / (100.0 * max(took, 1e-9) * (os.cpu_count() or 1)), took)))
    print("targets met in %d of %d cells%s" % (met, cells,
                                                 ("; missed: " + ", ".join(misses)) if misses else ""))
    return 0 if met == cells else 1


if __name__ == "__main__":
    sys.exit(main())
