# SPDX-License-Identifier: MIT
"""The ops of a classifier's loss and bookkeeping that run as rill kernels
queued on the current stream: nll_loss and its backward (cross_entropy's
second half), nll_loss2d and its backward (the loss at each position of
[N, C, d1, ...] inputs: segmentation), with the same bits as the CPU's,
and the int64 add of batch norm's num_batches_tracked. A training step of
a classifier or of a segmentation network then runs no host function; the
cases the kernels do not take go to PyTorch's CPU kernels with the CPU's
results and errors."""

import re
import textwrap

import pytest
import torch
import torch.nn.functional as F

from conftest import delay, traced_names


def randn(*shape, seed=0):
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed))


def targets(n, classes, ignore=None, seed=3):
    t = torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(seed))
    if ignore is not None:
        t[::7] = ignore
    return t


def exact(got, want):
    assert got.device.type == "rill" and got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0, equal_nan=True)


def on_a_cpu_device():
    return torch.rill.get_device_properties().type == "cpu"


CASES = {
    "7x5": (7, 5),
    "5000x37": (5000, 37),  # a plain sum of these rows differs from PyTorch's cascade
    "70000x3": (70000, 3),  # the per-row losses over several blocks
    # Over positions (nll_loss2d):
    "2x5x3x7": (2, 5, 3, 7),
    "4x19x30x50": (4, 19, 30, 50),  # 6,000 positions: PyTorch's cascade matters
    "1x3x250x280": (1, 3, 250, 280),  # 70,000 positions over several blocks
    "3x4x100": (3, 4, 100),  # [N, C, L]: PyTorch reshapes it for nll_loss2d
    "2x3x4x5x6": (2, 3, 4, 5, 6),  # [N, C, D, H, W] likewise
}


@pytest.mark.parametrize("shape", list(CASES.values()), ids=list(CASES))
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 1])
def test_nll_loss_and_its_backward_are_the_cpus_bit_for_bit(shape, reduction, weighted,
                                                             ignore_index):
    n, c, *dims = shape
    x = F.log_softmax(randn(*shape, seed=1) * 4, 1)
    t = targets(x[:, 0].numel(), c, ignore=-100 if ignore_index == -100 else None)
    t = t.reshape(n, *dims)
    w = torch.rand(c, generator=torch.Generator().manual_seed(5)) + 0.5 if weighted else None
    outs = {}
    for dev in ("cpu", "rill"):
        xd = x.detach().clone().to(dev).requires_grad_()
        loss = F.nll_loss(xd, t.to(dev), weight=None if w is None else w.to(dev),
                          ignore_index=ignore_index, reduction=reduction)
        loss.backward(randn(*loss.shape, seed=7).to(dev))
        outs[dev] = (loss.detach(), xd.grad)
    for got, want in zip(outs["rill"], outs["cpu"]):
        exact(got, want)


def test_nll_loss_over_positions_in_other_layouts_is_the_cpus():
    """A channels-last or sliced input (read through a copy), an expanded
    gradient, and the backward of both (PyTorch's CPU kernel refuses the
    channels-last one): the CPU's results, or its error at the call."""
    x = F.log_softmax(randn(2, 6, 5, 4, seed=1), 1)
    t = targets(40, 6, ignore=-100).reshape(2, 5, 4)
    for reduction in ("none", "mean"):
        for xs in (x.contiguous(memory_format=torch.channels_last), x[:, :, 1:, ::2]):
            ts = t[:, :xs.shape[2], :xs.shape[3]]
            exact(F.nll_loss(xs.to("rill"), ts.to("rill"), reduction=reduction),
                  F.nll_loss(xs, ts, reduction=reduction))
    grads = {}
    for dev in ("cpu", "rill"):
        xd = x.detach().to(dev).requires_grad_()
        F.nll_loss(xd, t.to(dev), reduction="none").backward(torch.ones(1, 1, 1).to(dev)
                                                             .expand(2, 5, 4))
        grads[dev] = xd.grad
    exact(grads["rill"], grads["cpu"])
    for xs in (x.contiguous(memory_format=torch.channels_last), x[:, :, 1:, ::2]):
        ts = t[:, :xs.shape[2], :xs.shape[3]]
        for dev in ("cpu", "rill"):
            xd = xs.detach().to(dev).requires_grad_()
            try:
                F.nll_loss(xd, ts.to(dev)).backward()
                grads[dev] = xd.grad.cpu()
            except RuntimeError as e:  # at the call, not at a later synchronize
                grads[dev] = str(e).split("\n")[0]
        if isinstance(grads["cpu"], str):
            assert grads["rill"] == grads["cpu"]
        else:
            torch.testing.assert_close(grads["rill"], grads["cpu"], rtol=0, atol=0)


