// SPDX-License-Identifier: MIT
// The ops every PyTorch device provides itself: creating tensors on rill's
// allocator, views, resizing, copies between devices and reading a scalar.
// Copies between contiguous tensors of one dtype, and between tensors of
// one rill device and dtype of 4, 8 or 16 bytes into any destination that
// reaches each element once, are rill copies queued on the current stream,
// as are copies between dtypes on one rill device into a dense destination
// (rill's conversion) and non_blocking copies to and from pinned host
// memory; others run
// PyTorch's CPU copy on host views, or, for a device the host cannot read,
// on copies in host memory. Conjugate and negative views are copied by
// their physical values, then resolved in the destination. cat (so stack)
// of rill tensors of one device and dtype is one such copy per input, into
// its slice of the result.
#include <algorithm>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_local_scalar_dense_native.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/cat_ops.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <ATen/ops/set_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "capture.h"
#include "fallback.h"
#include "host_view.h"
#include "native_ops.h"
#include "pinned.h"
#include "runtime.h"

namespace torch_rill {
namespace {

// An op that reads or writes rill:index's memory on the host at once
// synchronizes with the current stream, which a graph could not replay.
// While that stream captures, the op fails naming itself, and the capture
// is invalidated as rill invalidates a capture whose stream is
// synchronized (CUDA does the same), so capture_end fails too.
void refuse_in_capture(c10::DeviceIndex index, const char *op) {
    rill_stream *stream = rill_current_stream(device(index));
    TORCH_CHECK(stream, rill_last_error());
    if (!is_capturing(stream))
        return;
    rill_status st = rill_stream_query(stream); // refused: it invalidates the capture
    const char *why = rill_last_error();
    TORCH_CHECK(false, op, " cannot run while the current stream of rill:", static_cast<int>(index),
                " captures a graph (torch.rill.graph, torch.accelerator.Graph): it waits for ",
                "the stream to use the memory on the host at once, which a replay could not ",
                "repeat; the capture is now invalidated, and capture_end will raise. Move it ",
                "out of the captured code (", rill_status_name(st), ": ", why ? why : "", ")");
}

void check_strided(std::optional<c10::Layout> layout, std::optional<bool> pin) {
    TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided,
                "rill tensors are strided; ", c10::layout_or_default(layout),
                " tensors are not supported");
    TORCH_CHECK(!c10::pinned_memory_or_default(pin),
                "pin_memory is for CPU tensors; rill tensors are device memory");
}

// make(allocator) on device dev: an allocator of that device where there
// is one, else PyTorch's under a device guard.
template <typename Make> at::Tensor on_device(c10::Device dev, Make make) {
    if (c10::Allocator *allocator = allocator_on(dev.index()))
        return make(allocator);
    const c10::DeviceGuard guard(dev);
    return make(c10::GetAllocator(kDeviceType));
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> where,
                               std::optional<bool> pin, std::optional<c10::MemoryFormat> format) {
    check_strided(layout, pin);
    return on_device(c10::device_or_default(where), [&](c10::Allocator *allocator) {
        return at::detail::empty_generic(size, allocator,
                                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                         c10::dtype_or_default(dtype), format);
    });
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride,
                         std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                         std::optional<c10::Device> where, std::optional<bool> pin) {
    check_strided(layout, pin);
    return on_device(c10::device_or_default(where), [&](c10::Allocator *allocator) {
        return at::detail::empty_strided_generic(size, stride, allocator,
                                                 c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                 c10::dtype_or_default(dtype));
    });
}

// A tensor of zeros that holds no memory (autograd's gradient of an input
// that does not change its result, sgn's of real numbers): PyTorch's
// ZeroTensor key makes ops see zeros.
at::Tensor efficient_zero_tensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout> layout,
                                 std::optional<c10::Device> where, std::optional<bool> pin) {
    check_strided(layout, pin);
    c10::DeviceIndex index = c10::device_or_default(where).index();
    c10::Device dev(kDeviceType, index_of(device(index))); // a device of this process, or its error
    at::native::ZeroTensorAllocator allocator(dev);
    c10::DispatchKeySet keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) |
                               c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
    return at::detail::empty_generic(size, &allocator, keys, c10::dtype_or_default(dtype),
                                     std::nullopt);
}

at::Tensor as_strided(const at::Tensor &self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> offset) {
    return at::cpu::as_strided_symint(self, size, stride, std::move(offset));
}

at::Tensor view(const at::Tensor &self, c10::SymIntArrayRef size) {
    return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor &self, c10::SymIntArrayRef size,
                         c10::SymIntArrayRef stride) {
    return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size),
                                      C10_AS_INTARRAYREF_SLOW(stride));
}

