// SPDX-License-Identifier: MIT
// The fallback (fallback.cpp), for native kernels to hand over the cases
// they do not take: at::native::call_fallback_fn<&boxed_fallback, ATEN_OP(x)>.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

namespace torch_rill {

void boxed_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack);

} // namespace torch_rill
