"""torch.distributed under collrun (docs/pytorch.md): collrun hosts libcoll's store on
MASTER_PORT and sets COLL_STORE_HOSTED=1; importing torch_coll then makes the env://
rendezvous return that store (torch_coll.launcher_store) instead of starting a TCPStore on
rank 0 at the same port. Real collrun, real rank processes, real PyTorch:
  1. the store's calls from Python, and its errors (collrun -n 1);
  2. an unchanged script (init_process_group, all_reduce, destroy) on "coll" and on "gloo"
     (collrun -n 2 each), checking the sums and that the group's store is collrun's;
  3. collrun --elastic -n 3: rank 0 SIGKILLs itself after a first all_reduce, and the two
     survivors shrink the group on collrun's store (which outlives rank 0) and all_reduce
     on it.
Usage: test_launcher_store.py COLLRUN"""
import os
import subprocess
import sys
import tempfile
import time

UNCHANGED = r'''
import sys, torch, torch.distributed as dist, torch_coll
dist.init_process_group(sys.argv[1])
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.ones(2) * (rank + 1)
dist.all_reduce(t)
assert t.tolist() == [world * (world + 1) / 2] * 2, t
store = dist.distributed_c10d._get_default_store()
while isinstance(store, dist.PrefixStore):
    store = store.underlying_store
assert isinstance(store, torch_coll.LauncherStore), type(store)
dist.destroy_process_group()
print("UNCHANGED ok", sys.argv[1], rank, t.tolist(), store.name, flush=True)
'''

STORE_CALLS = r'''
import datetime, importlib, os, time, torch.distributed as dist, torch_coll
rdzv = importlib.import_module("torch.distributed.rendezvous")
assert rdzv._rendezvous_handlers["env"].__name__ == "torch_coll_env_rendezvous"
assert rdzv._rendezvous_handlers["tcp"] is rdzv._tcp_rendezvous_handler
s = torch_coll.launcher_store(timeout=datetime.timedelta(seconds=5))
assert isinstance(s, dist.Store) and "libcoll's store at" in s.name, s.name
s.set("k", "v")
assert s.get("k") == b"v"
assert s.add("n", 3) == 3 and s.add("n", 4) == 7 and s.get("n") == b"7"
assert s.compare_set("c", "", "one") == b"one"       # absent, expected empty: set
assert s.compare_set("c", "zero", "two") == b"one"   # wrong expectation: unchanged
assert s.compare_set("c", "one", "two") == b"two"
assert s.compare_set("absent", "x", "y") == b"x"     # absent: the expected value, as c10d
assert s.check(["k", "n"]) and not s.check(["k", "absent"])
keys = s.num_keys()
assert s.delete_key("k") and not s.delete_key("k") and s.num_keys() == keys - 1
s.wait(["n", "c"], datetime.timedelta(seconds=1))
c = s.clone()
assert c.get("c") == b"two"
c.set("from-clone", "x")
assert s.get("from-clone") == b"x"
s.set_timeout(datetime.timedelta(milliseconds=300))
start = time.monotonic()
try:
    s.get("never")
    raise AssertionError("a get of an absent key returned")
except dist.DistStoreError as e:
    took = time.monotonic() - start
    assert "never" in str(e) and "COLL_ERR_TIMEOUT" in str(e), e
    assert 0.15 < took < 3, took  # the server answers up to a fifth before the deadline
try:
    s.wait(["never"], datetime.timedelta(milliseconds=200))
    raise AssertionError("a wait for an absent key returned")
except dist.DistStoreError as e:
    assert "never" in str(e), e
del os.environ["MASTER_PORT"]
try:
    torch_coll.launcher_store(timeout=datetime.timedelta(seconds=1))
    raise AssertionError("launcher_store without MASTER_PORT connected")
except dist.DistStoreError as e:
    assert "MASTER_PORT is not set" in str(e), e
start = time.monotonic()
try:  # nothing listens on port 1
    torch_coll.launcher_store("127.0.0.1", 1, timeout=datetime.timedelta(milliseconds=300))
    raise AssertionError("launcher_store connected to port 1")
except dist.DistStoreError as e:
    assert "nothing answered" in str(e) and "127.0.0.1:1" in str(e), e
    assert time.monotonic() - start < 3
print("STORE CALLS ok", flush=True)
'''

