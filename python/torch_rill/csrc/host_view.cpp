// SPDX-License-Identifier: MIT
#include "host_view.h"

#include "runtime.h"

namespace torch_rill {
namespace {

void release_storage(void *ctx) {
    delete static_cast<c10::Storage *>(ctx);
}

} // namespace

bool is_rill(const at::Tensor &t) {
    return t.defined() && t.device().type() == kDeviceType;
}

void host_ready(c10::DeviceIndex index) {
    rill_stream *stream = rill_current_stream(device(index));
    wait_interruptibly("rill_stream_synchronize",
                       [stream](uint64_t ns) { return rill_stream_synchronize_for(stream, ns); });
}

at::Tensor HostViews::view(const at::Tensor &t) {
    auto same = views_.find(t.unsafeGetTensorImpl());
    if (same != views_.end())
        return same->second;
    c10::StorageImpl *impl = t.storage().unsafeGetStorageImpl();
    auto found = host_of_.find(impl);
    if (found == host_of_.end()) {
        // The CPU storage holds a reference to the rill one; its memory is
        // resizable, so that a kernel that resizes an output gets fresh CPU
        // memory (the fallback copies such outputs back).
        auto *keep = new c10::Storage(t.storage());
        c10::DataPtr data(impl->mutable_data(), keep, &release_storage, c10::Device(c10::kCPU));
        c10::Storage host(c10::Storage::use_byte_size_t(), impl->nbytes(), std::move(data),
                          c10::GetAllocator(c10::kCPU), /*resizable=*/true);
        rill_of_.emplace(host.unsafeGetStorageImpl(), t.storage());
        found = host_of_.emplace(impl, std::move(host)).first;
    }
    at::Tensor out = at::empty({0}, t.options().device(c10::kCPU));
    out.set_(found->second, t.storage_offset(), t.sizes(), t.strides());
    // The kernels that take conjugate and negative views as they are (mm,
    // dot, their relatives) read these bits.
    out._set_conj(t.is_conj());
    out._set_neg(t.is_neg());
    views_.emplace(t.unsafeGetTensorImpl(), out);
    return out;
}

at::Tensor copy_to_rill(const at::Tensor &host, c10::Device dev) {
    if (!host.defined())
        return host;
    at::Tensor out = at::empty_strided(host.sizes(), host.strides(), host.options().device(dev));
    if (host.numel() == 0)
        return out;
    if (host.is_non_overlapping_and_dense())
        TORCH_RILL_CHECK(rill_memcpy(out.data_ptr(), host.const_data_ptr(),
                                     host.numel() * host.dtype().itemsize()));
    else
        out.copy_(host);
    return out;
}

at::Tensor host_of(HostViews &views, const at::Tensor &t) {
    return is_rill(t) ? views.view(t) : t;
}

std::optional<at::Tensor> host_of(HostViews &views, const std::optional<at::Tensor> &t) {
    if (!t.has_value() || !t->defined())
        return t;
    return host_of(views, *t);
}

c10::StorageImpl *HostViews::rill_storage_of(const c10::StorageImpl *host) const {
    auto found = rill_of_.find(host);
    return found == rill_of_.end() ? nullptr : found->second.unsafeGetStorageImpl();
}

} // namespace torch_rill
