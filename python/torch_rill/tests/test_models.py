# SPDX-License-Identifier: MIT
"""Models on rill: a training step gives the loss and gradients it gives on
the CPU (autograd is PyTorch's own)."""

import copy

import pytest
import torch
from torch import nn


def mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def cnn():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


class Tiny(nn.Module):
    """Embedding, a transformer encoder layer and a classifier."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(50, 32)
        self.encoder = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.out = nn.Linear(32, 10)

    def forward(self, tokens):
        return self.out(self.encoder(self.embed(tokens)).mean(1))


CASES = {
    "mlp": (mlp, lambda g: torch.randn(32, 784, generator=g)),
    "cnn": (cnn, lambda g: torch.randn(4, 3, 16, 16, generator=g)),
    "transformer": (Tiny, lambda g: torch.randint(0, 50, (4, 12), generator=g)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_training_step_matches_the_cpu(name):
    make, inputs = CASES[name]
    torch.manual_seed(0)
    cpu_model = make()
    rill_model = copy.deepcopy(cpu_model).to("rill")
    g = torch.Generator().manual_seed(1)
    x = inputs(g)
    target = torch.randint(0, 10, (x.shape[0],), generator=g)
    results = []
    for model, dev in ((cpu_model, "cpu"), (rill_model, "rill")):
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        loss = nn.functional.cross_entropy(model(x.to(dev)), target.to(dev))
        opt.zero_grad()
        loss.backward()
        grads = [p.grad.cpu() for p in model.parameters()]
        opt.step()
        results.append((loss.item(), grads, [p.detach().cpu() for p in model.parameters()]))
    (cpu_loss, cpu_grads, cpu_params), (rill_loss, rill_grads, rill_params) = results
    assert abs(cpu_loss - rill_loss) <= 1e-5 * max(1.0, abs(cpu_loss))
    for a, b in zip(cpu_grads + cpu_params, rill_grads + rill_params):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)
