"""Runs the torch "coll" backend tests as real rank processes: the parent starts one
Python process per rank (MASTER_ADDR/MASTER_PORT on a free port, RANK, WORLD_SIZE), each
joins a default "coll" group and a "gloo" group over the same ranks, runs the named cases
and reports each; the parent enforces a deadline on everything and fails on any error."""
import datetime
import os
import socket
import subprocess
import sys
import tempfile
import time
import traceback

DEADLINE_S = float(os.environ.get("TORCH_COLL_TEST_DEADLINE_S", "120"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script, world, args, timeout_s=DEADLINE_S, env_extra=None):
    """Starts `world` ranks of `script` with `args`; returns [(returncode, output)] per rank.
    A rank still running at the deadline is killed (returncode None). Each rank writes to a
    file of its own, not a pipe: pipes read one rank after the other would block a later
    rank in write() once it printed a pipe's worth (64 KiB) before the earlier ranks ended,
    which looks like a rank stuck outside libcoll to its peers."""
    port = free_port()
    env = dict(os.environ)
    env.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                "WORLD_SIZE": str(world), "OMP_NUM_THREADS": "1"})
    env.update(env_extra or {})
    procs = []
    for rank in range(world):
        env_rank = dict(env, RANK=str(rank), LOCAL_RANK=str(rank))
        log = tempfile.TemporaryFile()
        procs.append((subprocess.Popen([sys.executable, script, "--rank-process"] + list(args),
                                       env=env_rank, stdout=log, stderr=subprocess.STDOUT),
                      log))
    end = time.monotonic() + timeout_s
    results = []
    for p, log in procs:
        left = max(0.1, end - time.monotonic())
        try:
            p.wait(timeout=left)
            rc, tail = p.returncode, ""
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            rc, tail = None, "\n[killed at the %.0f s deadline]" % timeout_s
        log.seek(0)
        out = log.read().decode("utf-8", "replace")
        log.close()
        results.append((rc, out + tail))
    return results


class Ctx:
    """What a case gets in a rank process: its rank, the world size, the coll group (the
    default group) and a gloo group over the same ranks."""

    def __init__(self, rank, world, gloo):
        self.rank = rank
        self.world = world
        self.gloo = gloo
        self.coll = None  # the default group


def init_rank(timeout_s=60):
    import torch.distributed as dist
    import torch_coll  # noqa: F401  (registers "coll")
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    dist.init_process_group("coll", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    gloo = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout_s))
    return Ctx(rank, world, gloo)


def rank_process(cases, argv):
    """In a rank process: run the cases named in argv (all when none), print one line per
    case; exit 1 if any failed."""
    names = argv or list(cases)
    ctx = init_rank()
    failed = 0
    for name in names:
        start = time.monotonic()
        try:
            cases[name](ctx)
            print("CASE %s ok %.2fs" % (name, time.monotonic() - start), flush=True)
        except Exception:  # report and go on: the parent fails the test
            failed += 1
            print("CASE %s FAILED on rank %d:\n%s" % (name, ctx.rank, traceback.format_exc()),
                  flush=True)
    import torch.distributed as dist
    dist.destroy_process_group()
    sys.exit(1 if failed else 0)


def run_worlds(worlds, script, timeout_s=None):
    """In the parent: every case at every world size (or, where worlds is a dict, the cases
    it names for each world size), each world within timeout_s (DEADLINE_S when None);
    prints a summary; returns the number of ranks that failed."""
    bad = 0
    plan = worlds if isinstance(worlds, dict) else {w: [] for w in worlds}
    for world, names in plan.items():
        start = time.monotonic()
        results = launch(script, world, list(names), timeout_s=timeout_s or DEADLINE_S)
        took = time.monotonic() - start
        for rank, (rc, out) in enumerate(results):
            if rc != 0:
                bad += 1
                print("--- world %d rank %d exited %s:\n%s" % (world, rank, rc, out))
        lines = [l for l in results[0][1].splitlines() if l.startswith("CASE ")]
        lines += sorted({l for _, out in results for l in out.splitlines()
                         if l.startswith("EXPECTED-MISSING")})
        print("world %d: %d case lines on rank 0, %.1f s, %s" %
              (world, len(lines), took, "ok" if all(r[0] == 0 for r in results) else "FAILED"))
        for l in lines:
            print("  " + l.splitlines()[0])
    return bad


def main(cases, worlds=(2, 3, 4), script=None, timeout_s=None):
    """In the parent: run_worlds, then exit 1 on a failure. In a rank process: the cases."""
    if "--rank-process" in sys.argv:
        rank_process(cases, sys.argv[sys.argv.index("--rank-process") + 1:])
        return
    bad = run_worlds(worlds, script or os.path.abspath(sys.argv[0]), timeout_s)
    sys.exit(1 if bad else 0)


def expect_raises(fn, *needles):
    """fn() must raise RuntimeError (or ValueError) whose text holds every needle."""
    try:
        fn()
    except (RuntimeError, ValueError) as e:
        text = str(e)
        for n in needles:
            assert n in text, "error %r lacks %r" % (text, n)
        return text
    raise AssertionError("no error raised; expected one with %r" % (needles,))


def raises_like_gloo(ctx, call, *needles):
    """call(group) must raise for gloo's group and for coll's (the default group). Where
    PyTorch refuses the arguments before any backend sees them (torch 2.x checks more in
    Python than 1.13), coll must give the very same exception; where the backend refuses,
    coll's message must hold every needle. Returns coll's message."""
    errors = []
    for group in (ctx.gloo, None):
        try:
            call(group)
        except (RuntimeError, ValueError) as e:
            errors.append(e)
        else:
            errors.append(None)
    want, got = errors
    assert want is not None, "gloo accepted the call; the case is wrong"
    assert got is not None, "coll accepted what gloo refused: %r" % (want,)
    text = str(got)
    if "coll: rank" in text:  # refused by the backend: our message
        for n in needles:
            assert n in text, "error %r lacks %r" % (text, n)
    else:  # refused by PyTorch itself: the same for both
        assert (type(got), str(got)) == (type(want), str(want)), (got, want)
    return text
