// SPDX-License-Identifier: MIT
// torch.rill.StreamContext, the with block of torch.rill.stream(s).
#pragma once

#include <pybind11/pybind11.h>

namespace torch_rill {

void define_stream_context(pybind11::module_ &m);

} // namespace torch_rill
