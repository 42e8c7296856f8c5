# SPDX-License-Identifier: MIT
"""The fallback: ops without a rill kernel run PyTorch's CPU kernel on the
same memory as a host function queued on the current stream, so they neither
block the host nor leave the stream's order; ops that must synchronize still
work, and refuse a capture."""

import gc
import re
import time
import warnings

import pytest
import torch
import torch.nn.functional as F

import rill

from conftest import as_on_the_cpu, delay, rill_stream

DELAY = 0.4  # seconds of a host function queued ahead of the op


def cpu_and_rill(*tensors):
    return tensors, tuple(t.to("rill") for t in tensors)


def check(got, want):
    if isinstance(want, (tuple, list)):
        for g, w in zip(got, want):
            check(g, w)
    else:
        torch.testing.assert_close(got.cpu(), want)


g = torch.Generator().manual_seed(4)
X = torch.randn(6, 5, generator=g)
I = torch.randint(-50, 50, (6, 5), generator=g)
IDX = torch.tensor([4, 0, 2, 2])

QUEUED = {
    "cumsum": lambda x, i, idx: torch.cumsum(x, 1),
    "sort": lambda x, i, idx: torch.sort(x, 0),
    "where": lambda x, i, idx: torch.where(x > 0, x, x * 2.0),
    "index_select": lambda x, i, idx: torch.index_select(x, 0, idx),
    "integer ops": lambda x, i, idx: (i * 3 + i) // 7 % 5,
    "out=": lambda x, i, idx: torch.cumprod(x, 0, out=torch.empty(0, device=x.device)),
    "in place": lambda x, i, idx: x.clone().clamp_(-0.5, 0.5).cumsum_(0),
    "conv2d": lambda x, i, idx: torch.nn.functional.conv2d(x.view(1, 1, 6, 5), x[:3, :3].view(1, 1, 3, 3)),
}


@pytest.mark.parametrize("name", QUEUED)
def test_a_fallback_op_is_queued_behind_the_streams_work(name):
    op = QUEUED[name]
    cpu, dev = cpu_and_rill(X, I, IDX)
    want = op(*cpu)
    op(*dev)  # the first call may import the op's meta kernel, written in Python
    torch.rill.synchronize()
    delay(torch.rill.current_stream(), DELAY)
    start = time.monotonic()
    got = op(*dev)
    submitted = time.monotonic() - start
    torch.rill.synchronize()
    assert submitted < DELAY / 2, f"{name} blocked the host for {submitted:.3f} s"
    check(got, want)


def test_fallback_ops_keep_the_order_of_native_kernels_on_one_stream():
    x = torch.randn(1000, generator=g)
    r = x.to("rill")
    torch.rill.synchronize()
    delay(torch.rill.current_stream(), 0.1)
    a = r * 2.0  # a rill kernel
    b = torch.cumsum(a, 0)  # the fallback reads it
    c = b + 1.0  # a rill kernel reads the fallback's result
    c.clamp_(max=5.0)  # the fallback writes in place
    d = c * 3.0
    torch.testing.assert_close(d.cpu(), (torch.cumsum(x * 2.0, 0) + 1.0).clamp(max=5.0) * 3.0)


def test_fallback_ops_keep_the_order_across_two_streams():
    x = torch.randn(4096, generator=g)
    r = x.to("rill")
    side = torch.rill.Stream()
    side.wait_stream(torch.rill.current_stream())
    delay(side, 0.2)
    with torch.rill.stream(side):
        a = torch.cumsum(r, 0)  # behind the side stream's delay
        a.mul_(2.0)
    torch.rill.current_stream().wait_stream(side)
    b = torch.sort(a).values  # the current stream's fallback waits for the side's
    other = torch.rill.Stream()
    other.wait_stream(torch.rill.current_stream())
    with torch.rill.stream(other):
        c = b - 1.0
    torch.rill.current_stream().wait_stream(other)
    torch.testing.assert_close(c.cpu(), torch.sort(torch.cumsum(x, 0) * 2.0).values - 1.0)


