# SPDX-License-Identifier: MIT
"""torch.multiprocessing with rill tensors, as PyTorch's test_multiprocessing
does with CUDA tensors: a tensor sent to a spawned process is the same
memory, ordered after the sender's queued work, and held by the sender
until the receiver lets go of it."""

import pytest
import torch
import torch.multiprocessing as mp

import multiprocessing_child as child
from conftest import delay

TIMEOUT = 60


@pytest.fixture
def run():
    """Starts target(inbox, outbox, *more) in a spawned process, which the
    test ends by finish(); killed if the test fails first."""
    started = []

    def start(target, *more):
        ctx = mp.get_context("spawn")
        inbox, outbox = ctx.Queue(), ctx.Queue()
        process = ctx.Process(target=target, args=(inbox, outbox, *more), daemon=True)
        process.start()
        started.append(process)
        return process, inbox, outbox

    yield start
    for process in started:
        if process.is_alive():
            process.kill()
            process.join()


def finish(process):
    process.join(TIMEOUT)
    assert process.exitcode == 0


def test_a_sent_tensor_is_the_same_memory_in_the_receiver(run):
    process, inbox, outbox = run(child.scale_in_place)
    base = torch.arange(12., device="rill").reshape(3, 4)
    inbox.put(base.t()[1:])  # a strided view at an offset of its storage
    assert outbox.get(timeout=TIMEOUT) == ("rill:0", [[1., 5., 9.], [2., 6., 10.], [3., 7., 11.]])
    expected = torch.arange(12.).reshape(3, 4)
    expected[:, 1:] *= 10
    assert torch.equal(base.cpu(), expected)
    inbox.put(torch.nn.Parameter(torch.ones(2, device="rill")))
    assert outbox.get(timeout=TIMEOUT) == ("Parameter", True, [1., 1.])
    finish(process)


def test_the_receiver_waits_for_the_work_the_sender_queued(run):
    """The fill runs 1 s after the send, behind a host function on the
    sender's current stream; the receiver, reading at once, reads the
    filled values."""
    process, inbox, outbox = run(child.read_at_once)
    assert outbox.get(timeout=TIMEOUT) == "ready"
    x = torch.zeros(1000, device="rill")
    delay(torch.rill.current_stream(), 1.0)
    x.fill_(7.)
    inbox.put(x)
    assert outbox.get(timeout=TIMEOUT) == [7.] * 1000
    assert outbox.get(timeout=TIMEOUT) == "dropped"
    finish(process)


def test_the_sender_holds_the_memory_until_the_receiver_lets_go(run):
    torch.rill.synchronize()
    torch.rill.ipc_collect()
    before = torch.rill.memory_allocated()
    process, inbox, outbox = run(child.read_when_told)
    x = torch.full((4096,), 5., device="rill")
    inbox.put(x)
    assert outbox.get(timeout=TIMEOUT) == "holding"
    del x
    torch.rill.ipc_collect()
    held = torch.rill.memory_allocated()
    assert held >= before + 4096 * 4
    # Would take the block if the sender had let it go.
    others = [torch.full((4096,), 9., device="rill") for _ in range(4)]
    torch.rill.synchronize()
    inbox.put("read")
    assert outbox.get(timeout=TIMEOUT) == [5.] * 4096
    assert outbox.get(timeout=TIMEOUT) == "dropped"
    finish(process)
    del others
    torch.rill.ipc_collect()
    assert torch.rill.memory_allocated() == before


def test_a_received_tensor_sent_on_is_the_same_memory_held_until_all_let_go(run):
    """The first receiver adds 1, behind a host function of 0.5 s, and sends
    the tensor on to a third process, which reads it at once (the added
    values), multiplies it by 10, and the first sender sees that. The first
    sender holds the memory until both receivers let go."""
    torch.rill.synchronize()
    torch.rill.ipc_collect()
    before = torch.rill.memory_allocated()
    relay = mp.get_context("spawn").Queue()
    first, to_first, from_first = run(child.pass_on, relay)
    third, to_third, from_third = run(child.take_from, relay)
    x = torch.full((4096,), 1., device="rill")
    to_first.put(x)
    assert from_first.get(timeout=TIMEOUT) == "sent on"
    assert from_third.get(timeout=TIMEOUT) == [2.] * 4096
    assert from_third.get(timeout=TIMEOUT) == "written"
    assert torch.equal(x.cpu(), torch.full((4096,), 20.))
    del x
    to_first.put("drop")
    assert from_first.get(timeout=TIMEOUT) == "dropped"
    torch.rill.ipc_collect()
    assert torch.rill.memory_allocated() >= before + 4096 * 4
    to_third.put("drop")
    assert from_third.get(timeout=TIMEOUT) == "dropped"
    finish(first)
    finish(third)
    torch.rill.ipc_collect()
    assert torch.rill.memory_allocated() == before
