# SPDX-License-Identifier: MIT
"""torch.autocast("rill"), as OpenReg's autocast tests and CUDA's policies:
products in the lower precision, precision-hungry ops in float32, mixed
inputs promoted, the rest unchanged; a training step under autocast with a
GradScaler."""

import pytest
import torch


def test_products_run_in_the_autocast_dtype():
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    for dtype in (torch.bfloat16, torch.float16):
        with torch.autocast("rill", dtype=dtype):
            got = torch.mm(a.to("rill"), b.to("rill"))
            lin = torch.nn.functional.linear(a.to("rill"), b.t().to("rill"))
        assert got.dtype == dtype and lin.dtype == dtype
        want = torch.mm(a.to(dtype), b.to(dtype))
        assert torch.allclose(got.float().cpu(), want.float(), atol=1e-2, rtol=1e-2)


def test_precision_hungry_ops_run_in_float32_and_mixed_inputs_promote():
    x = torch.randn(4, 8, device="rill", dtype=torch.bfloat16)
    with torch.autocast("rill", dtype=torch.bfloat16):
        assert torch.exp(x).dtype == torch.float32
        assert torch.softmax(x, -1).dtype == torch.float32
        assert x.sum().dtype == torch.float32
        assert torch.nn.functional.layer_norm(x, (8,)).dtype == torch.float32
        assert torch.addcmul(torch.zeros(4, 8, device="rill"), x, x).dtype == torch.float32
        assert torch.relu(x).dtype == torch.bfloat16  # off the lists: unchanged
    assert torch.exp(x).dtype == torch.bfloat16  # outside autocast


def test_a_training_step_under_autocast_with_a_grad_scaler():
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    dev = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(),
                              torch.nn.Linear(32, 4)).to("rill")
    dev.load_state_dict(cpu.state_dict())
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = torch.nn.functional.cross_entropy(cpu(x), y)
    scaler = torch.amp.GradScaler("rill", init_scale=256.)
    opt = torch.optim.SGD(dev.parameters(), lr=0.1)
    with torch.autocast("rill", dtype=torch.bfloat16):
        loss = torch.nn.functional.cross_entropy(dev(x.to("rill")), y.to("rill"))
    assert loss.dtype == torch.float32
    assert abs(loss.item() - want.item()) < 2e-2
    before = [p.detach().cpu().clone() for p in dev.parameters()]
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 256.
    for p, old in zip(dev.parameters(), before):
        assert p.grad.dtype == torch.float32 and torch.isfinite(p.grad.cpu()).all()
        assert not torch.equal(p.detach().cpu(), old)


def test_binary_cross_entropy_is_refused_under_autocast():
    p = torch.rand(4, device="rill")
    with torch.autocast("rill", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="binary_cross_entropy_with_logits"):
            torch.nn.functional.binary_cross_entropy(p, torch.ones(4, device="rill"))
