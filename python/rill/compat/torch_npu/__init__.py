# SPDX-License-Identifier: MIT
"""torch_npu on rill: `import rill.compat.torch_npu as torch_npu` stands for
`import torch_npu`. Importing torch_npu adds torch.npu and Tensor.npu();
rill.compat.torch has them already, so this module only names them."""

from ..torch import npu

__all__ = ["npu"]
