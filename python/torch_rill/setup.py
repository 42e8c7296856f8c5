# SPDX-License-Identifier: MIT
"""Builds torch_rill._C against the PyTorch installed in the interpreter that
runs pip (pip install --no-build-isolation ./python/torch_rill) and rill's
public header. The module's rill_* calls resolve at import to the librill
that rill's Python package loads, so both packages share one runtime.

torch.distributed's backend "rill" (csrc/distributed.cpp) is built in when
RILL_MPI_LIBRARY names a librill_mpi.so built with MPI (a CMake build's
build/<preset>/librill_mpi.so) and mpicc is found; otherwise it is left out,
and torch_rill.distributed says how to get it."""

import glob
import os
import shlex
import shutil
import subprocess
import sys

from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CppExtension

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.normpath(os.path.join(HERE, "..", "..", "include"))


def mpi_flags():
    """(compile flags, link flags) of the MPI that mpicc wraps, or None."""
    mpicc = shutil.which(os.environ.get("MPICC", "mpicc"))
    if mpicc is None:
        return None
    for compile_args, link_args in ((["--showme:compile"], ["--showme:link"]),  # Open MPI
                                    (["-compile_info"], ["-link_info"])):  # MPICH
        try:
            c = subprocess.run([mpicc] + compile_args, capture_output=True, text=True, check=True)
            link = subprocess.run([mpicc] + link_args, capture_output=True, text=True, check=True)
        except (OSError, subprocess.CalledProcessError):
            continue
        cflags = [f for f in shlex.split(c.stdout) if f.startswith(("-I", "-D", "-pthread"))]
        lflags = [f for f in shlex.split(link.stdout) if f.startswith(("-L", "-l", "-Wl", "-pthread"))]
        return cflags, lflags
    return None


def distributed_options():
    """The extension's extra options for the distributed backend, or None."""
    library = os.environ.get("RILL_MPI_LIBRARY")
    if not library:
        print("torch_rill: building without the torch.distributed backend (set "
              "RILL_MPI_LIBRARY to a librill_mpi.so built with MPI to include it)",
              file=sys.stderr)
        return None
    flags = mpi_flags()
    if flags is None or not os.path.exists(library):
        print(f"torch_rill: building without the torch.distributed backend: "
              f"{'mpicc was not found' if flags is None else library + ' does not exist'}",
              file=sys.stderr)
        return None
    libdir = os.path.dirname(os.path.abspath(library))
    return {
        "extra_compile_args": flags[0] + ["-DTORCH_RILL_DISTRIBUTED"],
        "extra_link_args": flags[1] + [os.path.abspath(library), "-Wl,-rpath," + libdir],
    }


sources = sorted(glob.glob(os.path.join("csrc", "*.cpp")))
dist_options = distributed_options()
if dist_options is None:
    sources = [s for s in sources if os.path.basename(s) != "distributed.cpp"]
    dist_options = {"extra_compile_args": [], "extra_link_args": []}

# -g0: no debug information in the installed module (2.5 MB, not 66 MB).
setup(
    ext_modules=[
        CppExtension(
            "torch_rill._C",
            sources,
            include_dirs=[os.path.join(HERE, "csrc"), INCLUDE],
            extra_compile_args=["-std=c++20", "-O2", "-g0"] + dist_options["extra_compile_args"],
            extra_link_args=dist_options["extra_link_args"],
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
