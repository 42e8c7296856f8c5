# SPDX-License-Identifier: MIT
"""The other process of test_multiprocessing.py (spawned): each function
takes the tensors the test sends and answers on a queue."""

import torch
import torch_rill  # noqa: F401  registers the device
from multiprocessing.reduction import ForkingPickler


def scale_in_place(inbox, outbox):
    """Reads the tensor it gets, multiplies it by 10 in place, and says what
    it read; then reports a parameter's kind and whether a received tensor
    can be sent on."""
    t = inbox.get()
    seen = t.cpu().tolist()
    t.mul_(10)
    torch.rill.synchronize()
    outbox.put((str(t.device), seen))
    p = inbox.get()
    outbox.put((type(p).__name__, p.requires_grad, p.detach().cpu().tolist()))
    try:
        ForkingPickler.dumps(t)
        outbox.put("sent on")
    except RuntimeError as e:
        outbox.put(str(e))


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
