# SPDX-License-Identifier: MIT
"""torchair's in-graph multi-stream API on rill: `import rill.compat.torchair
as tng` stands for `import torchair as tng`.

scope.npu_stream_switch(tag, priority) makes the block's ops run on the
stream that tag names (rill.tagged_stream); ops.npu_create_tagged_event,
npu_tagged_event_record and npu_tagged_event_wait are tagged events
(rill.tagged_event) recorded and waited on the current stream;
ops.npu_record_tagged_stream(tensor, tag) is tensor.record_stream on the
tagged stream. get_npu_backend(compiler_config=...) gives the backend that
torch.compile (rill.compat.torch) maps to rill.compile: the model is
captured into a graph with its tagged streams and events at the first call
and replayed after. Every stream that the model's ops ran on is joined
back to the capturing stream at the end of the capture, as torchair joins
its streams at the end of a graph."""

from . import configs, core, ops, scope
from .configs.compiler_config import CompilerConfig


class _NpuBackend:
    """What get_npu_backend returns: a torch.compile backend (rill.compile)."""

    def __init__(self, compiler_config):
        self.compiler_config = compiler_config

    def __call__(self, model):
        from ..._compile import compile as rill_compile
        return rill_compile(model)

    def __repr__(self):
        return f"torchair npu backend (mode={self.compiler_config.mode!r}, on rill.compile)"


def get_npu_backend(*, compiler_config=None, custom_decompositions=None):
    """The backend for torch.compile(model, backend=...)."""
    if compiler_config is None:
        compiler_config = CompilerConfig()
    if not isinstance(compiler_config, CompilerConfig):
        raise TypeError("torchair.get_npu_backend: compiler_config must be a CompilerConfig, "
                        f"not {type(compiler_config).__name__}")
    return _NpuBackend(compiler_config)


__all__ = ["CompilerConfig", "configs", "core", "get_npu_backend", "ops", "scope"]
