"""PyTorch's fault-tolerance API (torch 2.14+: reconfigure, abort hooks, get_error,
set_timeout, shrink_group) on the "coll" backend, against gloo in the same run.

The cases are the ones PyTorch checks this API with in its own
test/distributed/test_c10d_fault_tolerance.py (there for gloo on CPU and the new NCCL
backend "nccl2" on GPUs), written here from what each one means: 3 rank processes, a
FileStore, init_process_group(enable_reconfigure=True) (no communicator until the first
reconfigure), handles exchanged through the store. Every case runs on gloo, then on coll,
in the same rank processes, each on a fresh store file: reconfigure basic; then all_reduce;
then send/recv; shrink excluding the last and a middle rank; scale down to one and up
again; single to all; identity; late join; merge and split; after abort; after a timeout;
a reused uuid refused. Added here: a handle that is not the caller's own refused,
shrink_group with both flags, and a rank SIGKILLed (rank 0 on a TCPStore the parent hosts,
rank 1 on a FileStore) with the survivors reconfiguring without it and going on.

Where the two differ, each side is checked for what it does:
- handles: gloo's ("gloo:RANK:UUID:STABLE_RANK:STORE_ADDRESS") change with every
  reconfigure; coll's ("coll:HOST:PID:NONCE") name the process and never change.
- a reused uuid: both refuse it with "already used"; gloo only on the new rank 0 (a claim in
  the store), coll on every member (the uuids its group used) and on the new rank 0 too.
- after a timeout (PyTorch runs this case for nccl2 only): on coll, as on nccl2, the abort
  hooks run when the collective times out (before its Work completes), get_error() says
  TIMEOUT and the next call raises at once ("timed out"); gloo has no abort hooks
  (register_abort_hook raises), get_error() stays SUCCESS, the Work raises at wait() and the
  next call is accepted and fails at wait(). Both recover with a reconfigure.
- after abort(): both report SUCCESS (PyTorch's test expects COMM_ERROR from nccl2 only);
  coll's abort of a reconfigurable group revokes the communicator (every member's calls
  fail), gloo's closes this process's connections.
- shrink_group: gloo does not support it (supports_shrinking is False); coll does, with
  SHRINK_DEFAULT and with SHRINK_ABORT (which fails the old group's pending calls first).
- a rank killed: both fail the survivors' pending all_reduce and recover by reconfiguring;
  coll's communicator lives on the c10d store, so rank 0 may be the one lost.
- PyTorch's flight recorder: PyTorch attaches it as an abort hook to a group of a backend
  that has abort hooks (coll; not gloo, which records for itself). At a process's first
  failure it dumps a trace, by default symbolizing stack traces first: 3-5 s on this
  machine before the failure reaches the caller, and the group it dumped for then stays
  alive past destroy_process_group. The kill cases run once with PyTorch's default and once
  with TORCH_INCLUDE_STACK_TRACE=0; the store-load case runs first."""
import datetime
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coll_harness  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.distributed_c10d as c10d  # noqa: E402

WORLD = 3
BACKENDS = ("gloo", "coll")
TIMEOUT = datetime.timedelta(seconds=30)


class Case:
    """One case on one backend in one rank process: the store, the group, the helpers
    PyTorch's test uses (handles and barriers through the store)."""

    def __init__(self, backend, rank, path):
        self.name = backend
        self.rank = rank
        self.path = path
        self.store = None
        self.backend = None

    @property
    def coll(self):
        return self.name == "coll"

    def init(self, store=None):
        self.store = store or dist.FileStore(self.path, WORLD)
        dist.init_process_group(self.name, world_size=WORLD, rank=self.rank, store=self.store,
                                timeout=TIMEOUT, enable_reconfigure=True)
        self.backend = dist.get_backend_impl(c10d._get_default_group(), torch.device("cpu"))
        assert dist._supports_reconfigure()
        assert self.backend.supports_reconfigure

    def handles(self, key, ranks=range(WORLD)):
        self.store.set("%s_%d" % (key, self.rank), dist._get_reconfigure_handle())
        return [self.store.get("%s_%d" % (key, r)).decode("utf-8") for r in ranks]

    def barrier(self, key, ranks=range(WORLD)):
        self.store.set("%s_%d" % (key, self.rank), "1")
        for r in ranks:
            self.store.get("%s_%d" % (key, r))

    def reconfigure(self, uuid, handles):
        dist._reconfigure(uuid, handles, timeout=TIMEOUT).wait()

    def created(self, key, uuid):
        self.init()
        self.reconfigure(uuid, self.handles(key + "_init"))
        assert dist.get_world_size() == WORLD, dist.get_world_size()
        assert dist.get_rank() == self.rank, dist.get_rank()
        return self.handles(key + "_post")

    def assert_sum(self, expected):
        t = torch.full((4,), dist.get_rank() + 1.0)
        dist.all_reduce(t)
        assert torch.equal(t, torch.full((4,), float(expected))), (t, expected)

    def close(self):
        if dist.is_initialized():
            dist.destroy_process_group()
        self.backend = None
        self.store = None