def test_an_input_of_a_fallback_op_on_a_side_stream_is_not_reused_early():
    """test_memory's check with the side stream's work a fallback op: the
    host function holds the memory it reads until it ran."""
    side = torch.rill.Stream()
    n = 1 << 14
    bad = 0
    for round in range(30):
        tmp = torch.full((n,), float(round), device="rill", dtype=torch.float64)
        side.wait_stream(torch.rill.current_stream())
        delay(side, 0.002)
        with torch.rill.stream(side):
            result = torch.cumsum(tmp, 0)
        del tmp  # no record_stream
        fresh = torch.full((n,), -1.0, device="rill", dtype=torch.float64)
        torch.rill.current_stream().wait_stream(side)
        want = torch.cumsum(torch.full((n,), float(round), dtype=torch.float64), 0)
        bad += int(not torch.equal(result.cpu(), want))
        del fresh
    assert bad == 0


def test_ops_whose_output_shape_depends_on_data_still_work_behind_queued_work():
    x = torch.tensor([0.0, 3.0, 0.0, 1.0, 3.0], dtype=torch.float64)
    r = x.to("rill")
    torch.rill.synchronize()
    delay(torch.rill.current_stream(), 0.1)
    r.mul_(2)  # queued behind the delay: the ops below see it
    x.mul_(2)
    check(r.nonzero(), x.nonzero())
    check(torch.unique(r), torch.unique(x))
    check(r[r > 1], x[x > 1])
    check(torch.repeat_interleave(r.long()), torch.repeat_interleave(x.long()))
    assert r.max().item() == 6.0


def test_random_ops_draw_in_submit_order_and_equal_the_cpus():
    torch.manual_seed(11)
    want = [torch.randn(50), torch.rand(50), torch.randint(0, 9, (50,)),
            torch.empty(50).uniform_(2.0, 3.0), torch.empty(50).normal_(), torch.randperm(20)]
    delay(torch.rill.current_stream(), 0.1)
    torch.manual_seed(11)
    got = [torch.randn(50, device="rill"), torch.rand(50, device="rill"),
           torch.randint(0, 9, (50,), device="rill"),
           torch.empty(50, device="rill").uniform_(2.0, 3.0),
           torch.empty(50, device="rill").normal_(), torch.randperm(20, device="rill")]
    torch.manual_seed(0)  # a later seed does not change what was drawn
    for a, b in zip(got, want):
        assert torch.equal(a.cpu(), b)


def raises_as_on_the_cpu(case, cpu, dev):
    with pytest.raises(Exception) as cpu_error:
        case(*cpu)
    with pytest.raises(type(cpu_error.value),
                       match=re.escape(str(cpu_error.value).splitlines()[0])):
        case(*dev)


def test_a_dimension_out_of_range_raises_at_submit_without_waiting():
    cpu, dev = cpu_and_rill(X.double())
    torch.rill.synchronize()
    for case in (lambda t: torch.cumsum(t, 5), lambda t: torch.softmax(t, 2),
                 lambda t: torch.sort(t, 4)):
        delay(torch.rill.current_stream(), DELAY)
        start = time.monotonic()
        raises_as_on_the_cpu(case, cpu, dev)
        assert time.monotonic() - start < DELAY / 2
        torch.rill.synchronize()


def test_a_shape_error_raises_at_submit_with_the_cpus_message():
    cpu, dev = cpu_and_rill(X.double(), IDX, torch.ones(5, 2, dtype=torch.float64))
    for case in (lambda t, i, m: torch.gather(t, 0, i),  # another number of dimensions
                 lambda t, i, m: torch.mm(t, m.T),
                 lambda t, i, m: torch.where(t > 0, t, m)):
        raises_as_on_the_cpu(case, cpu, dev)


def test_an_error_the_cpu_kernel_finds_surfaces_at_synchronize_naming_the_op():
    s = torch.rill.Stream()
    x = torch.arange(3.0, device="rill")
    idx = torch.tensor([0, 7], device="rill")
    with torch.rill.stream(s):
        y = torch.index_select(x, 0, idx)  # no error yet: the index is read later
    try:
        with pytest.raises(RuntimeError,
                           match=r"aten::index_select on rill:0 failed on the host: index out"):
            s.synchronize()
    finally:
        s.clear_error()
    with torch.rill.stream(s):  # the stream runs again
        y = torch.index_select(x, 0, idx.clamp(max=2))
        assert y.tolist() == [0.0, 2.0]


