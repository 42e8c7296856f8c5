# SPDX-License-Identifier: MIT
"""rill.compat.torch, torch_npu and torchair beyond the seeds' examples:
devices, the stream and event signatures, IPC with a second process,
tensors and their makers, nn.Module and compile, and bad arguments."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import rill
import rill.compat.torch as torch
import rill.compat.torch_npu as torch_npu
import rill.compat.torchair as tng
from rill.compat.torchair.configs.compiler_config import CompilerConfig


def test_devices():
    assert str(torch.device("cuda:0")) == "cuda:0" and torch.device("npu", 0).index == 0
    assert torch.device("cuda") == torch.device("cuda") != torch.device("cuda:0")
    assert repr(torch.device("cpu")) == "device(type='cpu')"
    with pytest.raises(ValueError, match="unknown device type"):
        torch.device("tpu")
    with pytest.raises(ValueError, match="bad index"):
        torch.device("cuda:x")
    with pytest.raises(ValueError, match="index once"):
        torch.device("cuda:0", 1)
    with pytest.raises(TypeError, match="must be a str"):
        torch.device(3)
    with pytest.raises(rill.RillError):
        torch.ones(2, device="cuda:99")  # no such device
    with pytest.raises(TypeError, match="device must be"):
        torch.ones(2, device=1.5)


def test_streams_and_events_are_rill_ones_with_torch_signatures():
    s = torch.cuda.Stream(device="cuda:0", priority=-1)
    assert isinstance(s, rill.Stream) and torch.npu is torch.cuda and torch_npu.npu is torch.cuda
    with torch.cuda.stream(s):
        assert torch.cuda.current_stream() is s
        e = torch.cuda.Event(enable_timing=True)
        e.record()
        x = torch.ones(3) + 1
    assert x.stream is s
    torch.cuda.default_stream().wait_event(e)
    torch.cuda.synchronize()
    assert torch.cuda.current_stream() is torch.cuda.default_stream()
    assert torch.cuda.is_available() and torch.cuda.device_count() >= 1
    assert torch.cuda.current_device() == rill.current_device().index
    assert torch.cuda.memory_allocated() >= 12


def test_event_ipc_with_a_second_process():
    ev = torch.cuda.Event(interprocess=True)
    s = torch.cuda.Stream()
    gate = __import__("threading").Event()
    s.launch_host_func(gate.wait, 10)
    ev.record(s)
    child = textwrap.dedent("""
        import sys, time
        import rill.compat.torch as torch
        e = torch.cuda.Event.from_ipc_handle(torch.device('cuda:0'), bytes.fromhex(sys.argv[1]))
        print(e.query(), flush=True)
        sys.stdin.readline()
        e.wait(torch.cuda.current_stream())
        e.synchronize()
        print(e.query(), flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(rill.__file__)))
    p = subprocess.Popen([sys.executable, "-c", child, ev.ipc_handle().hex()], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "False"  # held by the gate in this process
        gate.set()
        p.stdin.write("go\n")
        p.stdin.flush()
        assert p.stdout.readline().strip() == "True"
        assert p.wait(30) == 0
    finally:
        gate.set()
        if p.poll() is None:
            p.kill()


def test_makers_and_tensor_methods():
    t = torch.tensor([[1.0, 2.0], [3.0, 4.0]], device="cuda")
    assert isinstance(t, torch.Tensor) and t.dtype is torch.float32
    assert t.cuda() is t and t.npu() is t and t.to("cuda") is t
    host = t.cpu()  # itself where rill's devices are CPU devices, else a copy in host memory
    assert (host is t) == (rill.current_device().kind == "cpu")
    assert host.device == torch.device("cpu" if host is not t else "cuda:0")
    assert host.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert t.size() == (2, 2) and t.size(1) == 2 and t.dim() == 2
    assert t.to(torch.half).dtype is torch.float16 and t.to("npu:0", torch.float16).dtype is \
        torch.float16
    assert np.array_equal(t.mm(t).numpy(), t.numpy() @ t.numpy())
    assert np.array_equal(torch.add(t, t, alpha=2).numpy(), 3 * t.numpy())
    assert np.array_equal(torch.sub(t, 1).numpy(), t.numpy() - 1)
    assert np.array_equal(torch.mul(t, t).numpy(), t.numpy() ** 2)
    assert torch.sum(t).item() == 10
    assert type(t + 1) is torch.Tensor and type(torch.randn(2)) is torch.Tensor
    assert torch.zeros(2, 3, dtype=torch.float16).dtype is torch.float16
    assert torch.full((2,), 4.0).numpy().tolist() == [4, 4]
    assert torch.empty(3, dtype=torch.half).shape == (3,)
    assert torch.from_numpy(np.ones(2, np.float16)).dtype is torch.float16
    assert repr(torch.ones(2)) == "tensor([1., 1.], device='cuda:0')"
    assert repr(torch.ones(1, dtype=torch.half)) == \
        "tensor([1.], device='cuda:0', dtype=torch.float16)"
    torch.manual_seed(5)
    a = torch.randn(4).numpy()
    torch.manual_seed(5)
    assert np.array_equal(torch.randn(4).numpy(), a)
    with pytest.raises(NotImplementedError, match="generator"):
        torch.randn(2, generator=object())
    with pytest.raises(NotImplementedError, match="out="):
        torch.add(t, t, out=t)
    with pytest.raises(TypeError, match="must be a numpy.ndarray"):
        torch.from_numpy([1.0])


def test_module_and_compile():
    class Twice(torch.nn.Module):
        def forward(self, x):
            return x * 2

    m = Twice()
    assert m.eval() is m and not m.training and m.train().training
    assert m(torch.ones(2)).numpy().tolist() == [2, 2]
    c = torch.compile(m, mode="reduce-overhead")
    out = c(torch.ones(3))
    assert c(torch.full((3,), 5.0)).numpy().tolist() == [10, 10, 10]
    assert out.numpy().tolist() == [2, 2, 2]  # a copy: the next call does not touch it
    assert torch.compile(m, disable=True) is m
    assert torch.compile(backend="inductor")(m)(torch.ones(1)).numpy().tolist() == [2]
    with pytest.raises(ValueError, match="mode"):
        torch.compile(m, mode="max-autotune-no-cudagraphs")
    with pytest.raises(ValueError, match="backend"):
        torch.compile(m, backend="eager-but-named")
    with pytest.raises(NotImplementedError):
        torch.nn.Module()(1)


def test_torchair_api():
    config = CompilerConfig()
    assert config.mode == "max-autotune"
    config.mode = "reduce-overhead"
    with pytest.raises(ValueError, match="mode must be"):
        config.mode = "fast"
    backend = tng.get_npu_backend(compiler_config=config)
    assert "reduce-overhead" in repr(backend)
    with pytest.raises(TypeError, match="CompilerConfig"):
        tng.get_npu_backend(compiler_config={"mode": "reduce-overhead"})
    e = tng.ops.npu_create_tagged_event(tag="py-torchair-1")
    assert e is tng.ops.npu_create_tagged_event(tag="py-torchair-1")
    x = torch.ones(64)
    tng.ops.npu_tagged_event_record(e)
    with tng.scope.npu_stream_switch("py-torchair-s", 0):
        side = torch.cuda.current_stream()
        assert side is rill.tagged_stream("py-torchair-s")
        tng.ops.npu_tagged_event_wait(e)
        y = x + 1
        tng.ops.npu_record_tagged_stream(y, "py-torchair-s")
    assert torch.cuda.current_stream() is torch.cuda.default_stream()
    assert y.stream is side and y.numpy()[0] == 2
    for bad in ((tng.scope.npu_stream_switch, 1), (tng.ops.npu_create_tagged_event, 2),
                (tng.ops.npu_tagged_event_record, "e"), (tng.ops.npu_tagged_event_wait, None)):
        with pytest.raises(TypeError):
            bad[0](bad[1])
    with pytest.raises(TypeError, match="input must be a tensor"):
        tng.ops.npu_record_tagged_stream(np.ones(2), "s")
    with pytest.raises(TypeError, match="str tag"):
        tng.ops.npu_record_tagged_stream(y, 1)


def test_device_arguments_name_the_device(two_devices):
    # torch.cuda.Stream(device='cuda:1'), the makers' device= and
    # Event.from_ipc_handle(device, ...) put things on that device.
    assert torch.cuda.Stream(device="cuda:1").device.index == 1
    assert torch.cuda.Stream(device=torch.device("cuda", 1)).device.index == 1
    assert torch.cuda.Stream().device.index == 0
    for make in (lambda d: torch.ones(2, device=d), lambda d: torch.zeros(2, device=d),
                 lambda d: torch.full((2,), 3.0, device=d), lambda d: torch.empty(2, device=d),
                 lambda d: torch.randn(2, device=d), lambda d: torch.tensor([1.0, 2.0], device=d)):
        t = make("cuda:1")
        assert t.device == torch.device("cuda:1") and t.get_device() == 1
        assert t.stream.device.index == 1
        assert make(1).get_device() == 1 and make("cuda").get_device() == 0
        assert make(None).get_device() == 0
    assert torch.cuda.current_device() == 0  # the makers leave the device as it was
    t = torch.full((3,), 2.0, device="cuda:1")
    assert "device='cuda:1'" in repr(t)
    u = t.cuda()  # to the current device: a copy
    assert u.get_device() == 0 and u.numpy().tolist() == [2, 2, 2]
    assert t.cuda(1) is t and t.to("cuda:1") is t and u.to("cuda:0") is u
    h = u.to("cuda:1", torch.half)
    assert h.get_device() == 1 and h.dtype is torch.float16 and h.numpy().tolist() == [2, 2, 2]
    assert torch.cuda.current_stream(1) is torch.cuda.default_stream("cuda:1")
    assert torch.cuda.current_stream("cuda:1").device.index == 1
    with torch.cuda.device(1):
        assert torch.cuda.current_device() == 1 and torch.ones(1).get_device() == 1
    assert torch.cuda.current_device() == 0
    s1 = torch.cuda.Stream(device=1)
    torch.cuda.set_stream(s1)  # torch: the stream's device becomes current
    assert torch.cuda.current_device() == 1 and torch.cuda.current_stream() is s1
    torch.cuda.set_device(0)
    torch.cuda.set_stream(torch.cuda.default_stream(1))
    torch.cuda.set_device("cuda:0")
    torch.cuda.synchronize("cuda:1")


def test_ipc_handle_binds_a_never_recorded_event_to_the_current_device(two_devices):
    # Seed 003: the exporter's event belongs to the device current when it
    # is exported, and the importer names that device.
    ev = torch.cuda.Event(interprocess=True)
    assert ev.device is None
    with torch.cuda.device(1):
        handle = ev.ipc_handle()
    assert ev.device.index == 1
    opened = torch.cuda.Event.from_ipc_handle("cuda:1", handle)
    assert opened.device.index == 1
    with pytest.raises(rill.DeviceMismatchError, match="device 1, not of device 0"):
        torch.cuda.Event.from_ipc_handle(torch.device("cuda:0"), handle)
    with pytest.raises(rill.DeviceMismatchError):
        ev.record(torch.cuda.current_stream(0))  # bound to device 1
    ev.record(torch.cuda.current_stream(1))
    opened.wait(torch.cuda.current_stream(0))  # any device may wait
    torch.cuda.synchronize(0)
    assert opened.query() and ev.query()


def test_tensor_methods_that_pytorchs_tests_use():
    t = torch.cuda.FloatTensor([1.0, 2.0, 3.0])
    assert type(t) is torch.Tensor and t.is_cuda and t.get_device() == 0
    assert t.size() == torch.Size([3]) == (3,) and repr(t.size()) == "torch.Size([3])"
    assert t.data_ptr() != 0 and t.element_size() == 4 and t.nelement() == 3
    assert t.storage_offset() == 0 and t.pin_memory() is t and t.tolist() == [1, 2, 3]
    c = t.clone()
    assert c.data_ptr() != t.data_ptr() and c.tolist() == [1, 2, 3]
    assert c.fill_(7) is c and c.tolist() == [7, 7, 7] and t.tolist() == [1, 2, 3]
    assert c.zero_() is c and c.tolist() == [0, 0, 0]
    assert c.copy_(t) is c and c.tolist() == [1, 2, 3]
    c += t
    c -= 0.5
    c *= 2
    assert c.tolist() == [3, 7, 11] and c.sub_(t, alpha=2).tolist() == [1, 3, 5]
    assert c.mul_(t).tolist() == [1, 6, 15]
    h = torch.cuda.HalfTensor(2, 2)
    assert h.dtype is torch.float16 and h.shape == (2, 2)
    assert h.copy_(torch.ones(4)).tolist() == [[1, 1], [1, 1]]  # converted, same count
    assert torch.cuda.FloatTensor(torch.Size([2, 3])).shape == (2, 3)
    assert torch.cuda.FloatTensor().shape == (0,)
    host = torch.FloatTensor([1.0, 2.0])
    assert not host.is_cuda and host.get_device() == -1 and "device" not in repr(host)
    assert host.device == torch.device("cpu") and t.device == torch.device("cuda", 0)
    dev = host.cuda()
    assert type(dev) is torch.Tensor and dev.data_ptr() != host.data_ptr()
    assert dev.tolist() == [1, 2] and host.to("cpu") is host
    assert host.to("cuda", torch.half).dtype is torch.float16
    with pytest.raises(ValueError, match="elements"):
        c.copy_(torch.ones(2))
    with pytest.raises(TypeError, match="must be a tensor"):
        c.copy_([1, 2, 3])
    with pytest.raises(TypeError, match="number"):
        c.fill_("x")
    with pytest.raises(TypeError, match="sizes"):
        torch.FloatTensor([1.0], [2.0])


def test_ops_run_on_their_operands_device_and_refuse_two_devices(two_devices, gate):
    # torch's device guard: an op on tensors of cuda:1 runs on cuda:1's
    # current stream (after the work there that writes them, held back by
    # a host function here) whatever device is current, and its result is
    # on cuda:1; tensors of two devices raise RuntimeError "Expected all
    # tensors to be on the same device". copy_ copies across devices.
    assert torch.cuda.current_device() == 0
    torch.cuda.current_stream(1).launch_host_func(gate)
    n = 4096
    x = torch.full((n,), 2.0, device="cuda:1")
    y = torch.ones(n, device="cuda:1")
    outs = {"x + y": (x + y, 3.0), "torch.add": (torch.add(x, y, alpha=2), 4.0),
            "torch.mul": (torch.mul(x, y), 2.0), "x.sum()": (x.sum(), 2.0 * n),
            "torch.relu": (torch.relu(x), 2.0), "x.clone()": (x.clone(), 2.0),
            "torch.cat": (torch.cat([x, y])[:n], 2.0),
            "mm": (torch.mm(x.reshape(64, 64), y.reshape(64, 64)), 128.0),
            "F.softmax": (torch.nn.functional.softmax(x.reshape(64, 64), dim=1), 1 / 64)}
    z = torch.zeros(n, device="cuda:1").fill_(5.0)
    w = torch.zeros(n)  # on cuda:0
    w.copy_(x)  # from cuda:1, after the work that writes x
    gate.open()
    for name, (t, want) in outs.items():
        assert t.get_device() == 1, name
        assert np.allclose(t.numpy().astype(np.float64), want), name
    assert z.get_device() == 1 and set(z.tolist()) == {5.0}
    assert w.get_device() == 0 and set(w.tolist()) == {2.0}
    assert torch.cuda.current_device() == 0
    u = torch.ones(4, device="cuda:0")
    v = torch.ones(4, device="cuda:1")
    for op in (lambda: u + v, lambda: torch.add(u, v), lambda: torch.mm(u.reshape(2, 2),
                                                                          v.reshape(2, 2)),
               lambda: torch.cat([u, v]), lambda: u.add_(v)):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
            op()


def test_rill_compat_torch_chooses_pytorch_or_rill():
    """RILL_COMPAT_TORCH: this interpreter has no torch_rill, so auto and
    rill give rill's module, pytorch fails saying what is missing, and a
    value of another kind names the ones it takes."""
    code = "import rill.compat.torch as t; print(t.Tensor.__module__)"

    def run(value):
        env = dict(os.environ, RILL_COMPAT_TORCH=value)
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, timeout=120)

    for value in ("auto", "rill"):
        done = run(value)
        assert done.returncode == 0 and done.stdout.strip() == "rill.compat.torch._tensor"
    done = run("pytorch")
    assert done.returncode != 0 and "torch_rill" in done.stderr
    done = run("cuda")
    assert done.returncode != 0 and "set it to auto, pytorch or rill" in done.stderr
