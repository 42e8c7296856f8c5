# SPDX-License-Identifier: MIT
"""The other process of test_ipc_events.py: opens the event whose handle
(hex) comes on stdin, on rill:0, and reports what it observed. The file
named by argv[1] holds the parent's 8-byte counter."""

import struct
import sys

import torch
import torch_rill  # noqa: F401  registers the device

import rill
from rill._ffi import ffi


def read_counter(path):
    with open(path, "rb") as f:
        return struct.unpack("<q", f.read(8))[0]


def main():
    path = sys.argv[1]
    handle = bytes.fromhex(sys.stdin.readline().strip())
    event = torch.rill.Event.from_ipc_handle(0, handle)
    pending = not event.query()
    stream = torch.rill.Stream()
    stream.wait_event(event)
    seen = []
    rill.Stream._wrap(ffi.cast("rill_stream *", stream.rill_handle)).launch_host_func(
        lambda: seen.append(read_counter(path)))
    print(f"queued pending={pending}", flush=True)
    stream.synchronize()
    event.synchronize()
    print(f"seen={seen[0]} after={read_counter(path)}", flush=True)


if __name__ == "__main__":
    main()
