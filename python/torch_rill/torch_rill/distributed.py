# SPDX-License-Identifier: MIT
"""torch.distributed's backend ``"rill"``: collectives of rill tensors as
commands of rill streams, over librill_mpi (MPI_COMM_WORLD, and a
communicator of its ranks for each ``new_group``). Importing
torch_rill registers it when its extension was built with it; importing this
module without it raises, saying how to build it.

    MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 mpirun -np 2 -x MASTER_ADDR -x MASTER_PORT \
        python train.py                 # in train.py:
    import torch.distributed as dist, torch_rill
    dist.init_process_group("rill")     # env://

Under mpirun, RANK, WORLD_SIZE and LOCAL_RANK default to Open MPI's
OMPI_COMM_WORLD_* (MPICH's PMI_RANK and PMI_SIZE) when unset, so
``init_method="env://"`` needs only MASTER_ADDR and MASTER_PORT. The backend
initializes MPI (MPI_Init_thread) unless the program did, and finalizes what
it initialized at the interpreter's exit."""

import atexit
import os

import torch.distributed as dist

from . import _C

__all__ = ["is_available"]

_UNAVAILABLE = (
    "torch_rill.distributed: this build of torch_rill has no torch.distributed backend: it "
    "needs librill_mpi built with MPI. Install MPI (Debian: apt-get install libopenmpi-dev "
    "openmpi-bin), then configure rill's CMake build again (-DRILL_MPI=ON, the default, with "
    "-DRILL_TORCH_PYTHON=<python with torch>), or pip install ./python/torch_rill with "
    "RILL_MPI_LIBRARY=<path of a librill_mpi.so built with MPI>")

_FROM_LAUNCHER = (
    ("RANK", ("OMPI_COMM_WORLD_RANK", "PMI_RANK")),
    ("WORLD_SIZE", ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")),
    ("LOCAL_RANK", ("OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID")),
)


def is_available():
    """True when torch_rill was built with the backend (librill_mpi with MPI)."""
    return hasattr(_C, "_dist_create")


def _ranks_from_launcher():
    for ours, theirs in _FROM_LAUNCHER:
        if ours in os.environ:
            continue
        for name in theirs:
            if name in os.environ:
                os.environ[ours] = os.environ[name]
                break


_finalize_registered = False


def _create(opts, backend_options=None):
    """The creator of the extended API: opts is a _DistributedBackendOptions,
    whose global_ranks_in_group names a subgroup's members (empty for the
    default group)."""
    global _finalize_registered
    if not _finalize_registered:
        # Runs before rill's own exit handler (atexit runs the last first):
        # the communicators go, then the MPI the backend started.
        atexit.register(_C._dist_finalize)
        _finalize_registered = True
    return _C._dist_create(opts.store, opts.group_rank, opts.group_size, opts.timeout,
                           list(opts.global_ranks_in_group))


def _register():
    if "rill" not in dist.Backend.backend_list:
        dist.Backend.register_backend("rill", _create, extended_api=True,
                                      devices=["cpu", "rill"])
    _ranks_from_launcher()


if not is_available():
    raise ImportError(_UNAVAILABLE)
if not dist.is_available():
    raise ImportError("torch_rill.distributed: this PyTorch has no torch.distributed; install "
                      "a build of PyTorch with it (PyPI's wheels have it)")
_register()
