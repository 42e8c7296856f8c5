// SPDX-License-Identifier: MIT
// CPU tensors over a rill tensor's memory, for the devices whose memory the
// host reads (rill's CPU devices): PyTorch's CPU kernels run on them with no
// copy. The caller orders them with rill's work (host_view.cpp's
// host_ready synchronizes the current stream).
#pragma once

#include <unordered_map>

#include <ATen/ATen.h>

#include <rill.h>

namespace torch_rill {

// One CPU storage per rill storage within a call, so that tensors that share
// memory on rill share it on the CPU too (the kernels' overlap checks see
// it), and one view per rill tensor, so that a tensor passed twice is one
// tensor to the kernel too (x.logical_and_(y) passes x as self and out; a
// kernel refuses to resize an out that is also an input).
class HostViews {
  public:
    at::Tensor view(const at::Tensor &rill_tensor);
    // The rill storage a CPU storage made here stands for, else nullptr.
    c10::StorageImpl *rill_storage_of(const c10::StorageImpl *host) const;

  private:
    std::unordered_map<c10::StorageImpl *, c10::Storage> host_of_;
    std::unordered_map<const c10::StorageImpl *, c10::Storage> rill_of_;
    std::unordered_map<const c10::TensorImpl *, at::Tensor> views_;
};

// Waits until the work queued on rill:index's current stream has run, so
// that the host may read and write the memory it used.
void host_ready(c10::DeviceIndex index);

bool is_rill(const at::Tensor &t);

// A new rill tensor on dev with host's sizes, strides and contents (host is
// a CPU tensor; dev's memory is one the host reads).
at::Tensor copy_to_rill(const at::Tensor &host, c10::Device dev);

// host_of for the rill tensors of an op's arguments (others pass through).
at::Tensor host_of(HostViews &views, const at::Tensor &t);
std::optional<at::Tensor> host_of(HostViews &views, const std::optional<at::Tensor> &t);

} // namespace torch_rill