def reconfigure_basic(c):
    c.created("ft_basic", 100)


def reconfigure_then_all_reduce(c):
    c.created("ft_all_reduce", 200)
    c.assert_sum(sum(range(1, WORLD + 1)))


def reconfigure_then_send_recv(c):
    c.created("ft_send_recv", 300)
    rank = dist.get_rank()
    to, frm = (rank + 1) % WORLD, (rank - 1) % WORLD
    out, into = torch.full((4,), rank + 1.0), torch.zeros(4)
    if rank % 2 == 0:
        works = [c.backend.send([out], to, 0), c.backend.recv([into], frm, 0)]
    else:
        works = [c.backend.recv([into], frm, 0), c.backend.send([out], to, 0)]
    for w in works:
        w.wait()
    assert torch.equal(into, torch.full((4,), frm + 1.0)), into


def shrink_exclude_last_rank(c):
    handles = c.created("ft_shrink_last", 400)
    left_out = WORLD - 1
    if c.rank != left_out:
        c.reconfigure(401, handles[:left_out])
        assert dist.get_world_size() == WORLD - 1 and dist.get_rank() == c.rank
        c.assert_sum(sum(range(1, WORLD)))
        t = torch.full((4,), 42.0) if dist.get_rank() == 0 else torch.zeros(4)
        dist.broadcast(t, group_src=0)
        assert torch.equal(t, torch.full((4,), 42.0)), t
    c.barrier("ft_shrink_last_done")


def shrink_exclude_middle_rank(c):
    handles = c.created("ft_shrink_middle", 500)
    left_out = WORLD // 2
    if c.rank != left_out:
        c.reconfigure(501, [h for r, h in enumerate(handles) if r != left_out])
        assert dist.get_world_size() == WORLD - 1
        assert dist.get_rank() == (c.rank if c.rank < left_out else c.rank - 1)
        c.assert_sum(sum(range(1, WORLD)))
    c.barrier("ft_shrink_middle_done")


def alone(c, uuid):
    c.reconfigure(uuid, [dist._get_reconfigure_handle()])
    assert dist.get_world_size() == 1 and dist.get_rank() == 0


def scale_down_up(c):
    c.init()
    alone(c, 600 + c.rank)  # disjoint groups: a uuid each
    c.reconfigure(603, c.handles("ft_scale_down_up"))
    assert dist.get_world_size() == WORLD and dist.get_rank() == c.rank
    c.assert_sum(sum(range(1, WORLD + 1)))
    alone(c, 604 + c.rank)
    c.assert_sum(1)
    c.barrier("ft_scale_down_up_done")


def single_to_all(c):
    c.init()
    alone(c, 700 + c.rank)
    c.reconfigure(703, c.handles("ft_single_to_all"))
    c.assert_sum(sum(range(1, WORLD + 1)))


def identity(c):
    c.created("ft_identity", 800)
    c.reconfigure(801, c.handles("ft_identity_again"))
    c.assert_sum(sum(range(1, WORLD + 1)))


def late_join(c):
    c.init()
    first = WORLD // 2
    handles = c.handles("ft_late_join_initial")
    if c.rank < first:
        c.reconfigure(900, handles[:first])
        c.assert_sum(sum(range(1, first + 1)))
    elif c.coll:  # a late joiner has no communicator yet: its calls say so
        coll_harness.expect_raises(lambda: dist.all_reduce(torch.ones(1)), "reconfigure()")
    c.reconfigure(901, c.handles("ft_late_join_all"))
    c.assert_sum(sum(range(1, WORLD + 1)))


