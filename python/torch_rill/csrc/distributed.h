// SPDX-License-Identifier: MIT
// torch.distributed's backend "rill": c10d collectives as commands of rill
// streams, over librill_mpi (rill_mpi.h). Built when librill_mpi has MPI
// (TORCH_RILL_DISTRIBUTED defined); torch_rill.distributed registers it.
#pragma once

#include <pybind11/pybind11.h>

namespace torch_rill {

// _dist_create(store, rank, size, timeout, ranks), the creator of a group
// of the global ranks ranks (empty: the default group, MPI_COMM_WORLD)
// that torch_rill.distributed registers, and _dist_finalize(),
// which destroys the backends' communicators and ends the MPI that a
// backend started (at the interpreter's exit).
void define_distributed(pybind11::module_ &m);

} // namespace torch_rill