// Grows the storage in stream order (a rill allocation and copy queued on
// the current stream), then lets PyTorch set the sizes and strides.
const at::Tensor &resize(const at::Tensor &self, c10::SymIntArrayRef sym_size,
                         std::optional<c10::MemoryFormat> format) {
    c10::IntArrayRef size = C10_AS_INTARRAYREF_SLOW(sym_size);
    int64_t numel = c10::multiply_integers(size);
    size_t needed =
        numel == 0 ? 0
                   : static_cast<size_t>(self.storage_offset() + numel) * self.dtype().itemsize();
    c10::StorageImpl *storage = self.storage().unsafeGetStorageImpl();
    if (needed > storage->nbytes()) {
        TORCH_CHECK(storage->resizable(), "rill: the storage of this tensor cannot be resized");
        const c10::DeviceGuard guard(self.device());
        c10::DataPtr grown = storage->allocator()->allocate(needed);
        if (storage->nbytes() > 0)
            TORCH_RILL_CHECK(rill_memcpy_async(grown.get(), storage->data(), storage->nbytes(),
                                               rill_current_stream(device(self.device().index()))));
        storage->set_data_ptr_noswap(std::move(grown));
        storage->set_nbytes(needed);
    }
    return at::native::resize_(self, size, format);
}

bool plain(const at::Tensor &t) {
    return t.is_contiguous();
}

// Whether no two indices of t reach one element: its strides, smallest
// first, each past what the smaller ones reach.
bool reaches_each_once(const at::Tensor &t) {
    std::vector<std::pair<int64_t, int64_t>> dims; // (stride, size) of the dimensions > 1
    for (int64_t d = 0; d < t.dim(); d++)
        if (t.size(d) > 1)
            dims.emplace_back(t.stride(d), t.size(d));
    std::sort(dims.begin(), dims.end());
    int64_t reach = 0;
    for (const auto &[stride, size] : dims) {
        if (stride <= reach)
            return false;
        reach += (size - 1) * stride;
    }
    return true;
}

// Whether rill's strided float copy moves elements of item bytes: as 1, 2
// or 4 floats.
bool in_floats(size_t item) {
    return item % 4 == 0 && item <= 16;
}

// dst = self for tensors of one rill device, dtype and shape whose
// elements are 4, 8 or 16 bytes (as 1, 2 or 4 floats, which rill's strided
// float copy moves bit for bit), dst reaching each element once (dense, or
// a slice with gaps) and not sharing self's memory, at most
// RILL_OP_MAX_DIMS dimensions: rill's strided copy, queued on the current
// stream; false when it does not take them.
bool copy_strided(const at::Tensor &self, const at::Tensor &dst) {
    size_t item = self.dtype().itemsize(), words = item / 4;
    if (!is_rill(self) || !is_rill(dst) || self.device() != dst.device() ||
        self.scalar_type() != dst.scalar_type() || !in_floats(item) ||
        !self.sizes().equals(dst.sizes()) || !reaches_each_once(dst) ||
        self.storage().is_alias_of(dst.storage()))
        return false;
    std::vector<size_t> shape, in_strides, out_strides;
    for (int64_t d = 0; d < self.dim(); d++) {
        if (self.size(d) == 1)
            continue;
        if (self.stride(d) < 0 || dst.stride(d) < 0)
            return false;
        shape.push_back(static_cast<size_t>(self.size(d)));
        in_strides.push_back(static_cast<size_t>(self.stride(d)) * words);
        out_strides.push_back(static_cast<size_t>(dst.stride(d)) * words);
    }
    if (words > 1) { // an element's floats: a last dimension of its own
        shape.push_back(words);
        in_strides.push_back(1);
        out_strides.push_back(1);
    }
    if (shape.size() > RILL_OP_MAX_DIMS)
        return false;
    const c10::DeviceGuard guard(dst.device());
    TORCH_RILL_CHECK(rill_op_copy_strided_f32(
        rill_current_stream(device(dst.device().index())), static_cast<float *>(dst.data_ptr()),
        out_strides.data(), static_cast<const float *>(self.const_data_ptr()), in_strides.data(),
        shape.data(), shape.size()));
    return true;
}