def merge_split(c):
    c.init()
    split = WORLD // 2
    handles = c.handles("ft_merge_split_initial")
    if c.rank < split:
        c.reconfigure(1000, handles[:split])
        c.assert_sum(sum(range(1, split + 1)))
    else:
        c.reconfigure(1001, handles[split:])
        c.assert_sum(sum(range(1, WORLD - split + 1)))
    c.reconfigure(1002, c.handles("ft_merge_split_all"))
    c.assert_sum(sum(range(1, WORLD + 1)))


def after_abort(c):
    from torch._C._distributed_c10d import ErrorType
    c.created("ft_abort", 1200)
    c.backend.abort()
    assert c.backend.get_error() == ErrorType.SUCCESS, c.backend.get_error()
    c.reconfigure(1201, c.handles("ft_abort_recover"))
    c.assert_sum(sum(range(1, WORLD + 1)))


def after_timeout(c):
    from torch._C._distributed_c10d import ErrorType
    c.created("ft_timeout", 1300)
    c.assert_sum(sum(range(1, WORLD + 1)))
    c.backend.set_timeout(datetime.timedelta(seconds=2))
    hooked = threading.Event()
    if c.coll:
        assert c.backend.supports_abort_hooks
        c.backend.register_abort_hook(0, hooked.set)
    else:
        assert not c.backend.supports_abort_hooks
        coll_harness.expect_raises(lambda: c.backend.register_abort_hook(0, hooked.set),
                                   "does not support registerAbortHook")
    if c.rank != 0:  # rank 0 never joins: the others time out after 2 s
        t = torch.ones(4)
        work = dist.all_reduce(t, async_op=True)
        if c.coll:
            assert hooked.wait(10), "the abort hook did not run after the timeout"
            assert c.backend.get_error() == ErrorType.TIMEOUT, c.backend.get_error()
            coll_harness.expect_raises(lambda: dist.all_reduce(t, async_op=True), "timed out")
            coll_harness.expect_raises(work.wait, "timed out")
        else:
            coll_harness.expect_raises(work.wait, "Timed out")
            assert c.backend.get_error() == ErrorType.SUCCESS, c.backend.get_error()
            later = dist.all_reduce(t, async_op=True)  # accepted, fails at wait
            coll_harness.expect_raises(later.wait)
        del work
    if c.coll:
        c.backend.unregister_abort_hook(0)
    c.backend.set_timeout(TIMEOUT)
    c.barrier("ft_timeout_observed")
    c.reconfigure(1301, c.handles("ft_timeout_recover"))
    c.assert_sum(sum(range(1, WORLD + 1)))


def rejects_reused_uuid(c):
    c.init()
    uuid = 1100 + c.rank
    alone(c, uuid)
    coll_harness.expect_raises(lambda: alone(c, uuid), "already used")
    if c.coll:  # another process's claim on the store, too
        c.barrier("ft_reused_claimed")
        theirs = 1100 + (c.rank + 1) % WORLD
        coll_harness.expect_raises(lambda: alone(c, theirs), "already used")


def refuses_foreign_handles(c):
    handles = c.created("ft_foreign", 1400)
    others = [h for r, h in enumerate(handles) if r != c.rank]
    coll_harness.expect_raises(lambda: c.reconfigure(1401 + c.rank, others),
                               "not part of" if not c.coll else "is not among")
    c.assert_sum(sum(range(1, WORLD + 1)))  # the group is as it was


def shrink_group_both_flags(c):
    c.init()
    c.reconfigure(1500, c.handles("ft_shrink_group"))
    if not c.coll:
        assert not c.backend.supports_shrinking
        return
    assert c.backend.supports_shrinking
    if c.rank != WORLD - 1:
        group = dist.shrink_group([WORLD - 1], shrink_flags=dist.distributed_c10d.SHRINK_DEFAULT)
        assert group.size() == WORLD - 1 and dist.get_world_size() == WORLD - 1
        c.assert_sum(sum(range(1, WORLD)))
        if c.rank == 0:
            # A receive nobody matches is pending: SHRINK_ABORT fails it, then shrinks.
            pending = dist.irecv(torch.zeros(2), src=1)
            group = dist.shrink_group([1], shrink_flags=dist.distributed_c10d.SHRINK_ABORT)
            coll_harness.expect_raises(pending.wait)
            assert group.size() == 1 and dist.get_world_size() == 1
            c.assert_sum(1)
    c.barrier("ft_shrink_group_done")


