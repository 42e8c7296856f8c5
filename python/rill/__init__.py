# SPDX-License-Identifier: MIT
"""rill for Python: streams, events, tensors and memory on rill's devices.

    import rill
    a = rill.ones(3, 3)
    print(a + a)           # waits for the result's event, then prints

Failures raise rill.RillError subclasses carrying rill_last_error()'s
sentence. docs/python.md is the guide; the package needs cffi and NumPy."""

import sys as _sys

for _module, _debian in (("cffi", "python3-cffi"), ("numpy", "python3-numpy")):
    try:
        __import__(_module)
    except ImportError as _exc:
        raise ModuleNotFoundError(
            f"rill: the package needs {_module}, which this Python ({_sys.executable}) cannot "
            f"import ({_exc}); install it: on Debian or Ubuntu `apt install {_debian}`, "
            f"elsewhere `{_sys.executable} -m pip install {_module}`", name=_module) from None
del _module, _debian

from . import ops
from ._device import Device, current_device, device, device_count, set_device
from ._errors import (CaptureInvalidatedError, CaptureIsolationError, CaptureUnjoinedError,
                      CaptureUnmatchedError, CaptureUnsupportedError, CaptureWrongThreadError,
                      DeviceLostError, DeviceMismatchError, InternalError,
                      InvalidArgumentError, IpcError, KernelFailedError, NoDeviceError,
                      NotPermittedError, NotRecordedError, NotReadyError, NotSupportedError,
                      OutOfMemoryError, RillError, TimingDisabledError)
from ._ffi import library_path
from ._from_dlpack import from_dlpack
from ._compile import compile
from ._graph import Graph, graph
from ._memory import (empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated,
                      memory_limit, memory_reserved, memory_stats, memory_summary,
                      reset_peak_memory_stats, set_memory_limit)
from ._runtime import shutdown
from ._stream import (Event, Stream, StreamContext, current_stream, default_stream, set_stream,
                      stream, synchronize, tagged_event, tagged_stream)
from ._dtype import dtype, float16, float32
from ._tensor import Tensor, empty, from_numpy, full, manual_seed, ones, randn, zeros
from ._version import __version__

StreamCtx = StreamContext

__all__ = [
    "__version__", "CaptureInvalidatedError", "CaptureIsolationError", "CaptureUnjoinedError",
    "CaptureUnmatchedError", "CaptureUnsupportedError", "CaptureWrongThreadError", "Device",
    "Graph", "compile", "graph",
    "DeviceLostError", "DeviceMismatchError", "Event", "InternalError", "InvalidArgumentError",
    "IpcError",
    "KernelFailedError", "NoDeviceError", "NotPermittedError", "NotReadyError", "NotRecordedError",
    "NotSupportedError", "OutOfMemoryError", "RillError", "Stream", "StreamContext", "StreamCtx",
    "Tensor", "TimingDisabledError", "current_device", "current_stream", "default_stream",
    "device", "device_count", "dtype", "empty", "empty_cache", "float16", "float32", "from_dlpack",
    "from_numpy",
    "full",
    "library_path", "max_memory_allocated", "max_memory_reserved", "memory_allocated",
    "manual_seed", "memory_limit", "memory_reserved", "memory_stats", "memory_summary", "ones",
    "ops", "randn",
    "reset_peak_memory_stats", "set_device", "set_memory_limit", "set_stream", "shutdown",
    "stream", "synchronize", "tagged_event", "tagged_stream", "zeros",
]
