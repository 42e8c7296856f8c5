// SPDX-License-Identifier: MIT
// What the files of rill kernels share (native_ops.cpp): the current stream
// of a tensor's device, the tests that decide whether a kernel takes a
// tensor (float32, in place, flipped), and a tensor's strides read under
// broadcasting.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/ATen.h>

#include <rill.h>

namespace torch_rill {

// The current stream of t's device, where a kernel for t is queued. rill's
// ops name their stream, so launching one needs no device guard.
rill_stream *stream_of(const at::Tensor &t);

// t is a float32 tensor on a rill device.
bool is_f32(const at::Tensor &t);

// The rill_element_type of a dtype (bool, uint8, int32, int64, float32,
// float64); nullopt for the others.
std::optional<rill_element_type> element_type(at::ScalarType t);

// t is out: the same first element, shape and strides.
bool is_same_view(const at::Tensor &t, const at::Tensor &out);

// t has a stride below 0 (a flip), which no rill kernel reads.
bool has_negative_stride(const at::Tensor &t);

// Strides, in elements, of t read as a tensor of shape (broadcasting: 0
// where t's dimension is 1 or missing).
std::vector<size_t> broadcast_strides(const at::Tensor &t, c10::IntArrayRef shape);

// A scalar argument (alpha, beta) equal to one.
bool is_one(const at::Scalar &s);

// A new tensor for the result of an element-wise op between a and b, rill
// float32 tensors of one device, laid out as PyTorch's CPU kernels
// (TensorIterator) lay it out: contiguous when a and b are, else after
// their strides (channels-last in, channels-last out).
at::Tensor binary_output(const at::Tensor &a, const at::Tensor &b);

// a (op) b, broadcast, into a new tensor from binary_output; a and b have
// no negative strides.
at::Tensor binary_into_new(rill_binary_op op, const at::Tensor &a, const at::Tensor &b);

// The bits of value in t's dtype, converted as PyTorch's fill_ converts it
// (Scalar::to, which raises for a value out of the type's range); nullopt
// for a dtype of another width (complex128) or none of these.
std::optional<uint64_t> fill_bits(const at::Tensor &t, const at::Scalar &value);

} // namespace torch_rill
