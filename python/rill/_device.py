# SPDX-License-Identifier: MIT
"""Devices: owned by the library, alive until rill.shutdown()."""

from . import _host, _wait
from ._errors import check, error
from ._ffi import ffi, lib
from ._runtime import life, on_shutdown, stale_error, waited

_KINDS = {1: "cpu", 2: "cuda"}
_devices = {}  # rill_device * -> Device


class Device:
    """A rill device (the CPU device's compute units are worker threads).
    Get one with rill.device(index), rill.device("cuda:0") or
    rill.current_device(). index is its ordinal among all devices,
    kind_index among those of its kind (str(dev) is "cuda:N" or "cpu:N").
    memory_bytes is the device's memory; for the CPU devices, what rill may take of the
    machine's, all of them together (3/4 of physical memory or of the
    memory cgroup's limit, or RILL_CPU_MEMORY): past it an allocation raises
    rill.OutOfMemoryError rather than the kernel killing the process."""

    __slots__ = ("_h", "_gen", "index", "kind", "kind_index", "name", "compute_units",
                 "memory_bytes", "priority_range")

    def __init__(self, *args, **kwargs):
        raise TypeError("rill.Device cannot be created; use rill.device(index) or "
                        "rill.current_device()")

    @classmethod
    def _wrap(cls, handle):
        dev = _devices.get(handle)
        if dev is not None:
            return dev
        info = ffi.new("rill_device_info *")
        check(lib.rill_device_get_info(handle, info))
        dev = object.__new__(cls)
        dev._h = handle
        dev._gen = life.generation
        dev.index = info.ordinal
        dev.kind = _KINDS.get(info.kind, str(info.kind))
        dev.kind_index = _kind_index(handle, info.kind)
        dev.name = ffi.string(info.name).decode("utf-8", "replace")
        dev.compute_units = info.compute_units
        dev.memory_bytes = info.memory_bytes
        dev.priority_range = (info.greatest_priority, info.least_priority)
        _devices[handle] = dev
        return dev

    def __str__(self):
        """The device's name: "cuda:N" or "cpu:N" (N is kind_index)."""
        return f"{self.kind}:{self.kind_index}"

    def _handle(self, where):
        if self._gen != life.generation:
            raise stale_error(where, "device")
        return self._h

    def synchronize(self):
        """Waits for the work of every stream of this device; raises
        KernelFailedError when one of them failed and was not cleared."""
        synchronize_handle(handle_of(self, "rill.Device.synchronize"))

    def __repr__(self):
        return f"rill.Device(index={self.index}, kind='{self.kind}', name='{self.name}')"

    def __eq__(self, other):
        return isinstance(other, Device) and other._h == self._h and other._gen == self._gen

    def __hash__(self):
        return hash((self.index, self._gen))


def _kind_index(handle, kind):
    """The position of device handle among the devices of its kind."""
    out = ffi.new("rill_device **")
    count = ffi.new("int *")
    check(lib.rill_device_count_of_kind(kind, count, ffi.NULL, 0))
    for i in range(count[0]):
        check(lib.rill_device_get_by_kind(kind, i, out))
        if out[0] == handle:
            return i
    raise AssertionError(f"rill's device {handle} is not among the devices of its kind")


def device_count():
    """The number of devices (CUDA devices first, then the CPU device)."""
    out = ffi.new("int *")
    check(lib.rill_device_count(out))
    return out[0]


def device(index=None):
    """The device with this ordinal (an int), this Device, or this name:
    "cuda:N" the N-th CUDA device, "cpu:N" the N-th CPU device; "cuda" or
    "cpu" alone the current device when it is of that kind, else the first
    of the kind. None: the current device. A kind with no device raises
    NoDeviceError saying why (no driver, no GPU, RILL_CUDA_ENABLE unset)."""
    if index is None:
        return current_device()
    if isinstance(index, Device):
        index._handle("rill.device")
        return index
    if isinstance(index, str):
        return _named(index, "rill.device")
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"rill.device: index must be an int, a str such as 'cuda:0' or a "
                        f"rill.Device, not {type(index).__name__}")
    out = ffi.new("rill_device **")
    check(lib.rill_device_get(index, out))
    return Device._wrap(out[0])


_KIND_OF_NAME = {name: number for number, name in _KINDS.items()}


_counts = {}  # kind -> count_of_kind's answer, for this runtime (its devices are fixed)


def count_of_kind(kind):
    """The number of devices of kind ("cuda" or "cpu"), and when it is 0,
    the sentence saying why."""
    found = _counts.get(kind)
    if found is None:
        why = ffi.new("char[]", 256)
        out = ffi.new("int *")
        check(lib.rill_device_count_of_kind(_KIND_OF_NAME[kind], out, why, 256))
        found = _counts[kind] = (out[0], ffi.string(why).decode("utf-8", "replace"))
    return found


def _named(name, where):
    kind, colon, number = name.partition(":")
    if kind not in _KIND_OF_NAME or (colon and not number.isdigit()):
        raise ValueError(f"{where}: {name!r} names no device; pass 'cuda', 'cuda:N', 'cpu' or "
                         "'cpu:N' (N from 0), or an ordinal")
    count, why = count_of_kind(kind)
    if count == 0:
        raise error(lib.RILL_ERROR_NO_DEVICE, f"{where}: no {kind} device: {why}")
    if not colon:
        cur = current_device()
        if cur.kind == kind:
            return cur
        number = "0"
    if int(number) >= count:
        raise error(lib.RILL_ERROR_NO_DEVICE,
                    f"{where}: {name!r}: rill has {count} {kind} device"
                    f"{'' if count == 1 else 's'}, {kind}:0 to {kind}:{count - 1}")
    out = ffi.new("rill_device **")
    check(lib.rill_device_get_by_kind(_KIND_OF_NAME[kind], int(number), out))
    return Device._wrap(out[0])


def current_device():
    """The calling thread's current device."""
    out = ffi.new("rill_device **")
    check(lib.rill_get_device(out))
    return Device._wrap(out[0])


def set_device(dev):
    """Makes dev (a Device or an ordinal) the calling thread's current device."""
    check(lib.rill_set_device(device(dev)._h))


def handle_of(dev, where):
    """The rill_device * for a device argument: NULL (the current device)
    for None, else a Device, an ordinal or a name (see device())."""
    if dev is None:
        return ffi.NULL
    if isinstance(dev, Device):
        return dev._handle(where)
    if isinstance(dev, str):
        return _named(dev, where)._h
    if isinstance(dev, bool) or not isinstance(dev, int):
        raise TypeError(f"{where}: device must be a rill.Device, an int, a str such as "
                        f"'cuda:0' or None, not {type(dev).__name__}")
    return device(dev)._h


@on_shutdown
def _forget():
    _devices.clear()
    _counts.clear()


def synchronize_handle(dev):
    """Waits for the work of every stream of dev (a rill_device *); raises
    KernelFailedError when one of them failed and was not cleared since.
    Ctrl-C: as Stream.synchronize."""
    mark = _host.mark()
    st = _wait.device(dev)
    if st == 0 or st == lib.RILL_ERROR_KERNEL_FAILED:
        _host.device_done_before(dev, mark)
        waited()
    check(st)
