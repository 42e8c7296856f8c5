# SPDX-License-Identifier: MIT
"""mindspore.nn.Cell: a network whose construct() runs when it is called."""


class Cell:
    """Subclass it and define construct(*inputs); calling the cell calls it."""

    def __init__(self, auto_prefix=True, flags=None):
        self._auto_prefix = auto_prefix
        self._flags = flags

    def construct(self, *inputs, **kwargs):
        raise NotImplementedError("mindspore.nn.Cell: define construct() in the subclass")

    def __call__(self, *inputs, **kwargs):
        return self.construct(*inputs, **kwargs)
