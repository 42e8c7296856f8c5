# SPDX-License-Identifier: MIT
"""torch.compile on rill tensors: Dynamo and AOTAutograd trace, rill's
kernels run the traced ops; inductor, which generates no code for rill,
refuses with a sentence that names what to use instead."""

import pytest
import torch


def model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                               torch.nn.Linear(32, 4)).to("rill")


def test_aot_eager_compiles_a_training_step_with_eagers_results():
    torch._dynamo.reset()
    eager, compiled = model(), model()
    step = torch.compile(lambda m, x: torch.nn.functional.log_softmax(m(x), -1).sum(),
                         backend="aot_eager")
    x = torch.randn(8, 16, device="rill")
    want = torch.nn.functional.log_softmax(eager(x), -1).sum()
    want.backward()
    got = step(compiled, x)
    got.backward()
    assert torch.allclose(got.cpu(), want.cpu(), atol=1e-5)
    for a, b in zip(compiled.parameters(), eager.parameters()):
        assert a.grad.device.type == "rill"
        assert torch.allclose(a.grad.cpu(), b.grad.cpu(), atol=1e-5)


def test_inductor_refuses_naming_what_to_use_instead():
    torch._dynamo.reset()
    with pytest.raises(Exception) as raised:
        torch.compile(model())(torch.randn(8, 16, device="rill"))
    text = str(raised.value)
    assert "inductor (the default backend) generates no code for the rill device" in text
    assert 'backend="aot_eager"' in text and "torch.rill.graph" in text
