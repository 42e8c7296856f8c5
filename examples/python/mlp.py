# SPDX-License-Identifier: MIT
"""A small MLP written for PyTorch, run on rill: only the three imports
differ from the PyTorch program (`import torch` and its nn and functional).
Forward only: rill computes no gradients. python/tests/test_torch_models.py
runs this file under both and compares the numbers."""

import numpy as np

import rill.compat.torch as torch
import rill.compat.torch.nn as nn
import rill.compat.torch.nn.functional as F


class MLP(nn.Module):
    def __init__(self, d_in=20, hidden=64, classes=5):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.drop = nn.Dropout(0.1)
        self.head = nn.Sequential(nn.GELU(), nn.Linear(hidden, classes))

    def forward(self, x):
        x = (x - x.mean(dim=0, keepdim=True)) / (x.abs().max(dim=0, keepdim=True).values + 1e-3)
        h = F.relu(self.fc1(x))
        h = self.drop(torch.tanh(self.fc2(h)) + torch.sigmoid(h[:, :1]) * 0.5)
        return self.head(h)


def inputs(n=32, d_in=20, classes=5):
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal((n, d_in))).float()  # float64 data
    y = torch.from_numpy(rng.integers(0, classes, size=n))
    return x, y


def run(model):
    """The model's logits, loss, probabilities and predictions on inputs()."""
    x, y = inputs()
    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        probs = F.softmax(logits, dim=1)
        pred = probs.argmax(dim=1)
    return logits, loss, probs, pred


def main():
    torch.manual_seed(0)
    logits, loss, probs, pred = run(MLP())
    print("logits", tuple(logits.shape), "loss %.4f" % loss.item())
    print("probabilities sum to", np.round(probs.sum(dim=1).numpy(), 4)[:4])
    print("predictions", pred.tolist()[:8])


if __name__ == "__main__":
    main()