// dst = self converted to dst's dtype, for tensors of one rill device whose
// dtypes rill converts between (bool, uint8, int32, int64, float32,
// float64), self broadcast to dst's shape, dst dense and apart from self:
// rill_op_convert, queued on the current stream, through dst in the order
// of dimensions in which it is contiguous; false when it does not take
// them.
bool copy_converting(const at::Tensor &self, const at::Tensor &dst) {
    std::optional<rill_element_type> from = element_type(self.scalar_type());
    std::optional<rill_element_type> to = element_type(dst.scalar_type());
    if (!from || !to || !is_rill(self) || !is_rill(dst) || self.device() != dst.device() ||
        !dst.is_non_overlapping_and_dense() || has_negative_stride(self) ||
        dst.dim() > RILL_OP_MAX_DIMS || !at::is_expandable_to(self.sizes(), dst.sizes()) ||
        self.storage().is_alias_of(dst.storage()))
        return false;
    at::Tensor in = self.expand(dst.sizes());
    std::vector<int64_t> order(dst.dim());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t x, int64_t y) { return dst.stride(x) > dst.stride(y); });
    std::vector<size_t> shape, in_strides;
    for (int64_t d : order) {
        shape.push_back(static_cast<size_t>(dst.size(d)));
        in_strides.push_back(in.size(d) == 1 ? 0 : static_cast<size_t>(in.stride(d)));
    }
    const c10::DeviceGuard guard(dst.device());
    TORCH_RILL_CHECK(rill_op_convert(rill_current_stream(device(dst.device().index())), *to,
                                     dst.data_ptr(), *from, in.const_data_ptr(), in_strides.data(),
                                     shape.data(), shape.size()));
    return true;
}

// The device's memory that t (numel > 0) spans, from its first element to
// its last, in elements.
int64_t span_of(const at::Tensor &t) {
    int64_t span = 1;
    for (int64_t d = 0; d < t.dim(); d++)
        span += (t.size(d) - 1) * t.stride(d);
    return span;
}

// A CPU tensor of t's sizes, strides and values, for a rill tensor of a
// device the host cannot read: the memory t spans, copied.
at::Tensor download(const at::Tensor &t) {
    at::Tensor flat = at::empty({span_of(t)}, t.options().device(c10::kCPU));
    TORCH_RILL_CHECK(rill_memcpy(flat.data_ptr(), t.const_data_ptr(),
                                 static_cast<size_t>(flat.numel()) * t.dtype().itemsize()));
    return flat.as_strided(t.sizes(), t.strides());
}

// dst = host (a CPU tensor of dst's sizes), for a rill tensor dst of a
// device the host cannot read, writing dst's elements and nothing between
// them: a dense dst's span at once; another's through a contiguous copy on
// the device and rill's strided copy where its elements allow that, else
// each run of elements adjacent in memory.
void upload(const at::Tensor &host, const at::Tensor &dst) {
    size_t item = dst.dtype().itemsize();
    if (dst.is_non_overlapping_and_dense()) {
        at::Tensor staged =
            at::empty_strided(dst.sizes(), dst.strides(), dst.options().device(c10::kCPU));
        staged.copy_(host);
        TORCH_RILL_CHECK(rill_memcpy(dst.data_ptr(), staged.const_data_ptr(),
                                     static_cast<size_t>(span_of(dst)) * item));
        return;
    }
    at::Tensor staged = at::empty(dst.sizes(), dst.options().device(c10::kCPU));
    staged.copy_(host);
    if (in_floats(item)) {
        at::Tensor packed = at::empty(dst.sizes(), dst.options());
        TORCH_RILL_CHECK(rill_memcpy(packed.data_ptr(), staged.const_data_ptr(),
                                     static_cast<size_t>(staged.numel()) * item));
        // The copy was synchronous; the strided one runs on the current
        // stream, as the dense case's copies would have, and packed stays
        // allocated until it ran (rill's pool keeps memory that queued work
        // uses).
        if (copy_strided(packed, dst))
            return;
    }
    int64_t last = dst.dim() - 1;
    int64_t run = dst.stride(last) == 1 ? dst.size(last) : 1;
    std::vector<int64_t> index(dst.dim(), 0);
    auto *out = static_cast<char *>(dst.data_ptr());
    const auto *in = static_cast<const char *>(staged.const_data_ptr());
    for (int64_t i = 0; i < staged.numel(); i += run) {
        int64_t offset = 0;
        for (int64_t d = 0; d <= last; d++)
            offset += index[d] * dst.stride(d);
        TORCH_RILL_CHECK(
            rill_memcpy(out + offset * item, in + i * item, static_cast<size_t>(run) * item));
        for (int64_t d = run > 1 ? last - 1 : last; d >= 0 && ++index[d] == dst.size(d); d--)
            index[d] = 0;
    }
}

