# SPDX-License-Identifier: MIT
"""torchair.configs."""

from . import compiler_config

__all__ = ["compiler_config"]
