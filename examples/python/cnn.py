# SPDX-License-Identifier: MIT
"""A small CNN written for PyTorch, run on rill: only the three imports
differ from the PyTorch program (`import torch` and its nn and functional).
Forward only: rill computes no gradients. python/tests/test_torch_models.py
runs this file under both and compares the numbers."""

import numpy as np

import rill.compat.torch as torch
import rill.compat.torch.nn as nn
import rill.compat.torch.nn.functional as F


class CNN(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, stride=2, padding=1)
        self.conv3 = nn.Conv2d(16, 16, kernel_size=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(2 * 16 * 4 * 4, classes)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))        # [n, 8, 8, 8]
        x = F.relu(self.conv2(x))                   # [n, 16, 4, 4]
        y = F.avg_pool2d(self.conv3(x), 3, stride=1, padding=1)
        x = torch.cat([x, y], dim=1)                # [n, 32, 4, 4]
        x = torch.flatten(x, 1)
        return F.log_softmax(self.fc(x), dim=-1)


def inputs(n=4):
    rng = np.random.default_rng(1)
    return torch.tensor(rng.standard_normal((n, 3, 16, 16)), dtype=torch.float32)


def run(model):
    """The model's log-probabilities on inputs() and the class of each image."""
    model.eval()
    with torch.no_grad():
        out = model(inputs())
        values, classes = torch.max(out, dim=1)
    return out, values, classes


def main():
    torch.manual_seed(0)
    out, values, classes = run(CNN())
    print("log-probabilities", tuple(out.shape))
    print("classes", classes.tolist(), "best log-probability %.4f" % values.max().item())


if __name__ == "__main__":
    main()
