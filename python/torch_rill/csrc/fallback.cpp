// SPDX-License-Identifier: MIT
// Every op rill has no kernel of its own for runs PyTorch's CPU kernel. On a
// device the host reads (rill's CPU devices) it runs on host views of the
// same memory, after the current stream's work, with no copy; elsewhere it
// goes through PyTorch's own copying fallback. Random ops draw from the rill
// device's generator.
#include <ATen/native/CPUFallback.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "fallback.h"
#include "generator.h"
#include "host_view.h"
#include "runtime.h"

namespace torch_rill {
namespace {

// Calls fn on every tensor of an argument or result, with a way to put
// another tensor in its place.
template <typename Fn> c10::IValue map_tensors(const c10::IValue &value, Fn &&fn) {
    if (value.isTensor())
        return fn(value.toTensor());
    if (value.isTensorList()) {
        c10::List<at::Tensor> out;
        for (const at::Tensor &t : value.toTensorList())
            out.push_back(fn(t));
        return out;
    }
    if (value.isOptionalTensorList()) {
        c10::List<std::optional<at::Tensor>> out;
        for (const std::optional<at::Tensor> &t : value.toOptionalTensorList())
            out.push_back(t.has_value() && t->defined() ? std::optional<at::Tensor>(fn(*t)) : t);
        return out;
    }
    return value;
}

// The rill device the op runs on: that of its rill tensors, which must be
// one device, beside CPU tensors of zero dimensions only (as on CUDA).
c10::Device device_of(const c10::OperatorHandle &op, c10::ArrayRef<c10::IValue> args) {
    std::optional<c10::Device> rill_dev, other;
    for (const c10::IValue &arg : args)
        map_tensors(arg, [&](const at::Tensor &t) {
            if (!t.defined())
                return t;
            if (is_rill(t)) {
                if (!rill_dev)
                    rill_dev = t.device();
                else if (*rill_dev != t.device())
                    other = t.device();
            } else if (!(t.is_cpu() && t.dim() == 0)) {
                other = t.device();
            }
            return t;
        });
    TORCH_CHECK(rill_dev, op.schema().operator_name(), " reached rill with no rill tensor");
    TORCH_CHECK(!other,
                "Expected all tensors to be on the same device, but found at least two "
                "devices, ",
                *rill_dev, " and ", *other, "! (when checking arguments for ",
                op.schema().operator_name(), ")");
    return *rill_dev;
}

// Puts a rill tensor back where a CPU kernel returned a host view of rill
// memory (views, in-place and out= results), or a new rill tensor with the
// contents of a CPU tensor the kernel made.
at::Tensor to_rill(const at::Tensor &host, const HostViews &views, c10::Device dev,
                   const std::vector<std::pair<at::Tensor, at::Tensor>> &inputs) {
    if (!host.defined())
        return host;
    for (const auto &[rill_tensor, view] : inputs)
        if (view.unsafeGetTensorImpl() == host.unsafeGetTensorImpl()) {
            if (!rill_tensor.sizes().equals(host.sizes()) ||
                !rill_tensor.strides().equals(host.strides()) ||
                host.storage().data() != view.storage().data()) {
                // The kernel resized the output: give the rill tensor its
                // shape and the contents.
                rill_tensor.resize_(host.sizes());
                rill_tensor.as_strided_(host.sizes(), host.strides(), 0);
                HostViews fresh;
                fresh.view(rill_tensor).copy_(host);
            }
            return rill_tensor;
        }
    c10::StorageImpl *rill_storage = views.rill_storage_of(host.storage().unsafeGetStorageImpl());
    if (rill_storage) {
        at::Tensor base = at::empty({0}, host.options().device(dev));
        base.set_(c10::Storage(c10::intrusive_ptr<c10::StorageImpl>::reclaim_copy(rill_storage)),
                  host.storage_offset(), host.sizes(), host.strides());
        return base;
    }
    return copy_to_rill(host, dev);
}

void host_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack, c10::Device dev) {
    const auto &schema = op.schema();
    const size_t num_args = schema.arguments().size();
    host_ready(dev.index());
    HostViews views;
    std::vector<std::pair<at::Tensor, at::Tensor>> inputs; // rill tensor, its host view
    for (size_t i = 0; i < num_args; i++) {
        c10::IValue &arg = (*stack)[stack->size() - num_args + i];
        const c10::TypePtr &type = schema.arguments()[i].real_type();
        bool generator = type->kind() == c10::TypeKind::GeneratorType ||
                         (type->kind() == c10::TypeKind::OptionalType &&
                          type->containedType(0)->kind() == c10::TypeKind::GeneratorType);
        if (generator) {
            std::optional<at::Generator> gen;
            if (arg.isGenerator())
                gen = arg.toGenerator();
            arg = cpu_engine(gen, dev.index());
            continue;
        }
        arg = map_tensors(arg, [&](const at::Tensor &t) {
            if (!is_rill(t))
                return t;
            at::Tensor view = views.view(t);
            inputs.emplace_back(t, view);
            return view;
        });
    }
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
    const size_t num_returns = schema.returns().size();
    for (size_t i = stack->size() - num_returns; i < stack->size(); i++)
        (*stack)[i] = map_tensors(
            (*stack)[i], [&](const at::Tensor &t) { return to_rill(t, views, dev, inputs); });
    // In-place and out= arguments the kernel resized but did not return.
    for (const auto &[rill_tensor, view] : inputs)
        if (!rill_tensor.sizes().equals(view.sizes()))
            to_rill(view, views, dev, inputs);
}

void fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
    const size_t num_args = op.schema().arguments().size();
    c10::Device dev = device_of(op, torch::jit::last(*stack, num_args));
    TORCH_CHECK_NOT_IMPLEMENTED(
        op.hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
            op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd),
        "The operator '", op.schema().operator_name(),
        "' is not implemented for the rill "
        "device: rill has no kernel of its own for it, and PyTorch has no CPU kernel to run "
        "in its place");
    const c10::DeviceGuard guard(dev);
    if (is_cpu_device(dev.index()))
        host_fallback(op, stack, dev);
    else
        at::native::cpu_fallback(op, stack);
}

} // namespace

void boxed_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
    fallback(op, stack);
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
    m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

} // namespace torch_rill
