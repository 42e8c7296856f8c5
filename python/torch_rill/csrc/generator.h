// SPDX-License-Identifier: MIT
// rill devices' random generators (hooks.cpp).
#pragma once

#include <optional>

#include <ATen/core/Generator.h>

namespace torch_rill {

// The CPU generator that draws for gen (a rill generator), or for rill:index's
// default generator when gen is empty; a CPU generator is its own.
at::Generator cpu_engine(const std::optional<at::Generator> &gen, c10::DeviceIndex index);

// Registers the hooks with PyTorch (at import of torch_rill._C).
void register_hooks();

} // namespace torch_rill
