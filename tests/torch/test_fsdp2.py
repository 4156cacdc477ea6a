"""FSDP2 (torch.distributed.fsdp.fully_shard) and torch.distributed.checkpoint (DCP) on
the "coll" backend against gloo, CPU tensors, in the same rank processes (torch 2.x only).

Meshes. The coll runs build their DeviceMesh from the default group (coll) with
init_device_mesh, the gloo runs from the harness' gloo group with DeviceMesh.from_group.
Every run checks that the mesh's group, the mesh of every parameter and gradient DTensor,
and the mesh of every fully_shard unit's parameter group (where FSDP's all-gathers and
reduce-scatters run) is the backend it claims. The two meshes get different dim names:
PyTorch's DeviceMesh equality ignores the process group, and DTensor's sharding
propagation cache would otherwise give a coll DTensor's op the output spec cached for an
equal gloo mesh (nn.Parameter's detach does this), leaving the coll model's parameters on
the gloo mesh and its full_tensor() gathering over gloo.

Training. An MLP (30 and 7 rows: uneven, padded shards at 4 ranks) and a two-layer
nn.TransformerEncoder with an embedding and a head (fully_shard per layer, then the root),
the same seed and the same per-rank data for both backends, 20 SGD steps (momentum 0.9).
Then this rank's shards and the full parameters (DTensor.full_tensor(), gathered over each
backend) of the coll run must equal gloo's, and every parameter must have moved. Variants:
reshard_after_forward True and False, MixedPrecisionPolicy(param_dtype=bfloat16,
reduce_dtype=float32), a unit holding float32 and frozen bfloat16 parameters (FSDP2
all-gathers them as one uint8 buffer; the case checks that it did, on coll), gradient
accumulation (set_requires_gradient_sync(False) on every
micro-batch of a step but the last, True on the last; 3 micro-batches a step for the MLP,
2 for the transformer), and set_gradient_divide_factor(2 * world), which makes FSDP reduce-scatter
with ReduceOp.PREMUL_SUM on coll (gloo refuses PREMUL_SUM: its run sums and divides after,
set_force_sum_reduction_for_comms). The plain MLP run is also checked against one process
training the unsharded model on every rank's data (the mean over the global batch, which
is what FSDP's averaging reduce-scatter computes), within 1e-5.

Tolerance. FSDP averages the gradients with a float32 reduce-scatter (ReduceOp.AVG). At
2 ranks that is exact whatever the order (a + b == b + a, and halving is exact), so the
coll run must equal gloo's bit for bit. At 4 ranks gloo and libcoll may add the four
contributions in another order, which can change the last bit of a float32 sum; 20 steps
carry that into the parameters as a few ulps (1.2e-7 at most, measured), so 4 ranks allow
rtol = atol = 1e-5: a hundred times that, and far below a real error (a wrong average or a
lost rank moves parameters by 1e-2 or more). With bfloat16 parameters the forward and
backward run in bfloat16: a last-bit difference in a float32 master weight can round its
bfloat16 copy the other way, which the next gradient carries as a bfloat16 ulp (4e-3
relative), so that variant allows 2e-2 at 4 ranks (measured: equal). SGD, not Adam, for
these comparisons: some gradients are zero in exact arithmetic (attention's key bias), so
only rounding noise reaches them, and Adam's normalisation turns noise of either sign into
a full step of lr (4.6e-4 apart after 20 AdamW steps between two correct backends).

Checkpoint. A transformer trained 3 Adam steps under FSDP2 on coll; its sharded model and
optimizer state dicts (get_model_state_dict / get_optimizer_state_dict) saved with
dcp.save, and in a second case with dcp.async_save (waiting on its future), with
process_group = the coll group, into one directory that rank 0 makes and broadcasts over
coll. A fresh FSDP2 model with another seed loads it with dcp.load: its shards and Adam's
state must equal the saved ones exactly, one more identical step on both must give equal
shards, and the full state dicts (StateDictOptions(full_state_dict=True), gathered over
coll) must be equal."""
import atexit
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# Eleven cases, each training twice, at 4 ranks on a 2-core machine: more than the
# harness' default 120 s per world when the machine is busy (89 s measured under load).
os.environ.setdefault("TORCH_COLL_TEST_DEADLINE_S", "180")
import coll_harness  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.distributed.checkpoint as dcp  # noqa: E402
from torch.distributed.checkpoint.state_dict import (  # noqa: E402
    StateDictOptions, get_model_state_dict, get_optimizer_state_dict, set_model_state_dict,
    set_optimizer_state_dict)
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh  # noqa: E402
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402

