# SPDX-License-Identifier: MIT
"""torchair.configs.compiler_config.CompilerConfig."""

_MODES = ("max-autotune", "reduce-overhead")


class CompilerConfig:
    """config.mode = "reduce-overhead" (aclgraph) or "max-autotune"
    (torchair's default): on rill's own tensors both capture the model into
    a rill graph; on PyTorch's (torch_rill), reduce-overhead captures and
    replays, max-autotune runs the graph eagerly."""

    def __init__(self):
        self._mode = "max-autotune"

    @property
    def mode(self):
        return self._mode

    @mode.setter
    def mode(self, value):
        if value not in _MODES:
            raise ValueError(f"torchair CompilerConfig.mode must be one of {_MODES}, "
                             f"not {value!r}")
        self._mode = value
