# SPDX-License-Identifier: MIT
"""torch.nn on rill: Module (its parameters, submodules, state_dict and
load_state_dict, train and eval, to and cuda), Parameter, and the layers of
a small MLP or CNN: Linear, Conv2d, MaxPool2d, AvgPool2d,
AdaptiveAvgPool2d(1), Flatten, Dropout, Identity, Sequential and the
activations, forward only. A new layer's weights are drawn as torch draws
them (uniform in +-1/sqrt(fan_in)) from numpy's generator, seeded by
rill.manual_seed's seed: the same shapes and spread as torch's, not its
values; load_state_dict copies a trained model's."""

import collections
import math

import numpy as np

from .... import Tensor as _RillTensor, _internal
from .._missing import module_getattr, not_provided
from .._tensor import Tensor
from . import functional

__getattr__ = module_getattr("torch.nn")


class Parameter(Tensor):
    """A tensor that a Module registers as a parameter when it is assigned
    to one of its attributes. Results of ops on it are plain tensors."""

    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        super().__init__(data if data is not None else np.zeros(0, np.float32))

    @classmethod
    def _empty(cls, shape, dt, stream, where):
        return Tensor._empty(shape, dt, stream, where)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()


Parameter._view_class = Tensor

_init_rng = {"rng": None, "seed": None}


def _uniform(shape, bound):
    seed = _internal.seed()
    if _init_rng["seed"] != seed:
        _init_rng["rng"] = np.random.default_rng(seed)
        _init_rng["seed"] = seed
    return Parameter(_init_rng["rng"].uniform(-bound, bound, size=shape).astype(np.float32))


class Module:
    """Subclass it, call super().__init__() and define forward(*inputs);
    calling the module calls forward. Parameters and modules assigned to
    its attributes are registered, in order."""

    def __init__(self):
        object.__setattr__(self, "_parameters", collections.OrderedDict())
        object.__setattr__(self, "_modules", collections.OrderedDict())
        object.__setattr__(self, "training", True)

    def __setattr__(self, name, value):
        params = self.__dict__.get("_parameters")
        if params is None:
            raise AttributeError(f"{type(self).__name__}: call super().__init__() in __init__ "
                                 "before assigning attributes")
        params.pop(name, None)
        self._modules.pop(name, None)
        if isinstance(value, Parameter):
            params[name] = value
        elif isinstance(value, Module):
            self._modules[name] = value
        object.__setattr__(self, name, value)

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        raise not_provided(f"torch.nn.Module.{name}")

    def register_parameter(self, name, param):
        setattr(self, name, param)

    def add_module(self, name, module):
        setattr(self, name, module)

    def forward(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}: define forward() in the subclass")

    def __call__(self, *inputs, **kwargs):
        return self.forward(*inputs, **kwargs)

    def named_parameters(self, prefix=""):
        for name, p in self._parameters.items():
            if p is not None:
                yield prefix + name, p
        for name, m in self._modules.items():
            yield from m.named_parameters(prefix + name + ".")

    def parameters(self):
        for _, p in self.named_parameters():
            yield p

    def children(self):
        return iter(self._modules.values())

    def modules(self):
        yield self
        for m in self._modules.values():
            yield from m.modules()

    def state_dict(self):
        """The parameters by dotted name (the tensors themselves)."""
        return collections.OrderedDict(self.named_parameters())

    def load_state_dict(self, state_dict, strict=True):
        """Copies each parameter's values from state_dict (rill tensors, or
        anything numpy reads: torch's CPU tensors, arrays) into this
        module's parameters, which keep their shapes."""
        own = dict(self.named_parameters())
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        if strict and (missing or unexpected):
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}: "
                               f"missing keys {missing}, unexpected keys {unexpected}")
        for name, p in own.items():
            if name not in state_dict:
                continue
            value = state_dict[name]
            arr = value.numpy() if isinstance(value, _RillTensor) else np.asarray(
                value.detach() if hasattr(value, "detach") else value)
            if tuple(arr.shape) != tuple(p.shape):
                raise RuntimeError(f"load_state_dict: {name} has shape {tuple(arr.shape)} and "
                                   f"the module's {tuple(p.shape)}")
            p.copy_(Tensor(np.ascontiguousarray(arr, dtype=np.float32)))
        return collections.namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])(
            missing, unexpected)

    def eval(self):
        return self.train(False)

    def train(self, mode=True):
        for m in self.modules():
            object.__setattr__(m, "training", mode)
        return self

    def to(self, *args, **kwargs):
        """The module itself: rill's tensors are on the device already."""
        return self

    def cuda(self, device=None):
        return self

    def cpu(self):
        return self

    def float(self):
        return self

    def zero_grad(self, set_to_none=True):
        """Nothing to clear: rill keeps no gradients."""


