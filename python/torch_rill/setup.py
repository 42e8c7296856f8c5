# SPDX-License-Identifier: MIT
"""Builds torch_rill._C against the PyTorch installed in the interpreter that
runs pip (pip install --no-build-isolation ./python/torch_rill) and rill's
public header. The module's rill_* calls resolve at import to the librill
that rill's Python package loads, so both packages share one runtime."""

import glob
import os

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.normpath(os.path.join(HERE, "..", "..", "include"))

setup(
    ext_modules=[
        CppExtension(
            "torch_rill._C",
            sorted(glob.glob(os.path.join("csrc", "*.cpp"))),
            include_dirs=[os.path.join(HERE, "csrc"), INCLUDE],
            extra_compile_args=["-std=c++20", "-O2"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