def test_ops_a_failure_skips_still_free_what_they_hold():
    """An op queued behind a failed one is skipped; the memory its command
    held (its inputs and outputs) is freed all the same once dropped."""
    s = torch.rill.Stream()
    x = torch.arange(3.0, device="rill")
    bad = torch.tensor([0, 7], device="rill")
    big = torch.ones(1 << 20, device="rill")
    idx = torch.arange(1 << 18, device="rill")
    gc.collect()  # earlier tests' garbage is not freed while this one counts
    torch.rill.synchronize()
    before = torch.rill.memory_allocated()
    with torch.rill.stream(s):
        torch.index_select(x, 0, bad)
        outs = [torch.index_select(big, 0, idx) for _ in range(4)]
    assert torch.rill.memory_allocated() >= before + 4 * (1 << 20)
    del outs
    try:
        with pytest.raises(RuntimeError, match=r"aten::index_select on rill:0 failed"):
            s.synchronize()
    finally:
        s.clear_error()
    torch.rill.synchronize()
    assert torch.rill.memory_allocated() == before


def captured(fn):
    """Calls fn on a stream that rill's package captures (no torch capture
    keeps what a host function needs); returns the sentence of the error fn
    raised, once ending the capture failed too."""
    s = torch.rill.Stream()
    graph = rill.Graph()
    graph.capture_begin(stream=rill_stream(s))
    with torch.rill.stream(s):
        with pytest.raises(RuntimeError) as op_error:
            fn()
    with pytest.raises(rill.CaptureInvalidatedError):
        graph.capture_end()  # the capture does not go on without the op
    return str(op_error.value)


@pytest.mark.parametrize("name,call", [
    ("aten::nonzero", lambda x: x.nonzero()),
    ("aten::_unique2", lambda x: torch.unique(x)),
    ("aten::normal_", lambda x: x.normal_()),
])
def test_an_op_that_synchronizes_refuses_a_capture_naming_the_op(name, call):
    x = torch.tensor([0.0, 3.0, 0.0, 1.0], dtype=torch.float64, device="rill")
    torch.rill.synchronize()
    message = captured(lambda: call(x))
    assert name in message and "cannot be captured" in message and "capturing" in message


def test_a_queued_op_refuses_a_capture_that_does_not_keep_what_it_needs():
    x = torch.arange(4.0, dtype=torch.float64, device="rill")
    torch.rill.synchronize()
    message = captured(lambda: torch.cumsum(x, 0))
    # The op refuses, or first the allocation of its output (which could not
    # outlive the graph either); both invalidate the capture.
    assert (re.search(r"aten::cumsum(\.out)? on rill:0 cannot be captured", message) or
            "allocating device memory on a capturing stream" in message), message
    assert "torch.rill.graph" in message
    # In place, nothing is allocated: the op itself refuses, naming itself.
    message = captured(lambda: x.cumsum_(0))
    assert re.search(r"aten::cumsum(_|\.out) on rill:0 cannot be captured", message), message
    assert "torch.rill.graph" in message


def test_clear_errors_lets_the_default_stream_and_its_waiters_run_again():
    """An index out of range fails the default stream and a stream that
    waited for it; the error names the way back, and clear_errors() takes
    it for both."""
    w = torch.randn(4, 5, device="rill")
    side = torch.rill.Stream()
    F.embedding(torch.tensor([0, 9], device="rill"), w)
    side.wait_stream(torch.rill.current_stream())
    with torch.rill.stream(side):
        skipped = w + 1
    with pytest.raises(RuntimeError, match=r"embedding_f32.*torch\.rill\.clear_errors\(\)"):
        torch.rill.synchronize()
    with pytest.raises(RuntimeError, match="embedding_f32"):
        side.synchronize()  # it waited for the failed work: it failed too
    torch.rill.clear_errors()
    torch.rill.synchronize()
    with torch.rill.stream(side):
        again = w + 1
    assert torch.equal(again.cpu(), w.cpu() + 1)
    assert torch.equal((w * 2).cpu(), w.cpu() * 2)
    del skipped


def test_quantizing_is_refused_at_once_and_the_stream_goes_on():
    """rill has no quantized tensors: quantize_per_tensor's meta kernel says
    float, its CPU kernel made a qint8 tensor on the host, and the stream
    failed behind it. It is refused before it is queued."""
    x = torch.randn(4, device="rill")
    for quantize in (lambda: torch.quantize_per_tensor(x, 0.1, 0, torch.qint8),
                     lambda: torch.quantize_per_tensor_dynamic(x, torch.quint8, False)):
        with pytest.raises(NotImplementedError, match="rill has no quantized tensors"):
            quantize()
    assert torch.equal((x + 1).cpu(), x.cpu() + 1)


