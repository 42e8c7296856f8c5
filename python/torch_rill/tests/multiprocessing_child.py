# SPDX-License-Identifier: MIT
"""The other process of test_multiprocessing.py (spawned): each function
takes the tensors the test sends and answers on a queue."""

import torch
import torch_rill  # noqa: F401  registers the device

from conftest import delay


def scale_in_place(inbox, outbox):
    """Reads the tensor it gets, multiplies it by 10 in place, and says what
    it read; then reports a parameter's kind."""
    t = inbox.get()
    seen = t.cpu().tolist()
    t.mul_(10)
    torch.rill.synchronize()
    outbox.put((str(t.device), seen))
    p = inbox.get()
    outbox.put((type(p).__name__, p.requires_grad, p.detach().cpu().tolist()))


def pass_on(inbox, outbox, relay):
    """Adds 1 to the tensor it gets, behind a host function of 0.5 s, and
    sends it on through relay; drops it when told."""
    t = inbox.get()
    delay(torch.rill.current_stream(), 0.5)
    t.add_(1)
    relay.put(t)
    outbox.put("sent on")
    assert inbox.get() == "drop"
    del t
    outbox.put("dropped")


def take_from(inbox, outbox, relay):
    """Reads the tensor relay brings, multiplies it by 10 in place and says
    what it read; drops it when told."""
    t = relay.get()
    outbox.put(t.cpu().tolist())
    t.mul_(10)
    torch.rill.synchronize()
    outbox.put("written")
    assert inbox.get() == "drop"
    del t
    outbox.put("dropped")


def read_at_once(inbox, outbox):
    """Says it is ready, reads the tensor it gets at once, drops it and says
    so."""
    outbox.put("ready")
    t = inbox.get()
    outbox.put(t.cpu().tolist())
    del t
    outbox.put("dropped")


def read_when_told(inbox, outbox):
    """Reads the tensor it gets when told to, then drops it and says so."""
    t = inbox.get()
    outbox.put("holding")
    assert inbox.get() == "read"
    outbox.put(t.cpu().tolist())
    del t
    outbox.put("dropped")