STEPS = 20
BATCH = 8
VOCAB, SEQ, DMODEL, CLASSES = 40, 6, 32, 5


def mesh_for(ctx, group):
    """The 1-D CPU mesh over all ranks: gloo's from the harness' group, coll's from the
    default group; checks that the mesh's group is the backend asked for. Different dim
    names keep the two meshes unequal (see the docstring: DeviceMesh equality ignores the
    group, and DTensor's caches would mix them up)."""
    if group is None:
        mesh = init_device_mesh("cpu", (ctx.world,), mesh_dim_names=("coll_dp",))
        want = "coll"
    else:
        mesh = DeviceMesh.from_group(group, "cpu", mesh_dim_names=("gloo_dp",))
        want = "gloo"
    pg = mesh.get_group()
    assert dist.get_backend(pg) == want, (dist.get_backend(pg), want)
    assert pg.size() == ctx.world and pg.rank() == ctx.rank
    return mesh


def assert_on_mesh(tensors, mesh, what):
    """Every DTensor in `tensors` (name -> tensor) lives on `mesh`'s process group."""
    want = mesh.get_group().group_name
    for name, t in tensors.items():
        assert isinstance(t, DTensor), "%s %s is not a DTensor" % (what, name)
        got = t.device_mesh.get_group()
        assert got.group_name == want, "%s %s is on group %s (%s), not %s (%s)" % (
            what, name, got.group_name, dist.get_backend(got), want,
            dist.get_backend(mesh.get_group()))


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        # 30 and 7 rows: uneven shards (padded by FSDP) at 4 ranks.
        self.layers = torch.nn.ModuleList([torch.nn.Linear(12, 30), torch.nn.Linear(30, 32),
                                           torch.nn.Linear(32, 7)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x


class MixedMlp(Mlp):
    """The MLP with its middle layer frozen in bfloat16 (FSDP2 wants one dtype for the
    trainable parameters of a unit, any for the frozen ones): one fully_shard unit then
    holds parameters of two dtypes, which FSDP2 all-gathers as one uint8 buffer."""

    def __init__(self):
        super().__init__()
        self.layers[1].to(torch.bfloat16).requires_grad_(False)

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x.to(layer.weight.dtype)).float()
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x


class Transformer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DMODEL)
        layer = torch.nn.TransformerEncoderLayer(DMODEL, nhead=4, dim_feedforward=48,
                                                 dropout=0.0, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=2,
                                                   enable_nested_tensor=False)
        self.head = torch.nn.Linear(DMODEL, CLASSES)

    def forward(self, tokens):
        return self.head(self.encoder(self.embed(tokens)).mean(dim=1))


def batch(kind, gen):
    if kind in ("mlp", "mixed"):
        return torch.randn(BATCH, 12, generator=gen), torch.randint(0, 7, (BATCH,), generator=gen)
    return (torch.randint(0, VOCAB, (BATCH, SEQ), generator=gen),
            torch.randint(0, CLASSES, (BATCH,), generator=gen))


def build(kind, mesh, seed=1234, reshard_after_forward=True, mp=None):
    """The model made with `seed` (the same on every rank), fully_shard per block then the
    root; every parameter must then be a DTensor on `mesh`."""
    torch.manual_seed(seed)
    model = new_model(kind)
    kw = {"mesh": mesh, "reshard_after_forward": reshard_after_forward}
    if mp is not None:
        kw["mp_policy"] = mp
    if kind == "mixed":  # one unit over parameters of both dtypes
        fully_shard(model, **kw)
        assert_on_mesh(dict(model.named_parameters()), mesh, "parameter")
        return model
    blocks = model.layers if kind == "mlp" else model.encoder.layers
    for block in blocks:
        fully_shard(block, **kw)
    fully_shard(model, **kw)
    assert_on_mesh(dict(model.named_parameters()), mesh, "parameter")
    return model


def new_model(kind):
    return {"mlp": Mlp, "mixed": MixedMlp, "transformer": Transformer}[kind]()


