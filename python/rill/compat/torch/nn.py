# SPDX-License-Identifier: MIT
"""torch.nn.Module: a model whose forward() runs when it is called."""


class Module:
    """Subclass it, call super().__init__() and define forward(*inputs);
    calling the module calls forward."""

    def __init__(self):
        self.training = True

    def forward(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__}: define forward() in the subclass")

    def __call__(self, *inputs, **kwargs):
        return self.forward(*inputs, **kwargs)

    def eval(self):
        self.training = False
        return self

    def train(self, mode=True):
        self.training = mode
        return self
