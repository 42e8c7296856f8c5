# SPDX-License-Identifier: MIT
"""torch_npu on rill: `import rill.compat.torch_npu as torch_npu` stands for
`import torch_npu`. Importing torch_npu adds torch.npu and Tensor.npu();
rill.compat.torch has them already, so this module only names them. Where
rill.compat.torch is PyTorch itself, importing this module adds
Tensor.npu() to PyTorch's tensors (a copy on rill)."""

from ..torch import npu
from ..torch._pytorch import add_tensor_npu, wanted

if wanted():
    add_tensor_npu()

__all__ = ["npu"]