# Rank 0 dies after a first all_reduce; the survivors shrink on collrun's store.
ELASTIC = r'''
import os, signal, time, torch, torch.distributed as dist, torch_coll
dist.init_process_group("coll")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.ones(4)
dist.all_reduce(t)
assert t.tolist() == [float(world)] * 4, t
if rank == 0:
    os.kill(os.getpid(), signal.SIGKILL)
start = time.monotonic()
try:
    dist.all_reduce(t)
    raise AssertionError("an all_reduce without rank 0 succeeded")
except RuntimeError as e:
    assert "coll: rank %d" % rank in str(e), e
failed_after = time.monotonic() - start
group = torch_coll.shrink()
took = time.monotonic() - start
assert group.size() == world - 1 and group.rank() == rank - 1, (group.size(), group.rank())
t = torch.full((4,), float(rank))
dist.all_reduce(t)
assert t.tolist() == [float(sum(range(1, world)))] * 4, t
dist.barrier()
# What the group's liveness costs on collrun's store: requests in an idle second.
before = torch_coll.store_requests()
time.sleep(1.0)
idle = torch_coll.store_requests() - before
print("ELASTIC rank %d: error after %.2f s, a working %d-rank group after %.2f s, sum %s, "
      "%d store requests in an idle second" % (rank, failed_after, group.size(), took,
                                               t[0].item(), idle), flush=True)
assert idle < 60, "the lease's waits are not left to collrun's store (%d requests/s)" % idle
dist.destroy_process_group()
'''

RUN_DEADLINE_S = 60


def collrun(collrun_exe, args, script, script_args=(), env_extra=None):
    """Runs the script under collrun; (ok, output, seconds)."""
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(script)
    env = dict(os.environ, **(env_extra or {}))
    start = time.monotonic()
    try:
        out = subprocess.run([collrun_exe] + args + [sys.executable, f.name] + list(script_args),
                             capture_output=True, text=True, timeout=RUN_DEADLINE_S, env=env)
        return out.returncode, out.stdout + out.stderr, time.monotonic() - start
    except subprocess.TimeoutExpired as e:
        return None, "timed out after %d s: %s" % (RUN_DEADLINE_S, e), time.monotonic() - start
    finally:
        os.unlink(f.name)


def main():
    collrun_exe = sys.argv[1]
    bad = 0

    def report(what, rc, text, took, ok):
        nonlocal bad
        print("%s: %s (exit %s), %.1f s" % (what, "ok" if ok else "FAILED", rc, took))
        for line in text.splitlines():
            if "ELASTIC rank" in line or "UNCHANGED ok" in line:
                print("  " + line)
        if not ok:
            bad += 1
            print(text)

    rc, text, took = collrun(collrun_exe, ["-n", "1"], STORE_CALLS)
    report("launcher_store's calls and errors", rc, text, took,
           rc == 0 and "STORE CALLS ok" in text)
    for backend in ("coll", "gloo"):
        rc, text, took = collrun(collrun_exe, ["-n", "2"], UNCHANGED, [backend])
        report("unchanged script on %s under collrun -n 2" % backend, rc, text, took,
               rc == 0 and text.count("UNCHANGED ok " + backend) == 2)
    # Without stack traces in the flight recorder's dump at the first failure, which
    # otherwise takes seconds before the error reaches the caller (docs/pytorch.md).
    rc, text, took = collrun(collrun_exe, ["--elastic", "-n", "3"], ELASTIC,
                            env_extra={"TORCH_INCLUDE_STACK_TRACE": "0"})
    report("collrun --elastic -n 3, rank 0 killed", rc, text, took,
           rc == 0 and text.count("ELASTIC rank") == 2 and "rank 0" in text and
           "SIGKILL" in text)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