class Sequential(Module):
    def __init__(self, *modules):
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], collections.OrderedDict):
            for name, m in modules[0].items():
                self.add_module(name, m)
        else:
            for i, m in enumerate(modules):
                self.add_module(str(i), m)

    def forward(self, x):
        for m in self._modules.values():
            x = m(x)
        return x

    def __getitem__(self, i):
        return list(self._modules.values())[i]

    def __len__(self):
        return len(self._modules)


class Linear(Module):
    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        self.weight = _uniform((out_features, in_features), bound)
        self.bias = _uniform((out_features,), bound) if bias else None

    def forward(self, x):
        return functional.linear(x, self.weight, self.bias)


class Conv2d(Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__()
        if padding_mode != "zeros":
            raise not_provided(f"torch.nn.Conv2d(padding_mode={padding_mode!r})")
        r, s = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
        bound = 1.0 / math.sqrt(in_channels * r * s)
        self.weight = _uniform((out_channels, in_channels, r, s), bound)
        self.bias = _uniform((out_channels,), bound) if bias else None

    def forward(self, x):
        return functional.conv2d(x, self.weight, self.bias, self.stride, self.padding,
                                 self.dilation, self.groups)


class MaxPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices=False,
                 ceil_mode=False):
        super().__init__()
        self.args = (kernel_size, stride, padding, dilation, ceil_mode, return_indices)

    def forward(self, x):
        return functional.max_pool2d(x, *self.args)


class AvgPool2d(Module):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, divisor_override=None):
        super().__init__()
        self.args = (kernel_size, stride, padding, ceil_mode, count_include_pad,
                     divisor_override)

    def forward(self, x):
        return functional.avg_pool2d(x, *self.args)


class AdaptiveAvgPool2d(Module):
    def __init__(self, output_size):
        super().__init__()
        self.output_size = output_size

    def forward(self, x):
        return functional.adaptive_avg_pool2d(x, self.output_size)


class Flatten(Module):
    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim, self.end_dim = start_dim, end_dim

    def forward(self, x):
        return x.flatten(self.start_dim, self.end_dim)


class Dropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        self.p = p

    def forward(self, x):
        return functional.dropout(x, self.p, self.training)


class Identity(Module):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


def _activation(name, fn):
    class Activation(Module):
        def __init__(self, *args, **kwargs):
            super().__init__()
            self.args, self.kwargs = args, {k: v for k, v in kwargs.items() if k != "inplace"}

        def forward(self, x):
            return fn(x, *self.args, **self.kwargs)

    Activation.__name__ = Activation.__qualname__ = name
    Activation.__doc__ = f"torch.nn.{name}: functional.{fn.__name__} as a module."
    return Activation


ReLU = _activation("ReLU", functional.relu)
LeakyReLU = _activation("LeakyReLU", functional.leaky_relu)
GELU = _activation("GELU", functional.gelu)
Sigmoid = _activation("Sigmoid", functional.sigmoid)
Tanh = _activation("Tanh", functional.tanh)
SiLU = _activation("SiLU", functional.silu)
Softmax = _activation("Softmax", functional.softmax)
LogSoftmax = _activation("LogSoftmax", functional.log_softmax)


class CrossEntropyLoss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return functional.cross_entropy(input, target, self.reduction)


class MSELoss(Module):
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, target):
        return functional.mse_loss(input, target, self.reduction)
