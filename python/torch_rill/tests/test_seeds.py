# SPDX-License-Identifier: MIT
"""Seed 003's examples (torch.cuda streams and events) on real PyTorch with
the device rill: the page's code as written, its import line
`import rill.compat.torch as torch` giving PyTorch itself with torch.cuda
served by torch.rill. The page's own lines run through doctest (its printed
line must match); the checks after each example are PyTorch's (the seed
file's checks are for rill's own tensors, which python/tests runs)."""

import doctest
import os
import re
import sys

import numpy as np
import pytest
import torch

SEED = os.path.join(os.path.dirname(__file__), "..", "..", "tests", "seeds",
                    "seed003_torch_cuda_stream_event.txt")


def page_examples():
    """The page's examples, one list per numbered section, without the
    lines after each "Checks:" (rill's own checks)."""
    with open(SEED, encoding="utf-8") as f:
        lines = f.read().split("\n")
    sections, in_checks = [], False
    for index, line in enumerate(lines):
        if re.match(r"^\d+(\.\d+)*\.? ", line):
            sections.append([])
            in_checks = False
        elif line.startswith("Checks:"):
            in_checks = True
        elif sections and not in_checks:
            sections[-1].append((index, line))
    parser = doctest.DocTestParser()
    out = []
    for section in sections:
        text = "\n".join(line for _, line in section) + "\n"
        out.append(parser.get_examples(text))
    return out


@pytest.fixture(scope="module")
def namespace():
    os.environ.pop("RILL_COMPAT_TORCH", None)  # the default: PyTorch where torch_rill is found
    for name in [m for m in sys.modules if m.startswith("rill.compat.torch")]:
        del sys.modules[name]
    return {}


def run_section(index, namespace):
    examples = page_examples()[index]
    assert examples, f"section {index} of the seed has no example"
    test = doctest.DocTest(examples, namespace, f"seed003 section {index}", SEED, 0, None)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    out = []
    result = runner.run(test, out=out.append, clear_globs=False)
    assert result.failed == 0, "".join(out)
    namespace.update(test.globs)  # DocTest ran in a copy
    return namespace


def test_the_import_line_gives_pytorch_with_torch_cuda_on_rill(namespace):
    import rill.compat.torch as compat

    assert compat.Tensor is torch.Tensor
    assert compat.cuda is torch.rill and compat.npu is torch.rill
    assert compat.randn(2, device="cuda").device.type == "rill"
    assert compat.device("cuda:0") == torch.device("rill:0")
    assert isinstance(torch.device("cpu"), compat.device)
    import rill.compat.torch.nn.functional as F

    assert F is torch.nn.functional


def test_streams(namespace):
    ns = run_section(0, namespace)
    y, z, s1, s2 = ns["y"], ns["z"], ns["s1"], ns["s2"]
    assert isinstance(y, torch.Tensor) and y.device.type == "rill" and z.device.type == "rill"
    assert s1.query() and s2.query()
    yn, zn = y.cpu().numpy(), z.cpu().numpy()
    assert abs(yn.std() - 2) < 0.02 and abs(yn.mean()) < 0.02
    assert abs(zn.std() - 1) < 0.01 and abs(zn.mean() - 1) < 0.01


def test_interprocess_event(namespace):
    ns = run_section(1, namespace)
    event, new_event, handle = ns["event"], ns["new_event"], ns["ipc_handle"]
    assert new_event is not event and len(handle) == 64
    torch.rill.synchronize()
    assert new_event.query() and event.query()


def test_timing(namespace):
    ns = run_section(2, namespace)
    elapsed, x, y = ns["elapsed_time"], ns["x"], ns["y"]
    assert type(elapsed) is float and elapsed > 0
    xn = x.cpu().numpy()
    assert np.array_equal(y.cpu().numpy(), xn * xn)


def test_ordering_with_an_event(namespace):
    ns = run_section(3, namespace)
    a, c, stream2 = ns["a"], ns["c"], ns["stream2"]
    assert stream2.query()
    assert np.array_equal(c.cpu().numpy(), a.cpu().numpy() + 1)