def test_nll_loss_of_one_row_and_of_ignored_rows_is_the_cpus():
    """A [C] input with a 0-dim target, each reduction, weighted and not;
    a batch whose rows are all ignored (mean NaN, as PyTorch's)."""
    x, w = F.log_softmax(randn(6, seed=2), 0), torch.arange(1.0, 7.0)
    for reduction in ("none", "sum", "mean"):
        for weight in (None, w):
            want = F.nll_loss(x, torch.tensor(4), weight=weight, reduction=reduction)
            got = F.nll_loss(x.to("rill"), torch.tensor(4, device="rill"),
                             weight=None if weight is None else weight.to("rill"),
                             reduction=reduction)
            exact(got, want)
    xs, t = randn(3, 4, seed=1), torch.tensor([2, 2, 2])
    for reduction in ("sum", "mean"):
        exact(F.nll_loss(xs.to("rill"), t.to("rill"), ignore_index=2, reduction=reduction),
              F.nll_loss(xs, t, ignore_index=2, reduction=reduction))


def test_the_loss_is_queued_and_its_mean_divisor_stays_on_the_device():
    """forward and backward return at once on a stream held back by a host
    function (no synchronize: the mean's total weight is read on the
    device), and give the CPU's values once it runs."""
    for shape in ((8, 5), (2, 5, 3, 4)):
        x = F.log_softmax(randn(*shape, seed=1), 1)
        t = targets(x[:, 0].numel(), 5, ignore=-100).reshape(x[:, 0].shape)
        xd = x.to("rill").requires_grad_()
        td = t.to("rill")
        s = torch.rill.Stream()
        s.wait_stream(torch.rill.current_stream())
        with torch.rill.stream(s):
            delay(s, 0.3)
            loss = F.nll_loss(xd, td)
            loss.backward()
            assert not s.query()
        torch.rill.current_stream().wait_stream(s)
        xc = x.clone().requires_grad_()
        want = F.nll_loss(xc, t)
        want.backward()
        exact(loss.detach(), want.detach())
        exact(xd.grad, xc.grad)


def test_cases_the_kernels_do_not_take_are_the_cpus():
    x, t = F.log_softmax(randn(5, 4, seed=1), 1), targets(5, 4)
    # float64, uint8 targets, an empty batch: the fallback, the CPU's results.
    exact(F.nll_loss(x.double().to("rill"), t.to("rill")), F.nll_loss(x.double(), t))
    exact(F.nll_loss(x.to("rill"), t.byte().to("rill")), F.nll_loss(x, t.byte()))
    empty, none = torch.zeros(0, 4), torch.zeros(0, dtype=torch.long)
    exact(F.nll_loss(empty.to("rill"), none.to("rill")), F.nll_loss(empty, none))
    # Bad shapes and dtypes: PyTorch's own errors.
    for bad in (lambda d: F.nll_loss(x.to(d), t[:3].to(d)),
                lambda d: F.nll_loss(x.to(d), t.float().to(d)),
                lambda d: F.nll_loss(x.to(d), t.to(d), weight=torch.ones(3).to(d))):
        with pytest.raises(Exception) as cpu_error:
            bad("cpu")
        with pytest.raises(type(cpu_error.value), match=re.escape(str(cpu_error.value)[:30])):
            bad("rill")
    # A rill input with CPU targets: PyTorch's device-mismatch error.
    with pytest.raises(RuntimeError, match="device"):
        F.nll_loss(x.to("rill"), t)


@pytest.mark.skipif(not on_a_cpu_device(), reason="a CUDA kernel traps, ending the device")
def test_a_target_out_of_range_fails_the_stream_naming_the_op():
    """The CPU raises at once; the kernel cannot see the targets before it
    reads them: the error surfaces at the next synchronize, as CUDA's
    device-side assert does, and the stream runs again once cleared."""
    x, t = F.log_softmax(randn(4, 5, seed=1), 1), torch.tensor([0, 4, 9, 1])
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        F.nll_loss(x, t)
    # Over positions: [1, 5, 2, 2], the position is the target's in [N, H, W].
    x4, t4 = x.t().reshape(1, 5, 2, 2).contiguous(), t.reshape(1, 2, 2)
    with pytest.raises(IndexError, match="Target 9 is out of bounds"):
        F.nll_loss(x4, t4)
    s = torch.rill.Stream()
    s.wait_stream(torch.rill.current_stream())
    xd, td, x4d, t4d = x.to("rill"), t.to("rill"), x4.to("rill"), t4.to("rill")
    for xs, ts, reduction in ((xd, td, "none"), (xd, td, "mean"), (x4d, t4d, "none"),
                              (x4d, t4d, "sum")):
        with torch.rill.stream(s):
            F.nll_loss(xs, ts, reduction=reduction)  # no error yet: the target is read later
        try:
            with pytest.raises(RuntimeError, match=r"nll_loss_f32.*target 9 at position 2 is out "
                                                   r"of range for 5 classes"):
                s.synchronize()
        finally:
            s.clear_error()
    with torch.rill.stream(s):
        exact(F.nll_loss(xd, td.clamp(max=4)), F.nll_loss(x, t.clamp(max=4)))