def make_opt(model):
    # SGD, not Adam (see the docstring: Adam turns rounding noise into steps of lr).
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def full_params(model):
    """The whole parameters, gathered over each parameter's mesh (DTensor.full_tensor)."""
    return {n: p.full_tensor().detach().clone() for n, p in model.named_parameters()}


def local_params(model):
    """This rank's shards of the parameters, copied."""
    return {n: p.to_local().detach().clone() for n, p in model.named_parameters()}


def assert_fsdp_groups_on(model, blocks, mesh):
    """FSDP's own all-gathers and reduce-scatters run on the mesh of each fully_shard
    unit's parameter group: that mesh must be `mesh`'s group. (fully_shard.state and the
    param group are internal to PyTorch 2.15.0, which this build pins.)"""
    want = mesh.get_group().group_name
    groups = [fully_shard.state(unit)._fsdp_param_group for unit in [model] + list(blocks)]
    groups = [g for g in groups if g is not None]  # None: a unit without parameters of its own
    assert len(groups) >= len(blocks), groups
    for param_group in groups:
        got = param_group.mesh_info.mesh.get_group()
        assert got.group_name == want, (got.group_name, dist.get_backend(got), want)


def train(ctx, group, kind, accumulate=1, divide_factor=None, force_sum=False, **kw):
    """STEPS optimizer steps of `accumulate` micro-batches each on the rank's own data;
    returns the model and its local shards before training. divide_factor and force_sum
    go to every fully_shard unit's set_gradient_divide_factor and
    set_force_sum_reduction_for_comms."""
    mesh = mesh_for(ctx, group)
    model = build(kind, mesh, **kw)
    for unit in model.modules():
        if isinstance(unit, FSDPModule):
            if divide_factor is not None:
                unit.set_gradient_divide_factor(divide_factor)
            unit.set_force_sum_reduction_for_comms(force_sum)
    blocks = model.encoder.layers if kind == "transformer" else model.layers if kind == "mlp" else []
    assert_fsdp_groups_on(model, blocks, mesh)
    first = local_params(model)
    opt = make_opt(model)
    data = torch.Generator().manual_seed(77 + ctx.rank)  # each rank its own shard
    for _ in range(STEPS):
        for micro in range(accumulate):
            model.set_requires_gradient_sync(micro + 1 == accumulate)
            x, y = batch(kind, data)
            loss = torch.nn.functional.cross_entropy(model(x).float(), y) / accumulate
            loss.backward()
        assert_on_mesh({n: p.grad for n, p in model.named_parameters() if p.requires_grad},
                       mesh, "gradient")
        opt.step()
        opt.zero_grad()
    assert_on_mesh(dict(model.named_parameters()), mesh, "trained parameter")
    return model, first


def assert_params_close(got, want, tol, what):
    assert got.keys() == want.keys(), (sorted(got), sorted(want))
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, (
            what, k, got[k].dtype, want[k].dtype, got[k].shape, want[k].shape)
        if tol == 0:
            assert torch.equal(got[k], want[k]), "%s %s: max difference %g" % (
                what, k, (got[k].double() - want[k].double()).abs().max().item())
        else:
            torch.testing.assert_close(got[k], want[k], rtol=tol, atol=tol,
                                       msg=lambda m, k=k: "%s %s: %s" % (what, k, m))


def initial_full(kind):
    """The unsharded initial parameters (the same seed as build's)."""
    torch.manual_seed(1234)
    model = new_model(kind)
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def compare(ctx, kind, tol4=1e-5, gloo_kw=None, **kw):
    """coll's run against gloo's: exact at 2 ranks, within tol4 beyond (see the docstring).
    First this rank's shards (no communication), then the full parameters gathered over
    each backend; returns coll's full parameters. gloo_kw: more arguments for gloo's run."""
    what = "%s %s" % (kind, kw)
    tol = 0 if ctx.world == 2 else tol4
    model_g, first_g = train(ctx, ctx.gloo, kind, **dict(kw, **(gloo_kw or {})))
    model_c, first_c = train(ctx, None, kind, **kw)
    assert_params_close(first_c, first_g, 0, "initial shards, " + what)
    assert_params_close(local_params(model_c), local_params(model_g), tol, "shards, " + what)
    want = full_params(model_g)  # all-gathered over gloo
    got = full_params(model_c)   # all-gathered over coll
    assert_params_close(got, want, tol, "full parameters, " + what)
    first = initial_full(kind)
    frozen = {n for n, p in model_c.named_parameters() if not p.requires_grad}
    unmoved = [k for k in got if k not in frozen and torch.equal(got[k], first[k])]
    assert not unmoved, "training left unchanged: %s" % unmoved
    return got


