# SPDX-License-Identifier: MIT
"""rill.compat.torch as PyTorch itself. Where PyTorch 2.15 and torch_rill
are installed, `import rill.compat.torch as torch` gives a view of the real
`torch` module in which torch.cuda (and torch.npu) is torch.rill and the
device names "cuda" and "npu" mean rill's devices in the calls made through
it (`torch.randn(3, device="cuda")`, `torch.device("cuda:0")`). Tensors,
autograd, nn and every op are PyTorch's; tensor methods (`x.to(...)`) take
"rill". RILL_COMPAT_TORCH chooses: "auto" (the default: PyTorch when
torch_rill can be found), "pytorch" (always; ImportError without it) or
"rill" (rill's own tensors, the module of this package)."""

import functools
import importlib.util
import os
import sys
import types

_ALIASES = ("cuda", "npu")


def wanted():
    """Whether rill.compat.torch is PyTorch itself here."""
    choice = os.environ.get("RILL_COMPAT_TORCH", "auto")
    if choice not in ("auto", "pytorch", "rill"):
        raise ImportError(f"RILL_COMPAT_TORCH is {choice!r}: set it to auto, pytorch or rill")
    if choice == "rill":
        return False
    # A package, not the namespace that the source tree's python/torch_rill
    # folder makes on a path holding python/.
    spec = importlib.util.find_spec("torch_rill")
    found = spec is not None and spec.origin is not None
    if choice == "pytorch" and not found:
        raise ImportError("RILL_COMPAT_TORCH=pytorch: torch_rill, PyTorch's rill device, is not "
                          "installed (pip install --no-build-isolation ./python/torch_rill); "
                          "unset RILL_COMPAT_TORCH to use rill's own tensors")
    return found


def _rill_device(value):
    """value, with "cuda" and "npu" devices made rill's."""
    import torch

    if isinstance(value, str):
        kind, sep, index = value.partition(":")
        return "rill" + sep + index if kind in _ALIASES else value
    if isinstance(value, torch.device) and value.type in _ALIASES:
        return torch.device("rill", value.index)
    return value


class _DeviceType(type):
    def __instancecheck__(cls, obj):
        import torch

        return isinstance(obj, torch.device)


class device(metaclass=_DeviceType):  # noqa: N801 - torch's name
    """torch.device, with "cuda" and "npu" meaning rill."""

    def __new__(cls, kind, index=None):
        import torch

        kind = _rill_device(kind)
        return torch.device(kind) if index is None else torch.device(kind, index)


def _wrap(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        if "device" in kwargs:
            kwargs["device"] = _rill_device(kwargs["device"])
        return fn(*args, **kwargs)

    return call


class _Torch(types.ModuleType):
    """The real torch module's attributes, functions translating device=."""

    def __init__(self, name, real):
        super().__init__(name, real.__doc__)
        self._real = real

    def __getattr__(self, name):
        value = getattr(self._real, name)
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
            value = _wrap(value)
            setattr(self, name, value)  # found here from now on
        return value

    def __dir__(self):
        return sorted(set(dir(self._real)) | set(self.__dict__))


def add_tensor_npu():
    """Adds Tensor.npu(device=None, non_blocking=False), as importing
    torch_npu does: the tensor on rill (the current device, or the index or
    device given), like Tensor.cuda."""
    import torch

    if hasattr(torch.Tensor, "npu"):
        return

    def npu(self, device=None, non_blocking=False, memory_format=torch.preserve_format):
        if device is None:
            device = torch.device("rill", torch.rill.current_device())
        elif isinstance(device, int):
            device = torch.device("rill", device)
        else:
            device = torch.device(_rill_device(device))
        return self.to(device, non_blocking=non_blocking, memory_format=memory_format)

    torch.Tensor.npu = npu


def module(name):
    """The module that stands for rill.compat.torch (name): PyTorch's,
    entered in sys.modules with its submodules nn, nn.functional, cuda and
    npu in the place of this package's."""
    import torch
    import torch_rill  # noqa: F401 - registers the rill device and torch.rill

    view = _Torch(name, torch)
    view.device = device
    view.cuda = view.npu = torch.rill
    view.__path__ = []  # a package: its submodules are those entered below
    for sub, mod in (("nn", torch.nn), ("nn.functional", torch.nn.functional),
                     ("cuda", torch.rill), ("npu", torch.rill)):
        sys.modules[f"{name}.{sub}"] = mod
    return view
