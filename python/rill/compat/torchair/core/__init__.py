# SPDX-License-Identifier: MIT
"""torchair.core."""

from . import utils

__all__ = ["utils"]
