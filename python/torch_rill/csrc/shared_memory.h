// SPDX-License-Identifier: MIT
// Sharing rill tensors between processes (torch.multiprocessing): a
// storage's block as rill's interprocess memory handle, and the storage
// another process opens from it, whose release it counts in a counter
// both processes map (torch_rill/multiprocessing.py keeps the rest).
#pragma once

#include <pybind11/pybind11.h>

namespace torch_rill {

void define_shared_memory(pybind11::module_ &m);

} // namespace torch_rill
