# SPDX-License-Identifier: MIT
"""What rill.compat.torch does not provide: a NotImplementedError that names
the call and the way out, instead of an AttributeError deep inside."""


class NotProvidedError(NotImplementedError, AttributeError):
    """A PyTorch call that rill.compat.torch does not provide. It is a
    NotImplementedError; it is also an AttributeError, so that hasattr()
    and getattr() with a default treat the name as absent."""


def not_provided(name):
    return NotProvidedError(
        f"{name} is not provided by rill.compat.torch; for it, hand the tensors to PyTorch "
        f"without a copy through DLPack (import torch; x = torch.from_dlpack(t)), compute it "
        f"there, and bring the result back with rill.compat.torch.from_numpy(y.numpy())")


def module_getattr(module_name):
    """A module's __getattr__: torch names it lacks raise NotProvidedError;
    dunder names (which Python's machinery probes) stay AttributeErrors."""

    def __getattr__(name):
        if name.startswith("__"):
            raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
        raise not_provided(f"{module_name}.{name}")

    return __getattr__