// Copies between a rill device and the CPU, or within rill, with rill's
// copies where both sides are contiguous and of one dtype; otherwise with
// PyTorch's CPU copy on host views, after the streams involved drained.
at::Tensor copy_from(const at::Tensor &self, const at::Tensor &dst, bool non_blocking) {
    TORCH_CHECK(self.defined() && dst.defined(), "copy_ of an undefined tensor");
    if (!self.sizes().equals(dst.sizes())) {
        // PyTorch routes copies to and from rill here before its own shape
        // checks; these are TensorIterator's, in its words.
        at::DimVector shape = at::infer_size_dimvector(dst.sizes(), self.sizes());
        TORCH_CHECK(dst.sizes().equals(shape), "output with shape ", dst.sizes(),
                    " doesn't match the broadcast shape ", shape);
    }
    if (self.numel() == 0 || dst.numel() == 0)
        return dst;
    bool same_kind = self.dtype() == dst.dtype() && plain(self) && plain(dst) &&
                     self.sizes().equals(dst.sizes());
    size_t bytes = static_cast<size_t>(self.numel()) * self.dtype().itemsize();
    if (same_kind && is_rill(self) && is_rill(dst) && self.device() == dst.device()) {
        const c10::DeviceGuard guard(dst.device());
        TORCH_RILL_CHECK(rill_memcpy_async(dst.data_ptr(), self.const_data_ptr(), bytes,
                                           rill_current_stream(device(dst.device().index()))));
        return dst;
    }
    if (copy_strided(self, dst) || copy_converting(self, dst))
        return dst;
    if (same_kind && non_blocking && is_rill(self) != is_rill(dst)) {
        // Between pinned host memory and a rill device, non_blocking: queued
        // on the device's current stream, as CUDA's copy is; the pinned
        // memory stays allocated until the copy ran (pinned.cpp). The host
        // reads a device-to-host result after synchronizing.
        const at::Tensor &host = is_rill(self) ? dst : self;
        const at::Tensor &dev = is_rill(self) ? self : dst;
        if (is_pinned_tensor(host)) {
            rill_stream *stream = rill_current_stream(device(dev.device().index()));
            TORCH_CHECK(stream, rill_last_error());
            TORCH_RILL_CHECK(
                rill_memcpy_async(dst.data_ptr(), self.const_data_ptr(), bytes, stream));
            record_pinned_use(host, stream);
            return dst;
        }
    }
    for (const at::Tensor *t : {&self, &dst})
        if (is_rill(*t))
            refuse_in_capture(t->device().index(),
                              !is_rill(dst)    ? "copy_ to the CPU (.cpu(), .to(\"cpu\"), .numpy())"
                              : !is_rill(self) ? "copy_ from the CPU (.to(\"rill\"), torch.tensor)"
                                               : "copy_ between rill devices or dtypes");
    if (same_kind) {
        // Host to device, device to host, or between two rill devices: rill
        // copies after the work of the current streams of the devices
        // involved; the call returns when it is done, so the CPU side may be
        // freed or read at once (pageable memory with non_blocking too).
        if (is_rill(self) && is_rill(dst))
            host_ready(dst.device().index());
        TORCH_RILL_CHECK(rill_memcpy(dst.data_ptr(), self.const_data_ptr(), bytes));
        return dst;
    }
    for (const at::Tensor *t : {&self, &dst})
        if (is_rill(*t))
            host_ready(t->device().index());
    // A device the host cannot read (CUDA): its side goes through host memory.
    auto readable = [](const at::Tensor &t) {
        return !is_rill(t) || is_cpu_device(t.device().index());
    };
    HostViews views;
    at::Tensor host_self = !readable(self) ? download(self)
                           : is_rill(self) ? views.view(self)
                                           : self;
    if (!readable(dst)) {
        upload(host_self, dst);
        return dst;
    }
    at::Tensor host_dst = is_rill(dst) ? views.view(dst) : dst;
    host_dst.copy_(host_self, non_blocking);
    return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor &self, const at::Tensor &dst) {
    resize(dst, self.sym_sizes(), std::nullopt);
    return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor &self) {
    TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
                " elements cannot be converted to Scalar");
    refuse_in_capture(self.device().index(), "Tensor.item() (aten::_local_scalar_dense)");
    at::Tensor host = at::empty(self.sizes(), self.options().device(c10::kCPU));
    copy_from(self, host, false);
    return host.item();
}

at::Tensor &set_storage(at::Tensor &self, at::Storage source, int64_t offset, c10::IntArrayRef size,
                        c10::IntArrayRef stride) {
    return at::cpu::set_(self, std::move(source), offset, size, stride);
}

at::Tensor &set_tensor(at::Tensor &self, const at::Tensor &source) {
    return at::native::set_tensor_(self, source);
}

at::Tensor &set_whole_storage(at::Tensor &self, at::Storage source) {
    return at::native::set_(self, std::move(source));
}