def store_requests_per_s(seconds):
    import torch_coll
    before, start = torch_coll.store_requests(), time.monotonic()
    time.sleep(seconds)
    return (torch_coll.store_requests() - before) / (time.monotonic() - start)


def idle_store_load(c):
    """What keeping a group on the c10d store costs it: requests a second from an idle
    3-rank group (each rank's lease renewals and the polls of its failure watcher), over
    what the process made before the group existed (nothing, unless a group of an earlier
    case is still alive)."""
    if c.coll:
        without = store_requests_per_s(1.0)
    c.created("ft_idle", 1600)
    if c.coll:
        per_s = store_requests_per_s(2.0) - without
        print("STORE rank %d: idle in a 3-rank group, %.0f c10d store requests a second "
              "(%.0f before it)" % (c.rank, per_s, without), flush=True)
        assert 0 < per_s <= 150, per_s
    c.barrier("ft_idle_done")


def destroy_while_a_call_is_pending(c):
    """A plain group (no reconfigure) on a store that outlives the ranks: rank 0 starts an
    all_reduce the others never join, and every rank destroys its group. The others'
    destroy must not wait for rank 0 (whose communicator failed when theirs went) longer
    than the shutdown grace (5 s; gloo returns at once), and rank 0's pending Work fails."""
    c.store = dist.FileStore(c.path, WORLD)
    dist.init_process_group(c.name, world_size=WORLD, rank=c.rank, store=c.store,
                            timeout=TIMEOUT)
    t = torch.ones(4)
    dist.all_reduce(t)
    c.barrier("ft_destroy_ready")
    work = None
    if c.rank == 0:
        work = dist.all_reduce(torch.ones(1 << 12), async_op=True)
        time.sleep(0.2)
    start = time.monotonic()
    dist.destroy_process_group()
    took = time.monotonic() - start
    print("DESTROY rank %d on %s: destroy_process_group returned in %.2f s"
          % (c.rank, c.name, took), flush=True)
    if work is not None:
        coll_harness.expect_raises(work.wait)
    else:
        assert took < 10, "destroy_process_group took %.1f s" % took
    c.barrier("ft_destroy_done")


CASES = [idle_store_load, reconfigure_basic, reconfigure_then_all_reduce, reconfigure_then_send_recv,
         shrink_exclude_last_rank, shrink_exclude_middle_rank, scale_down_up, single_to_all,
         identity, late_join, merge_split, after_abort, after_timeout, rejects_reused_uuid,
         refuses_foreign_handles, shrink_group_both_flags, destroy_while_a_call_is_pending]


def cases_process(rank, folder, names):
    failed = 0
    for case in [c for c in CASES if not names or c.__name__ in names]:
        for backend in BACKENDS:
            c = Case(backend, rank, os.path.join(folder, "%s_%s" % (case.__name__, backend)))
            start = time.monotonic()
            try:
                case(c)
                print("CASE %s on %s ok %.2fs" % (case.__name__, backend,
                                                  time.monotonic() - start), flush=True)
            except Exception:  # report and go on: the parent fails the test
                failed += 1
                print("CASE %s on %s FAILED on rank %d:\n%s" % (
                    case.__name__, backend, rank, traceback.format_exc()), flush=True)
            finally:
                try:
                    c.close()
                except Exception:
                    traceback.print_exc()
    sys.exit(1 if failed else 0)


