# SPDX-License-Identifier: MIT
"""torchair's in-graph multi-stream API on rill: `import rill.compat.torchair
as tng` stands for `import torchair as tng`: npu_stream_switch on tagged
streams, tagged events, npu_record_tagged_stream, and get_npu_backend,
whose backend makes torch.compile capture the model into a graph with its
streams joined back at the end, then replay it (docs/python.md). Where
rill.compat.torch is PyTorch itself (torch_rill installed), the same API
works on PyTorch's tensors on rill through custom ops that torch.compile
keeps in its graphs (_pytorch.py; docs/torch.md)."""

from ..torch._pytorch import wanted as _pytorch_wanted
from . import configs, core, ops, scope
from .configs.compiler_config import CompilerConfig


class _NpuBackend:
    """What get_npu_backend returns: a torch.compile backend (rill.compile)."""

    def __init__(self, compiler_config):
        self.compiler_config = compiler_config

    def __call__(self, model):
        from ... import compile as rill_compile
        return rill_compile(model)

    def __repr__(self):
        return f"torchair npu backend (mode={self.compiler_config.mode!r}, on rill.compile)"


def get_npu_backend(*, compiler_config=None, custom_decompositions=None):
    """The backend for torch.compile(model, backend=...): rill.compile on
    rill's own tensors, torchair's modes on PyTorch's (_pytorch.NpuBackend)."""
    if compiler_config is None:
        compiler_config = CompilerConfig()
    if not isinstance(compiler_config, CompilerConfig):
        raise TypeError("torchair.get_npu_backend: compiler_config must be a CompilerConfig, "
                        f"not {type(compiler_config).__name__}")
    if _pytorch_wanted():
        from ._pytorch import NpuBackend
        return NpuBackend(compiler_config)
    return _NpuBackend(compiler_config)


__all__ = ["CompilerConfig", "configs", "core", "get_npu_backend", "ops", "scope"]
