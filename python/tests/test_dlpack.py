# SPDX-License-Identifier: MIT
"""DLPack: numpy.from_dlpack and torch.from_dlpack see a tensor's memory
without a copy, after the work that writes it, and keep it allocated, and
rill.shutdown() does not release it under them."""

import gc
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import rill
from rill import _dlpack
from rill._ffi import ffi

# Host-side consumers (numpy, PyTorch on the CPU): on the CPU device.
pytestmark = pytest.mark.usefixtures("cpu_device")

F32 = np.float32


def address(t):
    return int(ffi.cast("uintptr_t", t._ptr))


def test_numpy_sees_the_memory_without_a_copy():
    t = rill.Tensor(np.arange(6, dtype=F32).reshape(2, 3))
    a = np.from_dlpack(t)
    assert a.dtype == F32 and a.shape == (2, 3)
    assert a.__array_interface__["data"][0] == address(t)
    assert np.array_equal(a, np.arange(6).reshape(2, 3))
    t.add_(10)
    t.numpy()  # waits for the add
    assert np.array_equal(a, np.arange(6).reshape(2, 3) + 10)
    assert t.__dlpack_device__() == (1, 0)


def test_torch_sees_float32_and_float16_without_a_copy():
    torch = pytest.importorskip("torch")
    t = rill.Tensor(np.linspace(-1, 1, 12, dtype=F32).reshape(3, 4))
    x = torch.from_dlpack(t)
    assert x.dtype == torch.float32 and tuple(x.shape) == (3, 4)
    assert x.data_ptr() == address(t)
    assert np.array_equal(x.numpy(), t.numpy())
    h = rill.Tensor(np.array([1.5, -2.25, 65504], np.float16))
    y = torch.from_dlpack(h)
    assert y.dtype == torch.float16 and y.tolist() == [1.5, -2.25, 65504]
    s = rill.Tensor(np.float32(7))  # 0-d
    assert torch.from_dlpack(s).item() == 7 and np.from_dlpack(s).shape == ()


def test_export_waits_for_the_work_that_writes_the_tensor(gate):
    s = rill.Stream()
    a = rill.ones(1 << 16)
    rill.synchronize()
    s.launch_host_func(gate)
    with rill.stream(s):
        b = a * 3.0
    threading.Timer(0.05, gate.open).start()
    got = np.from_dlpack(b)  # waits for the gate, then for b's op
    assert np.all(got == 3) and not gate.timed_out


def test_the_consumer_keeps_the_memory_until_it_lets_go():
    t = rill.Tensor(np.full(1000, 5, F32))
    a = np.from_dlpack(t)
    before = len(_dlpack._exported)
    del t
    gc.collect()
    others = [rill.zeros(1000) for _ in range(20)]  # would reuse a freed block
    rill.synchronize()
    assert np.all(a == 5)
    del a
    gc.collect()
    assert len(_dlpack._exported) == before - 1
    del others


def test_a_capsule_never_consumed_releases_its_tensor():
    t = rill.ones(4)
    before = len(_dlpack._exported)
    cap = t.__dlpack__()
    assert len(_dlpack._exported) == before + 1
    del cap
    gc.collect()
    assert len(_dlpack._exported) == before


def test_bad_arguments():
    t = rill.ones(2)
    with pytest.raises(TypeError, match="stream must be None or an int"):
        t.__dlpack__(stream="s")
    rill.shutdown()
    with pytest.raises(rill.InvalidArgumentError, match="rill.shutdown"):
        t.__dlpack__()


# Reads a view after trying rill.shutdown(), then again after new tensors
# took memory: before the export was protected, shutdown released the view's
# memory (a segfault for numpy, another tensor's data for torch).
SHUTDOWN_CHILD = """
import gc, sys
sys.path.insert(0, {python_dir!r})
import numpy as np
import rill
rill.set_device(rill.device("cpu"))
{make_view}
del t
try:
    rill.shutdown()
    print("shut down")
except rill.NotPermittedError as exc:
    print("refused", "DLPack" in str(exc) and "rill.shutdown" in str(exc))
print(read())
others = [rill.full(4, 9.0) for _ in range(50)]
rill.synchronize()
print(read())
del view
gc.collect()
rill.shutdown()
print("shut down")
"""

VIEWS = {
    "numpy": ("t = rill.Tensor(np.arange(4, dtype=np.float32))\n"
              "view = np.from_dlpack(t)\n"
              "read = lambda: view.tolist()"),
    "torch": ("import torch\n"
              "t = rill.Tensor(np.arange(4, dtype=np.float32))\n"
              "view = torch.from_dlpack(t)\n"
              "read = lambda: view.tolist()"),
    "capsule": ("t = rill.Tensor(np.arange(4, dtype=np.float32))\n"
                "view = t.__dlpack__()\n"
                "read = lambda: [0.0, 1.0, 2.0, 3.0]"),
}


@pytest.mark.parametrize("consumer", sorted(VIEWS))
def test_shutdown_refuses_while_an_export_is_alive(consumer):
    if consumer == "torch":
        pytest.importorskip("torch")
    code = SHUTDOWN_CHILD.format(python_dir=os.path.dirname(os.path.dirname(
        os.path.abspath(rill.__file__))), make_view=VIEWS[consumer])
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ))
    assert run.returncode == 0, (run.returncode, run.stdout, run.stderr)
    assert run.stdout.splitlines() == ["refused True", "[0.0, 1.0, 2.0, 3.0]",
                                       "[0.0, 1.0, 2.0, 3.0]", "shut down"], run.stdout


def test_shutdown_collects_views_that_only_cycles_hold():
    t = rill.ones(3)
    cycle = [np.from_dlpack(t)]
    cycle.append(cycle)
    del cycle, t
    rill.shutdown()  # the collection frees the view first
    assert not _dlpack._exported
