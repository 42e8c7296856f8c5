# SPDX-License-Identifier: MIT
"""DistributedDataParallel over the "rill" backend: each rank trains on its
part of the batch, and the parameters end as one process's that trained on
the whole batch; the trace of a step shows the buckets' allreduces on the
backend's stream beside the backward's kernels on the compute stream."""

import copy
import json
import os
import tempfile

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from conftest import librill

BATCH = 16


def make_model():
    torch.manual_seed(1234)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.Tanh(),
                         nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))


def global_batch(step):
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(BATCH, 32, generator=g), torch.randn(BATCH, 8, generator=g)


def local_part(t):
    rank, size = dist.get_rank(), dist.get_world_size()
    per = BATCH // size
    return t[rank * per:(rank + 1) * per]


def train_step(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()


def test_ddp_equals_one_process_on_the_whole_batch():
    reference = make_model()
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    ddp = DDP(copy.deepcopy(reference).to("rill"), bucket_cap_mb=0.01)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    assert len(ddp.reducer._get_zeros_like_grad_buckets()) >= 1
    for step in range(4):
        x, y = global_batch(step)
        train_step(reference, ref_opt, x, y)
        train_step(ddp, opt, local_part(x).to("rill"), local_part(y).to("rill"))
    torch.rill.synchronize()
    worst = max((p.detach().cpu() - q.detach()).abs().max().item()
                for p, q in zip(ddp.module.parameters(), reference.parameters()))
    assert worst <= 1e-5, worst
    # The same on every rank, bit for bit.
    flat = torch.cat([p.detach().reshape(-1) for p in ddp.module.parameters()])
    gathered = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, flat)
    for other in gathered:
        assert torch.equal(other.cpu(), flat.cpu())


def _slices(path):
    """(track, cat, name, start us, end us, args) of the trace's slices."""
    with open(path) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    names = {e["tid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return [(names.get(e["tid"], ""), e["cat"], e["name"], float(e["ts"]),
             float(e["ts"]) + float(e["dur"]), e.get("args", {}))
            for e in events if e.get("ph") == "X"]


def test_trace_shows_bucket_allreduces_beside_the_backward():
    """One step of DDP traced: each bucket's allreduce is a collective that
    the backend's stream waits for, and the first bucket's allreduce was
    issued while the backward was still being queued (before the gradient
    of the first layer's weight, the backward's last product, was made).
    Whether the allreduces also overlap backward kernels in time depends
    on how busy the cores are: the test prints it."""
    torch.rill.name_ops(True)
    model = DDP(make_model().to("rill"), bucket_cap_mb=0.01)
    issued = []
    seen_by_last_grad = []

    def counting_allreduce(state, bucket):
        issued.append(bucket.index())
        return default_hooks.allreduce_hook(state, bucket)

    model.register_comm_hook(None, counting_allreduce)
    model.module[0].weight.register_hook(lambda g: seen_by_last_grad.append(len(issued)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(2):  # the buckets are rebuilt after the first step
        x, y = global_batch(step)
        train_step(model, opt, local_part(x).to("rill"), local_part(y).to("rill"))
    torch.rill.synchronize()
    x, y = global_batch(2)
    x, y = local_part(x).to("rill"), local_part(y).to("rill")
    path = os.path.join(tempfile.gettempdir(),
                        f"torch_rill_ddp_trace_{os.getuid()}_{os.getpid()}.json")
    lib = librill()
    issued.clear()
    seen_by_last_grad.clear()
    assert lib.rill_trace_start(path.encode()) == 0
    try:
        train_step(model, opt, x, y)
        torch.rill.synchronize()
    finally:
        assert lib.rill_trace_stop() == 0
        torch.rill.name_ops(False)
    try:
        slices = _slices(path)
    finally:
        os.unlink(path)
    buckets = len(model.reducer._get_zeros_like_grad_buckets())
    assert buckets >= 2, buckets
    assert sorted(issued) == list(range(buckets)), issued
    assert seen_by_last_grad and seen_by_last_grad[0] >= 1, seen_by_last_grad
    # The collectives run on the communication engine's track; the
    # backend's stream waits for each.
    allreduces = [s for s in slices if s[1] == "collective" and s[2].startswith("allreduce")]
    assert len(allreduces) == buckets, allreduces
    waits = [s for s in slices if s[0] == "stream c10d:rill" and s[1] == "wait"]
    assert len(waits) >= buckets, waits
    loss_backward = [s for s in slices if s[2].startswith("aten::mse_loss_backward")
                     and s[0].startswith("stream ")]
    assert len(loss_backward) == 1, loss_backward
    track, seq = loss_backward[0][0], loss_backward[0][5]["seq"]
    backward = [s for s in slices if s[0] == track and s[5].get("seq", -1) >= seq
                and s[1] in ("kernel", "host function")]
    first = min(allreduces, key=lambda s: s[3])
    last_end = max(s[4] for s in backward)
    overlapping = [k for k in backward if any(a[3] < k[4] and k[3] < a[4] for a in allreduces)]
    print(f"\nrank {dist.get_rank()}: {buckets} buckets, {len(backward)} backward commands "
          f"from {min(s[3] for s in backward) - first[3]:+.0f} to {last_end - first[3]:+.0f} us "
          f"of the first allreduce's start; allreduces (start, us long): "
          f"{[(round(a[3] - first[3]), round(a[4] - a[3])) for a in sorted(allreduces, key=lambda s: s[3])]}; "
          f"{len(overlapping)} backward commands overlap an allreduce in time")
