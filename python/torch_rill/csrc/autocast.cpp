// SPDX-License-Identifier: MIT
// torch.autocast("rill"): PyTorch's autocast policies for the device, with
// the op lists CUDA's autocast uses (ATen/autocast_mode.h shares them with
// every backend). Ops off the lists pass through unchanged.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_rill {
namespace {

at::Tensor binary_cross_entropy_refused(const at::Tensor &, const at::Tensor &,
                                        const std::optional<at::Tensor> &, int64_t) {
    TORCH_CHECK(false, "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe "
                       "to autocast on rill, as on CUDA: their inputs, probabilities, lose too "
                       "much in float16. Use binary_cross_entropy_with_logits (BCEWithLogitsLoss), "
                       "which combines a sigmoid and the loss and is safe to autocast");
}

} // namespace
} // namespace torch_rill

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
    m.fallback(torch::CppFunction::makeFallthrough());
}

namespace torch_rill {
// The names the lists' signatures use unqualified.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TORCH_RILL_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
    AT_FORALL_LOWER_PRECISION_FP(TORCH_RILL_LOWER)
#undef TORCH_RILL_LOWER
#define TORCH_RILL_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
    AT_FORALL_FP32(TORCH_RILL_FP32)
#undef TORCH_RILL_FP32
#define TORCH_RILL_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
    AT_FORALL_FP32_SET_OPT_DTYPE(TORCH_RILL_FP32_SET_OPT_DTYPE)
#undef TORCH_RILL_FP32_SET_OPT_DTYPE
    AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define TORCH_RILL_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
    AT_FORALL_PROMOTE(TORCH_RILL_PROMOTE)
#undef TORCH_RILL_PROMOTE
    m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
           TORCH_FN(binary_cross_entropy_refused));
}

} // namespace torch_rill