def reference_mlp(ctx):
    """One process, the unsharded MLP, each step on the concatenation of every rank's
    batch (the loss mean over the global batch = the average of the ranks' means)."""
    torch.manual_seed(1234)
    model = Mlp()
    opt = make_opt(model)
    gens = [torch.Generator().manual_seed(77 + r) for r in range(ctx.world)]
    for _ in range(STEPS):
        xs, ys = zip(*[batch("mlp", g) for g in gens])
        torch.nn.functional.cross_entropy(model(torch.cat(xs)), torch.cat(ys)).backward()
        opt.step()
        opt.zero_grad()
    return {n: p.detach().clone() for n, p in model.named_parameters()}


# --- training cases ---------------------------------------------------------------------

def fsdp2_mlp_matches_gloo_and_one_process(ctx):
    got = compare(ctx, "mlp", reshard_after_forward=True)
    assert_params_close(got, reference_mlp(ctx), 1e-5, "mlp against one process")


def fsdp2_mlp_no_reshard_after_forward_matches_gloo(ctx):
    compare(ctx, "mlp", reshard_after_forward=False)


def fsdp2_transformer_matches_gloo(ctx):
    compare(ctx, "transformer", reshard_after_forward=True)


def fsdp2_transformer_no_reshard_after_forward_matches_gloo(ctx):
    compare(ctx, "transformer", reshard_after_forward=False)


def fsdp2_transformer_bf16_mixed_precision_matches_gloo(ctx):
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    compare(ctx, "transformer", tol4=2e-2, mp=mp)


def fsdp2_mlp_bf16_mixed_precision_matches_gloo(ctx):
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    compare(ctx, "mlp", tol4=2e-2, mp=mp)


def fsdp2_mixed_dtype_parameters_match_gloo(ctx):
    # float32 and (frozen) bfloat16 parameters in one unit: FSDP2 all-gathers them as one
    # uint8 buffer. The bfloat16 layer rounds as in the bf16 cases: the same tolerance.
    mp = None
    seen = []
    all_gather_single = dist.all_gather_single  # what FSDP2's all-gathers call
    def recording(output, input, *args, **kw):
        seen.append((input.dtype, dist.get_backend(kw.get("group", args[0] if args else None))))
        return all_gather_single(output, input, *args, **kw)
    dist.all_gather_single = recording
    try:
        compare(ctx, "mixed", tol4=2e-2, mp=mp)
    finally:
        dist.all_gather_single = all_gather_single
    assert (torch.uint8, "coll") in seen, "no uint8 all-gather on coll: %s" % sorted(set(seen))


def fsdp2_gradient_accumulation_matches_gloo(ctx):
    compare(ctx, "transformer", accumulate=2)


def fsdp2_gradient_accumulation_no_reshard_matches_gloo(ctx):
    compare(ctx, "mlp", accumulate=3, reshard_after_forward=False)


def fsdp2_gradient_divide_factor_premul_sum_matches_gloo(ctx):
    # A divide factor other than the world size: FSDP reduce-scatters with
    # ReduceOp.PREMUL_SUM(1 / factor) on coll. gloo refuses PREMUL_SUM, so its run sums
    # (set_force_sum_reduction_for_comms) and divides after. The factor is a power of two,
    # so scaling before or after the sum rounds alike: exact at 2 ranks.
    compare(ctx, "transformer", divide_factor=float(2 * ctx.world),
            gloo_kw={"force_sum": True})


# --- checkpoint cases -------------------------------------------------------------------

def shared_dir(ctx, pg):
    """A new directory made by rank 0, its path broadcast over `pg` (coll); removed when
    rank 0 exits."""
    path = [tempfile.mkdtemp(prefix="coll_fsdp2_dcp_") if ctx.rank == 0 else None]
    dist.broadcast_object_list(path, src=0, group=pg)
    if ctx.rank == 0:
        atexit.register(shutil.rmtree, path[0], ignore_errors=True)
    return path[0]