def test_errors_of_empty_inputs_reach_the_caller_and_the_stream_goes_on():
    """max() of an empty tensor: its meta kernel let it through, the CPU
    kernel raised on the host, and the stream failed behind it. An op with
    an empty input now runs at once, so it raises as on the CPU."""
    empty = torch.empty(0, device="rill")
    for op in (lambda t: t.max(), lambda t: t.min(), lambda t: t.view(0, 1).argmax()):
        with pytest.raises(Exception) as on_rill:
            op(empty)
        with pytest.raises(Exception) as on_cpu:
            op(empty.cpu())
        assert type(on_rill.value) is type(on_cpu.value)
        assert str(on_rill.value).split("\n")[0] == str(on_cpu.value).split("\n")[0]
    assert torch.cumsum(empty, 0).shape == (0,) and empty.sum().item() == 0
    x = torch.ones(3, device="rill")
    assert torch.equal((x + 1).cpu(), torch.full((3,), 2.))


def test_an_op_whose_meta_kernel_misstates_a_result_still_runs():
    """embedding_bag's meta kernel gives some of its four results other
    shapes than its CPU kernel: queued, its results did not fit and the
    stream failed. An op of several results runs at once the first time for
    its shapes, which checks the meta kernel; later calls are queued if it
    was right, and run at once if not."""
    torch.manual_seed(0)
    cpu = torch.nn.EmbeddingBag(10, 3, mode="mean")
    dev = torch.nn.EmbeddingBag(10, 3, mode="mean").to("rill")
    dev.load_state_dict(cpu.state_dict())
    idx, offsets = torch.tensor([1, 2, 4, 5, 7]), torch.tensor([0, 2])
    for _ in range(3):
        got = dev(idx.to("rill"), offsets.to("rill"))
        assert torch.allclose(got.cpu(), cpu(idx, offsets), atol=1e-6)
    x = torch.randn(2, 3, device="rill")
    for _ in range(3):  # several results, its meta kernel right: queued after the first
        s2, m2 = torch.std_mean(x, 1)
    assert torch.allclose(m2.cpu(), x.cpu().mean(1)) and torch.allclose(s2.cpu(), x.cpu().std(1))


def test_an_out_kernel_that_resizes_an_output_and_back_writes_the_rill_memory():
    """mse_loss.out resizes a [] out to its inputs' shape, then back (on
    the CPU too, with a warning): the resize moved the host view of the out
    to new CPU memory, and the stream failed. The values now reach the rill
    memory, behind queued work, and on each replay of a capture."""
    x, y = torch.randn(300, 300), torch.randn(300, 300)
    want = F.mse_loss(x, y)
    xr, yr = x.to("rill"), y.to("rill")
    side = torch.rill.Stream()
    side.wait_stream(torch.rill.current_stream())
    with warnings.catch_warnings(), torch.rill.stream(side):
        warnings.simplefilter("ignore")  # PyTorch's own, as on the CPU
        out = torch.empty((), device="rill")
        delay(side, DELAY)
        got = torch.ops.aten.mse_loss.out(xr, yr, 1, out=out)
        torch.rill.synchronize()
        assert got.data_ptr() == out.data_ptr() and out.shape == ()
        torch.testing.assert_close(out.cpu(), want)

        g = torch.rill.RillGraph()
        with torch.rill.graph(g):
            torch.ops.aten.mse_loss.out(xr, yr, 1, out=out)
        for scale in (2.0, 3.0):
            xr.mul_(scale)
            out.zero_()
            g.replay()
            torch.testing.assert_close(out.cpu(), F.mse_loss(xr.cpu(), y))


def test_losses_run_without_warnings_the_cpu_does_not_give(capfd):
    """PyTorch's kernels of mse_loss and smooth_l1_loss for a device without
    its own call the out= overload with a [] out, which the CPU kernel
    warns about (from a worker, on stderr) on every call. Each loss's value
    and gradient equal the CPU's, with nothing on stderr and no warning."""
    x, y = torch.rand(6, 5), torch.rand(6, 5)
    losses = (F.mse_loss, F.smooth_l1_loss, F.l1_loss, F.huber_loss, F.soft_margin_loss,
              F.binary_cross_entropy, F.binary_cross_entropy_with_logits)
    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for loss in losses:
            for reduction in ("mean", "sum", "none"):
                xc = x.clone().requires_grad_()
                xr = x.to("rill").requires_grad_()
                want, got = loss(xc, y, reduction=reduction), loss(xr, y.to("rill"),
                                                                   reduction=reduction)
                want.sum().backward()
                got.sum().backward()
                torch.rill.synchronize()
                torch.testing.assert_close(got.cpu(), want.detach())
                torch.testing.assert_close(xr.grad.cpu(), xc.grad)
    assert capfd.readouterr().err == ""


