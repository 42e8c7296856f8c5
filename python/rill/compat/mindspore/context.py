# SPDX-License-Identifier: MIT
"""mindspore.context on rill: the execution mode and the memory limit."""

import re

from ... import _memory

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
    device_target and device_id are accepted and kept."""
    for key, value in kwargs.items():
        if key == "mode":
            if value == GRAPH_MODE:
                raise NotImplementedError("mindspore.set_context: rill runs PYNATIVE_MODE only "
                                          "in this version")
            if value != PYNATIVE_MODE:
                raise ValueError(f"mindspore.set_context: mode must be PYNATIVE_MODE or "
                                 f"GRAPH_MODE, not {value!r}")
        elif key == "max_device_memory":
            _memory.set_memory_limit(_bytes(value))
        elif key not in ("device_target", "device_id"):
            raise ValueError(f"mindspore.set_context: rill does not know the key {key!r}")
        _context[key] = value


def get_context(key):
    """The value set_context set for key."""
    if key not in _context and key != "max_device_memory":
        raise ValueError(f"mindspore.get_context: rill does not know the key {key!r}")
    return _context.get(key)
