"""torch.distributed.pipelining on the "coll" backend against gloo and against the unsplit
model: an MLP of 8 Linear+Tanh blocks cut into equal stages, one training step (4
micro-batches of 2 rows, MSE loss, SGD) under ScheduleGPipe and Schedule1F1B: a 2-stage
pipeline at world 2 and a 4-stage one at world 4 (one stage per rank), and at world 2 also
ScheduleInterleaved1F1B with 4 stages, two per rank. The stages learn their input shapes at
run time (the stages' metadata travels by send_object_list/recv_object_list); the
activations and their gradients by batch_isend_irecv/isend/irecv on the stage's group.

Reference: the whole model on this rank, the same 4 micro-batches one after the other
(forward, loss, backward of each), the gradients divided by 4 (the schedules' scale_grads),
the same SGD step. The last stage's 4 losses and every stage's parameters after the step
must equal the reference bit for bit, and equal gloo's: the pipeline runs the same
kernels on the same micro-batches (point-to-point moves bytes and changes none) and
accumulates each parameter's gradient over the micro-batches in the same order (0 to 3) as
the reference does."""
import copy
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import coll_harness  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B,  # noqa: E402
                                          ScheduleGPipe, ScheduleInterleaved1F1B)

BLOCKS = 8
WIDTH = 12
BATCH = 8
MICROBATCHES = 4
LR = 0.1


def full_model():
    torch.manual_seed(2024)
    layers = []
    for _ in range(BLOCKS):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()]
    return torch.nn.Sequential(*layers)


def batch():
    g = torch.Generator().manual_seed(99)
    return torch.randn(BATCH, WIDTH, generator=g), torch.randn(BATCH, WIDTH, generator=g)


def loss_fn(output, target):
    return torch.nn.functional.mse_loss(output, target)


def stage_module(model, stage, stages):
    per = len(model) // stages
    return copy.deepcopy(model[stage * per:(stage + 1) * per])


def reference(stages):
    """The unsplit model, micro-batch by micro-batch: (losses, {stage: its parameters after
    the step})."""
    model = full_model()
    x, y = batch()
    losses = []
    for xm, ym in zip(x.chunk(MICROBATCHES), y.chunk(MICROBATCHES)):
        loss = loss_fn(model(xm), ym)
        loss.backward()
        losses.append(loss.detach())
    for p in model.parameters():
        p.grad.div_(MICROBATCHES)
    torch.optim.SGD(model.parameters(), lr=LR).step()
    return losses, {s: [p.detach().clone() for p in stage_module(model, s, stages).parameters()]
                    for s in range(stages)}


def pipeline_step(ctx, group, schedule, stages):
    """One step on this rank's stages (stage s lives on rank s % world); returns (losses on
    the rank holding the last stage, else None; {stage: parameters after the step})."""
    model = full_model()
    x, y = batch()
    mine = [s for s in range(stages) if s % ctx.world == ctx.rank]
    pipe = [PipelineStage(stage_module(model, s, stages), s, stages, torch.device("cpu"),
                          group=group) for s in mine]
    if schedule is ScheduleInterleaved1F1B:
        sched = schedule(pipe, n_microbatches=MICROBATCHES, loss_fn=loss_fn)
    else:
        assert len(pipe) == 1
        sched = schedule(pipe[0], n_microbatches=MICROBATCHES, loss_fn=loss_fn)
    for st in pipe:  # the stage talks over the group asked for (None: the default, coll)
        assert dist.get_backend(st.group) == ("coll" if group is None else "gloo")
    params = [p for st in pipe for p in st.submod.parameters()]
    opt = torch.optim.SGD(params, lr=LR)
    first, last = 0 in mine, stages - 1 in mine
    losses = [] if last else None
    args = (x,) if first else ()
    kwargs = dict(target=y, losses=losses) if last else {}
    sched.step(*args, **kwargs)
    opt.step()
    return losses, {s: [p.detach().clone() for p in st.submod.parameters()]
                    for s, st in zip(mine, pipe)}


def compare(ctx, schedule, stages):
    ref_losses, ref_params = reference(stages)
    want_losses, want_params = pipeline_step(ctx, ctx.gloo, schedule, stages)
    got_losses, got_params = pipeline_step(ctx, None, schedule, stages)  # the default: coll
    name = "%s with %d stages" % (schedule.__name__, stages)
    assert got_params.keys() == want_params.keys() and got_params, name
    if got_losses is not None:
        assert len(got_losses) == MICROBATCHES, (name, got_losses)
        for i, (g, w, r) in enumerate(zip(got_losses, want_losses, ref_losses)):
            assert torch.equal(g, w), "%s: loss %d %s, gloo's %s" % (name, i, g, w)
            assert torch.equal(g, r), "%s: loss %d %s, unsplit model's %s" % (name, i, g, r)
    else:
        assert want_losses is None
    start = full_model()
    for s, params in got_params.items():
        before = list(stage_module(start, s, stages).parameters())
        for i, (g, w, r, b) in enumerate(zip(params, want_params[s], ref_params[s], before)):
            what = "%s: stage %d parameter %d" % (name, s, i)
            assert torch.equal(g, w), what + " differs from gloo's"
            assert torch.equal(g, r), what + " differs from the unsplit model's (max %g)" % (
                (g - r).abs().max())
            assert not torch.equal(g, b), what + " did not move"


def gpipe_matches_unsplit_model(ctx):
    compare(ctx, ScheduleGPipe, ctx.world)


def one_f_one_b_matches_unsplit_model(ctx):
    compare(ctx, Schedule1F1B, ctx.world)


def interleaved_1f1b_two_stages_per_rank_matches_unsplit_model(ctx):
    compare(ctx, ScheduleInterleaved1F1B, 2 * ctx.world)


CASES = {f.__name__: f for f in [
    gpipe_matches_unsplit_model,
    one_f_one_b_matches_unsplit_model,
    interleaved_1f1b_two_stages_per_rank_matches_unsplit_model,
]}

if __name__ == "__main__":
    coll_harness.main(CASES, worlds={
        2: list(CASES),
        4: ["gpipe_matches_unsplit_model", "one_f_one_b_matches_unsplit_model"]})