// _copy_from with a conjugate or negative view on either side (the
// Conjugate and Negative dispatch keys): PyTorch's fallback for those bits
// clones the view, and the clone copies through _copy_from again, without
// end. So the physical values are copied, and the destination's then
// conjugated or negated where the two sides' bits differ.
at::Tensor copy_from_math_bits(const at::Tensor &self, const at::Tensor &dst, bool non_blocking) {
    at::Tensor src = self.alias();
    at::Tensor out = dst.alias();
    bool conj = src.is_conj() != out.is_conj();
    bool neg = src.is_neg() != out.is_neg();
    for (at::Tensor *t : {&src, &out}) {
        t->_set_conj(false);
        t->_set_neg(false);
    }
    out.copy_(src, non_blocking);
    if (conj && out.is_complex()) // the imaginary parts negated, in place
        at::view_as_real(out).select(-1, 1).neg_();
    if (neg)
        out.neg_();
    return dst;
}

// rill's pool already keeps memory that other streams' kernels use; the
// record covers work rill cannot see (host code given the pointer).
void record_stream(at::Tensor &self, c10::Stream stream) {
    if (self.storage().data())
        TORCH_RILL_CHECK(rill_record_stream(self.storage().mutable_data(), unwrap(stream)));
}

// cat of tensors of one rill device and dtype, of one number of dimensions
// and the same sizes but along dim, as copies into slices of the result,
// laid out as PyTorch's CPU kernel lays it out (the inputs' memory format
// when they share one, else contiguous); undefined for other cases
// (PyTorch's legacy 1-D empty inputs, type promotion, its errors).
at::Tensor cat_new(const at::ITensorListRef &list, int64_t dim) {
    std::vector<at::Tensor> ts(list.begin(), list.end());
    if (ts.empty() || !is_rill(ts[0]) || ts[0].dim() == 0)
        return {};
    const at::Tensor &first = ts[0];
    int64_t nd = first.dim();
    if (dim < -nd || dim >= nd)
        return {};
    dim = dim < 0 ? dim + nd : dim;
    c10::MemoryFormat format = first.suggest_memory_format();
    std::vector<int64_t> shape(first.sizes().begin(), first.sizes().end());
    shape[static_cast<size_t>(dim)] = 0;
    for (const at::Tensor &t : ts) {
        if (!is_rill(t) || t.device() != first.device() || t.scalar_type() != first.scalar_type() ||
            t.dim() != nd)
            return {};
        for (int64_t d = 0; d < nd; d++)
            if (d != dim && t.size(d) != first.size(d))
                return {};
        shape[static_cast<size_t>(dim)] += t.size(dim);
        if (t.suggest_memory_format() != format)
            format = c10::MemoryFormat::Contiguous;
    }
    at::Tensor out = at::empty(shape, first.options().memory_format(format));
    int64_t offset = 0;
    for (const at::Tensor &t : ts) {
        if (t.size(dim) > 0)
            out.narrow(dim, offset, t.size(dim)).copy_(t);
        offset += t.size(dim);
    }
    return out;
}

at::Tensor cat(const at::ITensorListRef &tensors, int64_t dim) {
    at::Tensor out = cat_new(tensors, dim);
    return out.defined()
               ? out
               : at::native::call_fallback_fn<&boxed_fallback, at::_ops::cat>::call(tensors, dim);
}

} // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("cat", cat);
    m.impl("record_stream", record_stream);
    m.impl("empty.memory_format", empty_memory_format);
    m.impl("empty_strided", empty_strided);
    m.impl("_efficientzerotensor", efficient_zero_tensor);
    m.impl("as_strided", as_strided);
    m.impl("view", view);
    m.impl("_reshape_alias", reshape_alias);
    // The views whose kernels PyTorch registers per device, not for all:
    // through the fallback they were copies on a device the host cannot
    // read, and writes through them were lost.
    m.impl("unfold", at::native::unfold);
    m.impl("view_as_real", at::native::view_as_real);
    m.impl("view_as_complex", at::native::view_as_complex);
    m.impl("resize_", resize);
    m.impl("_copy_from", copy_from);
    m.impl("_copy_from_and_resize", copy_from_and_resize);
    m.impl("_local_scalar_dense", local_scalar_dense);
    m.impl("set_.source_Storage_storage_offset", set_storage);
    m.impl("set_.source_Tensor", set_tensor);
    m.impl("set_.source_Storage", set_whole_storage);
}

TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
    m.impl("_copy_from", copy_from_math_bits);
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
    m.impl("_copy_from", copy_from_math_bits);
}

} // namespace torch_rill
