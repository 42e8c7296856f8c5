# SPDX-License-Identifier: MIT
"""torchair.core.utils.logger: the "torchair" logging.Logger."""

import logging

logger = logging.getLogger("torchair")

__all__ = ["logger"]
