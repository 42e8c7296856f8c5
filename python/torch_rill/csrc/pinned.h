// SPDX-License-Identifier: MIT
// Pinned host memory for rill devices: PyTorch's host allocator
// (pin_memory, is_pinned) on rill_malloc_host. Memory that a queued copy
// uses is freed only once that copy ran.
#pragma once

#include <ATen/core/CachingHostAllocator.h>
#include <ATen/core/Tensor.h>

#include "runtime.h"

namespace torch_rill {

at::HostAllocator *host_allocator();
// data lies in pinned memory that host_allocator() handed out and that is
// still alive.
bool is_pinned_ptr(const void *data);
// t's storage is pinned memory of host_allocator().
bool is_pinned_tensor(const at::Tensor &t);
// The work queued on stream so far uses t's pinned storage: the memory is
// freed, once t dies, only after that work ran.
void record_pinned_use(const at::Tensor &t, rill_stream *stream);

} // namespace torch_rill