def step(model, opt, gen):
    x, y = batch("transformer", gen)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    opt.zero_grad()


def local_state(model, opt):
    """This rank's shards of the parameters and of Adam's state, copied."""
    state = {}
    for n, p in model.named_parameters():
        for k, v in opt.state[p].items():
            state[n + "." + k] = (v.to_local() if isinstance(v, DTensor) else v).detach().clone()
    return local_params(model), state


def dcp_roundtrip(ctx, use_async):
    """Save with dcp.save or dcp.async_save over coll, load into a fresh model. The checks
    that need no gather come first; the full state dict (all-gathered over coll) last."""
    mesh = mesh_for(ctx, None)
    pg = mesh.get_group()
    model = build("transformer", mesh, seed=1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    data = torch.Generator().manual_seed(5 + ctx.rank)
    for _ in range(3):
        step(model, opt, data)
    path = shared_dir(ctx, pg)
    sd = {"model": get_model_state_dict(model), "optim": get_optimizer_state_dict(model, opt)}
    assert_on_mesh({k: v for k, v in sd["model"].items()}, mesh, "saved model state")
    if use_async:
        future = dcp.async_save(sd, checkpoint_id=path, process_group=pg)
        future.result(timeout=60)
    else:
        dcp.save(sd, checkpoint_id=path, process_group=pg)
    dist.barrier(group=pg)
    assert os.path.exists(os.path.join(path, ".metadata")), os.listdir(path)

    fresh = build("transformer", mesh, seed=2)
    fresh_opt = torch.optim.Adam(fresh.parameters(), lr=1e-2)
    want_params, want_state = local_state(model, opt)
    before = local_params(fresh)
    assert any(not torch.equal(before[n], want_params[n]) for n in want_params), \
        "the fresh shards equal the trained ones before loading"
    sd2 = {"model": get_model_state_dict(fresh),
           "optim": get_optimizer_state_dict(fresh, fresh_opt)}
    dcp.load(sd2, checkpoint_id=path, process_group=pg)
    set_model_state_dict(fresh, sd2["model"])
    set_optimizer_state_dict(fresh, fresh_opt, sd2["optim"])
    assert_on_mesh(dict(fresh.named_parameters()), mesh, "loaded parameter")

    got_params, got_state = local_state(fresh, fresh_opt)
    assert_params_close(got_params, want_params, 0, "loaded shards")
    assert got_state, "Adam's state was not loaded"
    assert_params_close(got_state, want_state, 0, "loaded Adam state")
    # The same next step on both: the same parameters.
    step(model, opt, torch.Generator().manual_seed(99 + ctx.rank))
    step(fresh, fresh_opt, torch.Generator().manual_seed(99 + ctx.rank))
    assert_params_close(local_params(fresh), local_params(model), 0, "shards one step later")
    full = StateDictOptions(full_state_dict=True)
    got = get_model_state_dict(fresh, options=full)
    want = get_model_state_dict(model, options=full)
    assert not any(isinstance(v, DTensor) for v in got.values())
    assert_params_close(got, want, 0, "full state dicts one step later")
    dist.barrier(group=pg)


def dcp_save_load_fsdp2_on_coll(ctx):
    dcp_roundtrip(ctx, use_async=False)


def dcp_async_save_load_fsdp2_on_coll(ctx):
    dcp_roundtrip(ctx, use_async=True)


CASES = {f.__name__: f for f in [
    fsdp2_mlp_matches_gloo_and_one_process,
    fsdp2_mlp_no_reshard_after_forward_matches_gloo,
    fsdp2_transformer_matches_gloo,
    fsdp2_transformer_no_reshard_after_forward_matches_gloo,
    fsdp2_mlp_bf16_mixed_precision_matches_gloo,
    fsdp2_transformer_bf16_mixed_precision_matches_gloo,
    fsdp2_mixed_dtype_parameters_match_gloo,
    fsdp2_gradient_accumulation_matches_gloo,
    fsdp2_gradient_accumulation_no_reshard_matches_gloo,
    fsdp2_gradient_divide_factor_premul_sum_matches_gloo,
    dcp_save_load_fsdp2_on_coll,
    dcp_async_save_load_fsdp2_on_coll,
]}

if __name__ == "__main__":
    coll_harness.main(CASES, worlds=(2, 4))
