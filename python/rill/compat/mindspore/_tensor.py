# SPDX-License-Identifier: MIT
"""mindspore.Tensor on rill.Tensor."""

from ... import Tensor as _RillTensor


class Tensor(_RillTensor):
    """mindspore.Tensor(input_data, dtype=None): a rill.Tensor (float32 or float16) with
    MindSpore's names. Results of ops on it are of this class too."""

    __slots__ = ()

    def __init__(self, input_data=None, dtype=None):
        if input_data is None:
            raise TypeError("mindspore.Tensor: input_data is required (rill makes tensors from "
                            "data; use ops.zeros or ops.ones for shapes)")
        super().__init__(input_data, dtype)

    def asnumpy(self):
        """A numpy copy, once the work that writes the tensor is done."""
        return self.numpy()
