# SPDX-License-Identifier: MIT
import pytest
import torch

import rill


def test_the_device_is_rill_and_its_devices_are_rills():
    assert torch.rill.is_available()
    assert torch.rill.device_count() == rill.device_count()
    assert torch.accelerator.current_accelerator() == torch.device("rill")
    assert torch.accelerator.device_count() == rill.device_count()
    for index in range(torch.rill.device_count()):
        assert torch.rill.get_device_name(index) == rill.device(index).name


def test_tensors_move_to_the_device_and_back():
    cpu = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    for on in (cpu.to("rill"), cpu.rill(), cpu.to(torch.device("rill:0")),
               torch.tensor(cpu.tolist(), device="rill")):
        assert on.device == torch.device("rill:0")
        assert on.is_rill
        assert torch.equal(on.cpu(), cpu)


def test_the_current_device_is_per_thread_and_scoped():
    n = torch.rill.device_count()
    assert torch.rill.current_device() == 0
    with torch.rill.device(n - 1):
        assert torch.rill.current_device() == n - 1
        assert torch.empty(1, device="rill").device.index == n - 1
    assert torch.rill.current_device() == 0
    with pytest.raises(Exception, match="not a device"):
        torch.rill.set_device(n + 7)
    assert torch.rill.current_device() == 0


@pytest.mark.skipif(rill.device_count() < 2, reason="needs two rill devices (RILL_CPU_DEVICES=2)")
def test_tensors_of_two_devices_are_refused_with_pytorchs_sentence():
    a = torch.ones(2, device="rill:0")
    b = torch.ones(2, device="rill:1")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.addcmul(a, b, b)
    assert torch.equal((a + b.to("rill:0")).cpu(), torch.full((2,), 2.0))


@pytest.mark.skipif(rill.device_count() < 2, reason="needs two rill devices (RILL_CPU_DEVICES=2)")
def test_a_tensor_made_for_another_device_comes_from_that_devices_pool():
    """empty and empty_strided on rill:1 while rill:0 is current allocate
    from rill:1's pool, and leave the current device as it was."""
    torch.rill.set_device(0)
    before = [torch.rill.memory_allocated(i) for i in range(2)]
    x = torch.empty(1 << 20, device="rill:1")
    y = torch.empty_strided((256, 256), (1, 256), device="rill:1")
    assert x.device == y.device == torch.device("rill:1")
    assert torch.rill.current_device() == 0
    assert torch.rill.memory_allocated(0) == before[0]
    assert torch.rill.memory_allocated(1) >= before[1] + (1 << 22) + (1 << 18)
    x.fill_(2.0)
    assert torch.equal(x[:3].cpu(), torch.full((3,), 2.0))


def test_rill_and_cpu_tensors_are_refused_with_pytorchs_sentence():
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        torch.ones(2, device="rill") + torch.ones(2)
    # A CPU scalar tensor is an argument like a number, as on CUDA.
    assert torch.equal((torch.ones(2, device="rill") * torch.tensor(3.0)).cpu(),
                       torch.full((2,), 3.0))


def test_an_op_without_a_kernel_raises_not_implemented_naming_it():
    lib = torch.library.Library("rill_test", "DEF")
    lib.define("only_cuda(Tensor x) -> Tensor")
    lib.impl("only_cuda", lambda x: x, "CUDA")
    with pytest.raises(NotImplementedError, match="rill_test::only_cuda"):
        torch.ops.rill_test.only_cuda(torch.ones(1, device="rill"))


def test_a_program_that_ends_right_after_a_backward_exits_cleanly():
    """PyTorch's autograd thread for the device lets go of a finished backward
    a moment after backward() returns; a program that ended in that moment
    aborted in the interpreter's finalization ("terminate called without an
    active exception"; about half the runs of this program on a busy 2-core
    machine). torch_rill settles the thread at exit. A process spinning beside
    the runs keeps the processors busy."""
    import os
    import subprocess
    import sys
    code = ("import torch, torch_rill\n"
            "x = torch.randn(4, device='rill', requires_grad=True)\n"
            "(x * 2).sum().backward()\n")
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        for _ in range(10):
            done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ),
                                  capture_output=True, text=True, timeout=120)
            assert done.returncode == 0 and "terminate" not in done.stderr, done.stderr
    finally:
        spinner.kill()
        spinner.wait()


FORK_CHILD = """
import os, sys, torch, torch_rill
if sys.argv[1] == "used":
    x = torch.ones(3, device="rill")
    torch.rill.synchronize()
read, write = os.pipe()
pid = os.fork()
if pid == 0:
    said = [str(torch.rill._is_in_bad_fork()), str(torch.rill.is_initialized())]
    for attempt in ("torch.ones(2, device='rill').sum().item()", "(x + 1).cpu().tolist()",
                    "torch.rill.synchronize()", "torch.rill.Stream()"):
        if attempt.startswith("(x") and sys.argv[1] != "used":
            continue
        try:
            said.append(repr(eval(attempt)))
        except RuntimeError as e:
            said.append(str(e))
    os.write(write, "\\n".join(said).encode())
    os._exit(0)
os.close(write)
with os.fdopen(read) as f:
    print(f.read())
os.waitpid(pid, 0)
if sys.argv[1] == "used":
    print((x + 1).cpu().tolist())
"""


@pytest.mark.parametrize("parent", ["used", "unused"])
def test_a_forked_child_refuses_rill_after_its_parent_used_it(parent):
    """As CUDA, rill cannot be used in a child forked from a process that used
    it: its streams and workers stayed in the parent, and its tensors' memory
    is shared with the parent. Every call says so and names the fix; the
    parent goes on. A child of a process that never reached a rill device
    uses rill afresh."""
    import os
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", FORK_CHILD, parent], env=dict(os.environ),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().split("\n")
    if parent == "unused":
        assert lines == ["False", "True", "2.0", "None", lines[4]], lines
        assert lines[4].startswith("<torch.rill.Stream"), lines
        return
    assert lines[:2] == ["True", "False"], lines
    assert len(lines) == 7 and lines[6] == "[2.0, 2.0, 2.0]", lines
    for refusal in lines[2:6]:
        assert refusal.startswith("torch_rill: cannot use rill in a process forked"), lines
        assert "'spawn'" in refusal, lines