def test_num_batches_tracked_and_integer_adds_are_the_cpus():
    """The int64 add of a CPU number (batch norm's counter), in place, into
    a new tensor and out=, wrapping past 2^63 as PyTorch does; other
    integer cases go to the fallback."""
    a = torch.tensor([5, -3, 2**63 - 2, 0])
    for fn in (lambda v: v + 7, lambda v: v - 3, lambda v: v.add(2, alpha=-4),
               lambda v: v + 3 * 2**62,  # a uint64 number past int64's range
               lambda v: v.clone().add_(3), lambda v: torch.add(v, 1, out=torch.empty_like(v)),
               lambda v: v.clone().sub_(torch.tensor(2, dtype=torch.int32)),
               lambda v: v[::2] + 1,  # strided, a tensor operand, a float result: the fallback
               lambda v: v + torch.tensor([1, 2, 3, 4]).to(v.device),
               lambda v: v + 0.5):
        exact(fn(a.to("rill")), fn(a))
    # A float alpha: PyTorch's error at the call, as on the CPU, nothing queued.
    with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
        a.add(3, alpha=2.5)
    with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
        a.to("rill").add_(3, alpha=2.5)
    torch.rill.synchronize()
    bn = torch.nn.BatchNorm1d(3).to("rill")
    for _ in range(3):
        bn(randn(4, 3, seed=1).to("rill"))
    assert bn.num_batches_tracked.device.type == "rill"
    assert bn.num_batches_tracked.item() == 3


def assert_step_runs_no_host_function(tmp_path, setup, loss_args, wants):
    """Two SGD steps of the model m on x and y (made by setup) with
    cross_entropy(m(x), y, loss_args): rill's trace, which names each
    command after its aten op, shows no host function and each of wants."""
    code = "import torch, torch_rill\n" + textwrap.dedent(setup) + textwrap.dedent(f"""
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x), y, {loss_args}).backward()
            opt.step()
        torch.rill.synchronize()
    """)
    names = traced_names(tmp_path, code)
    hosts = sorted(n for n in names if n.endswith("(host function)"))
    assert not hosts, hosts
    for want in wants:
        assert want in names, sorted(names)


def test_a_classifier_step_runs_no_host_function(tmp_path):
    """A training step of a small classifier with batch norm and cross
    entropy (forward, backward, SGD) runs every op as rill's kernels;
    before these kernels, nll_loss, its backward and the batch counter's
    add ran PyTorch's CPU kernels as host functions."""
    assert_step_runs_no_host_function(tmp_path, """
        m = torch.nn.Sequential(torch.nn.Linear(12, 16), torch.nn.BatchNorm1d(16),
                                torch.nn.ReLU(), torch.nn.Linear(16, 4)).to("rill")
        x = torch.randn(8, 12, device="rill")
        y = torch.tensor([0, 1, 2, 3, 3, 2, 1, 0], device="rill")
    """, "", ("aten::nll_loss_forward (nll_loss_f32)",
              "aten::nll_loss_backward (nll_loss_backward_f32)",
              "aten::add_ (add_scalar_i64)"))


def test_a_segmentation_step_runs_no_host_function(tmp_path):
    """A training step of a small fully convolutional network with cross
    entropy at each pixel (and an ignored label) runs its loss as rill's
    kernels: before them, nll_loss2d and its backward ran PyTorch's CPU
    kernels as host functions."""
    assert_step_runs_no_host_function(tmp_path, """
        m = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8),
                                torch.nn.ReLU(), torch.nn.Conv2d(8, 4, 1)).to("rill")
        x = torch.randn(2, 3, 8, 8, device="rill")
        y = torch.randint(0, 4, (2, 8, 8))
        y[:, 0, :] = 255
        y = y.to("rill")
    """, "ignore_index=255", ("aten::nll_loss2d_forward (nll_loss_f32)",
                              "aten::nll_loss2d_backward (nll_loss_backward_f32)"))
