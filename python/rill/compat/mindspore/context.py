# SPDX-License-Identifier: MIT
"""mindspore.context on rill: the execution mode, the device and the
memory limit."""

import re

from ... import _internal, device as _device, set_device as _set_device
from ... import set_memory_limit as _set_memory_limit

GRAPH_MODE = 0
PYNATIVE_MODE = 1

_context = {"mode": PYNATIVE_MODE, "device_target": "CPU", "device_id": 0}
_UNITS = {"KB": 1 << 10, "MB": 1 << 20, "GB": 1 << 30, "TB": 1 << 40}


def _bytes(text):
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(KB|MB|GB|TB)\s*", str(text))
    if m is None:
        raise ValueError(f"mindspore.set_context: max_device_memory must be like '3.5GB', "
                         f"not {text!r}")
    return int(float(m.group(1)) * _UNITS[m.group(2)])


def set_context(**kwargs):
    """mode: PYNATIVE_MODE (rill runs ops eagerly; GRAPH_MODE comes with
    rill's graphs); max_device_memory: the pool's limit, like '3.5GB';
    device_target "GPU" or "Ascend" with device_id N makes rill's cuda:N the
    current device where rill has CUDA devices (else its device of ordinal
    N), and "CPU" rill's CPU device; the work after runs there."""
    target = kwargs.get("device_target", _context["device_target"])
    if target not in ("CPU", "GPU", "Ascend"):
        raise ValueError(f"mindspore.set_context: device_target must be 'CPU', 'GPU' or "
                         f"'Ascend', not {target!r}")
    index = kwargs.get("device_id", _context["device_id"])
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:
        raise ValueError(f"mindspore.set_context: device_id must be an int 0 or more, "
                         f"not {index!r}")
    if "device_target" in kwargs or "device_id" in kwargs:
        cuda = _internal.count_of_kind("cuda")[0] > 0
        if target == "CPU":
            name = "cpu" if cuda else None
        else:
            name = f"cuda:{index}" if cuda else index
        if name is not None:
            _set_device(_device(name))
    for key, value in kwargs.items():
        if key == "mode":
            if value == GRAPH_MODE:
                raise NotImplementedError("mindspore.set_context: rill runs PYNATIVE_MODE only "
                                          "in this version")
            if value != PYNATIVE_MODE:
                raise ValueError(f"mindspore.set_context: mode must be PYNATIVE_MODE or "
                                 f"GRAPH_MODE, not {value!r}")
        elif key == "max_device_memory":
            _set_memory_limit(_bytes(value))
        elif key not in ("device_target", "device_id"):
            raise ValueError(f"mindspore.set_context: rill does not know the key {key!r}")
        _context[key] = value


def get_context(key):
    """The value set_context set for key."""
    if key not in _context and key != "max_device_memory":
        raise ValueError(f"mindspore.get_context: rill does not know the key {key!r}")
    return _context.get(key)