def test_a_result_whose_strides_span_more_elements_than_it_has_keeps_them():
    """lstsq's solution for a tall a is a [n, k] view of its [m, k] working
    copy (strides (1, m)): putting it on rill failed, the rill tensor's
    storage sized for n*k elements only."""
    g = torch.Generator().manual_seed(5)
    for m, n, k in ((4, 3, 3), (6, 2, 5), (5, 5, 1)):
        a, b = torch.randn(m, n, generator=g), torch.randn(m, k, generator=g)
        want = torch.linalg.lstsq(a, b, driver="gels").solution
        got = torch.linalg.lstsq(a.to("rill"), b.to("rill"), driver="gels").solution
        assert got.shape == want.shape and got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want)


CONJ_AWARE = {
    "dot": lambda a, b, v: torch.dot(v, v.conj()),
    "vdot of a conj": lambda a, b, v: torch.vdot(v.conj(), v),
    "mm": lambda a, b, v: torch.mm(a, b.conj()),
    "mm of conj, transposed": lambda a, b, v: torch.mm(a.conj(), b.conj().t()),
    "a @ b.mH": lambda a, b, v: a @ b.mH,
    "mv": lambda a, b, v: torch.mv(a.conj(), v.conj()),
    "addmm": lambda a, b, v: torch.addmm(a.conj(), a.conj(), b),
    "bmm": lambda a, b, v: torch.bmm(a[None].conj(), b[None]),
    "einsum": lambda a, b, v: torch.einsum("ij,jk->ik", a.conj(), b),
    "cov": lambda a, b, v: torch.cov(a),
    "mm of negative views": lambda a, b, v: torch.mm(a.conj().imag, b.conj().imag),
    "dot of a negative view": lambda a, b, v: torch.dot(v.conj().imag, v.real),
}


