// SPDX-License-Identifier: MIT
// The fallback (fallback.cpp), for native kernels to hand over the cases
// they do not take: at::native::call_fallback_fn<&boxed_fallback, ATEN_OP(x)>;
// and its stream-ordered host path for ops that run PyTorch's CPU kernels
// outside the boxed fallback (conv_ops.cpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torch_rill {

void boxed_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack);

// A kernel over tensors of any one device: called with meta tensors at
// submit and with CPU tensors on the host. Undefined tensors stay undefined.
using HostKernel = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor> &)>;

// Runs kernel as the fallback runs an op, on dev (a device the host reads):
// at submit on meta tensors of inputs' sizes and strides, for its results'
// sizes, strides and dtypes and its argument errors; then as one host
// function on dev's current stream, on host views of inputs, writing its
// results into the rill tensors returned (allocated now, on that stream).
// name names the op in errors. kernel and what it captures must stay
// valid until the host function ran (capture by value).
std::vector<at::Tensor> queue_on_host(const std::string &name, c10::Device dev,
                                      const std::vector<at::Tensor> &inputs, HostKernel kernel);

// Raises an error naming op and the capture when dev's current stream is
// capturing, after invalidating that capture (its end fails too): op must
// synchronize with the stream (why says what makes it), which a capture
// cannot record. Returns when the stream is not capturing.
void refuse_capture(c10::Device dev, const std::string &op, const char *why);

} // namespace torch_rill
