# SPDX-License-Identifier: MIT
"""torch.compile on rill tensors. Dynamo and AOTAutograd work on any device:
``torch.compile(model, backend="aot_eager")`` traces the model and runs its
ops on rill's kernels. Inductor, torch.compile's default backend, has no
code generator for rill: its CPU code generator treats the "cpu" device
apart in many places, and its kernels would run on the host thread outside
rill's streams. So inductor's registration for rill (made at its first
compile, through torch.rill._inductor_backend_init) refuses, naming what to
use instead, where it would otherwise fail with KeyError: 'rill'."""

from torch._inductor.codegen.common import (DeviceOpOverrides, register_backend_for_device,
                                            register_device_op_overrides)

REFUSAL = ("torch.compile: inductor (the default backend) generates no code for the rill "
           "device; compile with backend=\"aot_eager\" (rill's kernels run the traced ops), or "
           "capture the step with torch.rill.graph to replay its launches at a fraction of "
           "their cost")


class _Refused:
    """Inductor's scheduling and wrapper code generator for rill: both
    refuse."""

    supports_caching = False  # read before the code generator is made

    def __init__(self, *args, **kwargs):
        raise NotImplementedError(REFUSAL)

    @staticmethod
    def create(*args, **kwargs):
        raise NotImplementedError(REFUSAL)


def register():
    register_device_op_overrides("rill", DeviceOpOverrides())
    register_backend_for_device("rill", _Refused, _Refused)