@pytest.mark.parametrize("name", CONJ_AWARE, ids=list(CONJ_AWARE))
def test_kernels_that_read_conjugate_and_negative_views_get_them(name):
    """mm, dot and their relatives take a conjugate (x.conj(), x.mH) or
    negative view as it is and read its bit: the host views the fallback
    runs them on had lost the bits, so a @ b.mH multiplied by b itself."""
    g = torch.Generator().manual_seed(6)
    a, b = (torch.randn(3, 3, dtype=torch.complex64, generator=g) for _ in range(2))
    v = torch.randn(3, dtype=torch.complex64, generator=g)
    want = CONJ_AWARE[name](a, b, v)
    got = CONJ_AWARE[name](a.to("rill"), b.to("rill"), v.to("rill")).cpu()
    torch.testing.assert_close(got.resolve_conj().resolve_neg(), want.resolve_conj().resolve_neg())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_ops_that_decompose_off_the_cpu_run_its_kernel_and_round_as_it_does(dtype):
    """addr and group norm have CPU kernels and, for other devices,
    decompositions that round every step to the dtype: in float16 they were
    up to 0.012 off the CPU's results. They now run the CPU's kernels, bit
    for bit."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 6, 5, generator=g).to(dtype)
    w, b = torch.randn(6, generator=g).to(dtype), torch.randn(6, generator=g).to(dtype)
    m, u, v = (torch.randn(*s, generator=g).to(dtype) for s in ((5, 10), (5,), (10,)))
    cases = (
        (lambda x, w, b: F.group_norm(x, 2, w, b, eps=0.5), (x, w, b)),
        (lambda m, u, v: torch.addr(m, u, v, beta=0.6, alpha=0.2), (m, u, v)),
        (lambda m, u, v: torch.addr(m, u, v, out=torch.empty_like(m)), (m, u, v)),
    )
    for fn, args in cases:
        want = fn(*args)
        got = fn(*(t.to("rill") for t in args))
        assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("adjoint", [False, True])
def test_an_out_kernel_that_makes_its_out_a_conjugate_view_gives_its_values(adjoint):
    """linalg_lu_solve with left=False makes its out= tensor a conjugate
    view of what it computed: rill's result kept the computed values
    without the bit, the conjugates of the right ones."""
    g = torch.Generator().manual_seed(8)
    a = torch.randn(3, 3, dtype=torch.complex64, generator=g)
    b = torch.randn(4, 3, dtype=torch.complex64, generator=g)
    lu, pivots = torch.linalg.lu_factor(a)
    want = torch.linalg.lu_solve(lu, pivots, b, left=False, adjoint=adjoint).resolve_conj()
    args = (lu.to("rill"), pivots.to("rill"), b.to("rill"))
    got = torch.linalg.lu_solve(*args, left=False, adjoint=adjoint)
    torch.testing.assert_close(got.cpu().resolve_conj(), want)
    out = torch.empty(4, 3, dtype=torch.complex64, device="rill")
    torch.linalg.lu_solve(*args, left=False, adjoint=adjoint, out=out)
    torch.testing.assert_close(out.cpu().resolve_conj(), want)


IN_PLACE_BROADCASTS = {
    "logical_and_": lambda x, y: x.logical_and_(y),
    "logical_xor out=x": lambda x, y: torch.logical_xor(x, y, out=x),
    "ldexp_": lambda x, y: x.ldexp_(y),
    "out= another view of x": lambda x, y: torch.logical_or(x, y, out=x[:]),
    "out= another tensor": lambda x, y: torch.logical_or(x, y, out=torch.empty_like(x)),
}


@pytest.mark.parametrize("name", IN_PLACE_BROADCASTS, ids=list(IN_PLACE_BROADCASTS))
def test_an_out_that_is_also_an_input_is_not_resized(name):
    """x.logical_and_(y) with y larger than x: the CPU refuses to resize an
    output that is also an input. rill resized x to y's shape (PyTorch's
    meta kernels resize outs, and the fallback's host views were two
    tensors for x). An out that is another tensor is resized, as on the
    CPU, with its warning."""
    x, y = torch.ones(5, 1), torch.ones(5, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        as_on_the_cpu(lambda a, b: IN_PLACE_BROADCASTS[name](a, b), x, y, what=name)


def test_conj_physical_in_place_conjugates():
    """z.conj_physical_() raised PyTorch's internal assert (its kernel for
    every device calls a dispatch stub only the CPU and CUDA fill)."""
    z = torch.complex(torch.arange(6.0), -torch.arange(6.0) * 2).view(2, 3)
    as_on_the_cpu(lambda t: t.conj_physical_(), z)
    as_on_the_cpu(lambda t: t.t().conj_physical_(), z)


PRODUCTS_OF_REFUSED_DTYPES = {
    "mm of float and int64": lambda f, i, b: torch.mm(f, i),
    "x @ ids": lambda f, i, b: f @ i,
    "linear with an int64 weight": lambda f, i, b: F.linear(f, i),
    "mm of float32 and float64": lambda f, i, b: torch.mm(f, f.double()),
    "mm of bool": lambda f, i, b: torch.mm(b, b),
    "addmm of an int64 self": lambda f, i, b: torch.addmm(i, f, f),
    "addbmm": lambda f, i, b: torch.addbmm(f, f[None], i[None]),
    "bmm of bool": lambda f, i, b: torch.bmm(b[None], b[None]),
    "baddbmm of bool": lambda f, i, b: torch.baddbmm(b[None], b[None], b[None]),
    "dot of bool": lambda f, i, b: torch.dot(b[0], b[0]),
    "mv": lambda f, i, b: torch.mv(f, i[0]),
}


@pytest.mark.parametrize("name", PRODUCTS_OF_REFUSED_DTYPES, ids=list(PRODUCTS_OF_REFUSED_DTYPES))
def test_a_matrix_product_of_dtypes_its_kernel_refuses_raises_at_the_call(name):
    """torch.mm(x, ids) with ids int64, PyTorch users' most frequent error:
    the meta kernels let it through, and the CPU kernel's error failed the
    stream later. It now raises at the call, in the CPU's words."""
    f = torch.arange(4.0).view(2, 2)
    as_on_the_cpu(PRODUCTS_OF_REFUSED_DTYPES[name], f, f.long(), f > 1, what=name)