def killed_process(rank, backend, victim, where):
    """All ranks reconfigure, all-reduce; the victim SIGKILLs itself; the survivors' next
    all-reduce fails, they reconfigure without it and all-reduce right."""
    if where == "tcp":  # hosted by the parent, as torchrun's agent hosts its store
        store = dist.TCPStore("127.0.0.1", int(os.environ["MASTER_PORT"]), is_master=False,
                              timeout=TIMEOUT)
    else:
        store = dist.FileStore(where, WORLD)
    c = Case(backend, rank, None)
    c.init(store)
    c.reconfigure(1, c.handles("kill_init"))
    c.assert_sum(sum(range(1, WORLD + 1)))
    hooked = threading.Event()
    if c.coll:  # a lost peer runs the abort hooks too
        c.backend.register_abort_hook(7, hooked.set)
    if rank == victim:
        os.kill(os.getpid(), signal.SIGKILL)
    start = time.monotonic()
    t = torch.ones(1 << 12)
    try:
        dist.all_reduce(t)
        raise AssertionError("the all_reduce without rank %d succeeded" % victim)
    except RuntimeError as e:
        failed = time.monotonic() - start
        print("rank %d: failed after %.2f s: %s" % (rank, failed, str(e).splitlines()[0][:160]),
              flush=True)
    if c.coll:
        from torch._C._distributed_c10d import ErrorType
        assert hooked.is_set(), "the abort hook did not run before the failure was raised"
        assert c.backend.get_error() == ErrorType.REMOTE_ERROR, c.backend.get_error()
        c.backend.unregister_abort_hook(7)
    survivors = [r for r in range(WORLD) if r != victim]
    c.reconfigure(2, c.handles("kill_survivors", survivors))
    took = time.monotonic() - start
    assert dist.get_world_size() == len(survivors)
    assert dist.get_rank() == survivors.index(rank)
    t = torch.full((8,), rank + 1.0)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full((8,), float(sum(r + 1 for r in survivors)))), t
    b = torch.full((2,), float(rank))
    dist.broadcast(b, group_src=0)
    assert torch.equal(b, torch.full((2,), float(survivors[0]))), b
    print("KILLED rank %d on %s (%s store, victim %d, TORCH_INCLUDE_STACK_TRACE=%s): lost "
          "to a working %d-rank group in %.2f s" % (
              rank, backend, "TCP" if where == "tcp" else "file", victim,
              os.environ.get("TORCH_INCLUDE_STACK_TRACE", "unset"), len(survivors), took),
          flush=True)
    c.close()


def run_killed(folder):
    bad = 0
    for backend in BACKENDS:
        # PyTorch's flight recorder, an abort hook on coll, as PyTorch's defaults have it
        # (its first dump symbolizes stack traces), then without the stack traces.
        for victim, where, traces in ((0, "tcp", "1"),
                                      (1, os.path.join(folder, "killed_%s" % backend), "0")):
            port = coll_harness.free_port()
            host = None
            if where == "tcp":
                host = dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False,
                                     timeout=TIMEOUT)
            results = coll_harness.launch(os.path.abspath(__file__), WORLD,
                                          ["killed", backend, str(victim), where],
                                          timeout_s=120,
                                          env_extra={"MASTER_PORT": str(port),
                                                     "TORCH_INCLUDE_STACK_TRACE": traces})
            del host
            for rank, (rc, out) in enumerate(results):
                want = -signal.SIGKILL if rank == victim else 0
                ok = rc == want and (rank == victim or "KILLED rank" in out)
                bad += not ok
                if not ok:
                    print("--- %s victim %d: rank %d exited %s (want %d):\n%s" % (
                        backend, victim, rank, rc, want, out))
                for line in out.splitlines():
                    if line.startswith("KILLED"):
                        print("  " + line)
    return bad


def main():
    if "--rank-process" in sys.argv:
        args = sys.argv[sys.argv.index("--rank-process") + 1:]
        import torch_coll  # noqa: F401  (registers "coll")
        rank = int(os.environ["RANK"])
        if args[0] == "killed":
            killed_process(rank, args[1], int(args[2]), args[3])
        else:
            cases_process(rank, args[1], args[2:])
        return
    import torch_coll
    if not torch_coll.features().get("reconfigure"):
        print("this PyTorch has no reconfigure API (2.14+): nothing to test")
        return
    folder = tempfile.mkdtemp(prefix="torch_coll_ft_")
    try:
        names = sys.argv[1:]
        start = time.monotonic()
        results = coll_harness.launch(os.path.abspath(__file__), WORLD, ["cases", folder] + names,
                                      timeout_s=float(os.environ.get("TORCH_COLL_FT_DEADLINE_S",
                                                                     "420")))
        bad = 0
        for rank, (rc, out) in enumerate(results):
            if rc != 0:
                bad += 1
                print("--- rank %d exited %s:\n%s" % (rank, rc, out))
        print("%d ranks, %.1f s:" % (WORLD, time.monotonic() - start))
        for line in results[0][1].splitlines():
            if line.startswith("CASE "):
                print("  " + line)
        for _, out in results:
            for line in out.splitlines():
                if line.startswith(("STORE ", "DESTROY ")):
                    print("  " + line)
        if not names:
            bad += run_killed(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
