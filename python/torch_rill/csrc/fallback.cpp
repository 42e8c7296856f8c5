// SPDX-License-Identifier: MIT
// Every op rill has no kernel of its own for runs PyTorch's CPU kernel. On a
// device the host reads (rill's CPU devices) it runs on host views of the
// same memory, with no copy, as one host function queued on the current
// stream: at submit the op's meta kernel gives its outputs' sizes, strides
// and dtypes, the outputs are allocated on the stream and out= arguments
// resized as the meta kernel did; the host function runs the CPU kernel and
// writes new results into the outputs. An argument the meta kernel refuses
// makes the op run at once, so that the CPU kernel raises in its own words;
// errors that only the CPU kernel finds fail the stream, naming the op.
// Views run at once (they read no data). Ops that must synchronize (an
// output shape that depends on the data, a value for the host, random
// numbers drawn in submit order, no meta kernel) run at once after the
// current stream's work, and refuse a capture. On other devices PyTorch's
// own copying fallback runs them, its results on the op's device, and a
// written argument that overlaps another is refused as PyTorch's kernels
// refuse it (copies would not share memory). Random ops draw from the rill
// device's generator on every device.
#include <Python.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/native/CPUFallback.h>
#include <c10/core/DeviceGuard.h>
#include <pybind11/pybind11.h>
#include <torch/library.h>

#include "capture.h"
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

// Calls fn on every tensor of an argument or result (map_tensors without
// building a new value).
template <typename Fn> void for_each_tensor(const c10::IValue &value, Fn &&fn) {
    if (value.isTensor()) {
        fn(value.toTensor());
    } else if (value.isTensorList()) {
        for (const at::Tensor &t : value.toTensorList())
            fn(t);
    } else if (value.isOptionalTensorList()) {
        for (const std::optional<at::Tensor> &t : value.toOptionalTensorList())
            if (t.has_value() && t->defined())
                fn(*t);
    }
}

// Calls fn on the tensors of a and b pairwise (two values of one type, as
// an argument before and after map_tensors).
template <typename Fn> void zip_tensors(const c10::IValue &a, const c10::IValue &b, Fn &&fn) {
    if (a.isTensor() && b.isTensor()) {
        fn(a.toTensor(), b.toTensor());
    } else if (a.isTensorList() && b.isTensorList()) {
        c10::List<at::Tensor> la = a.toTensorList(), lb = b.toTensorList();
        TORCH_CHECK(la.size() == lb.size(), "torch_rill: lists of ", la.size(), " and ", lb.size(),
                    " tensors");
        for (size_t i = 0; i < la.size(); i++)
            fn(la.get(i), lb.get(i));
    } else if (a.isOptionalTensorList() && b.isOptionalTensorList()) {
        auto la = a.toOptionalTensorList(), lb = b.toOptionalTensorList();
        TORCH_CHECK(la.size() == lb.size(), "torch_rill: lists of ", la.size(), " and ", lb.size(),
                    " tensors");
        for (size_t i = 0; i < la.size(); i++) {
            std::optional<at::Tensor> x = la.get(i), y = lb.get(i);
            fn(x.value_or(at::Tensor()), y.value_or(at::Tensor()));
        }
    }
}

bool is_generator(const c10::TypePtr &type) {
    return type->kind() == c10::TypeKind::GeneratorType ||
           (type->kind() == c10::TypeKind::OptionalType &&
            type->containedType(0)->kind() == c10::TypeKind::GeneratorType);
}

// Tensor, Tensor?, Tensor[], Tensor?[].
bool holds_tensors_only(const c10::TypePtr &type) {
    switch (type->kind()) {
    case c10::TypeKind::TensorType:
        return true;
    case c10::TypeKind::OptionalType:
    case c10::TypeKind::ListType:
        return holds_tensors_only(type->containedType(0));
    default:
        return false;
    }
}

// The rill device the op runs on: that of its rill tensors, which must be
// one device, beside CPU tensors of zero dimensions only (as on CUDA).
c10::Device device_of(const c10::OperatorHandle &op, c10::ArrayRef<c10::IValue> args) {
    std::optional<c10::Device> rill_dev, other;
    for (const c10::IValue &arg : args)
        for_each_tensor(arg, [&](const at::Tensor &t) {
            if (!t.defined())
                return;
            if (is_rill(t)) {
                if (!rill_dev)
                    rill_dev = t.device();
                else if (*rill_dev != t.device())
                    other = t.device();
            } else if (!(t.is_cpu() && t.dim() == 0)) {
                other = t.device();
            }
        });
    TORCH_CHECK(rill_dev, op.schema().operator_name(), " reached rill with no rill tensor");
    TORCH_CHECK(!other,
                "Expected all tensors to be on the same device, but found at least two "
                "devices, ",
                *rill_dev, " and ", *other, "! (when checking arguments for ",
                op.schema().operator_name(), ")");
    return *rill_dev;
}

// ---------------------------------------------------------------- at once

// Gives t sizes and strides past its storage offset, its storage grown to
// span them, as a CPU kernel resizes an output (lstsq's solution spans more
// elements than it has).
void resize_strided(const at::Tensor &t, c10::IntArrayRef sizes, c10::IntArrayRef strides) {
    int64_t span = 1;
    for (size_t d = 0; d < sizes.size(); d++)
        span = sizes[d] == 0 || span == 0 ? 0 : span + (sizes[d] - 1) * strides[d];
    int64_t offset = t.storage_offset();
    t.resize_({span});
    t.as_strided_(sizes, strides, offset);
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
                resize_strided(rill_tensor, host.sizes(), host.strides());
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

// A generator argument for a CPU kernel: the CPU generator that draws for
// the rill one given, or for dev's default generator.
c10::IValue engine_arg(const c10::IValue &arg, c10::Device dev) {
    std::optional<at::Generator> gen;
    if (arg.isGenerator())
        gen = arg.toGenerator();
    return cpu_engine(gen, dev.index());
}

// After a kernel wrote through view, a host view of a rill tensor whose
// conjugate and negative bits are conj and neg: an out= kernel may make
// its out a conjugate view of what it computed (linalg_lu_solve with left
// False), which the rill tensor cannot follow (a queued kernel runs after
// the call returned it), so its memory takes the values the view stands for.
void settle_bits(const at::Tensor &view, bool conj, bool neg) {
    if (view.is_conj() == conj && view.is_neg() == neg)
        return;
    at::Tensor raw = view.alias();
    raw._set_conj(false);
    raw._set_neg(false);
    if (view.is_conj() != conj)
        raw.conj_physical_();
    if (view.is_neg() != neg)
        raw.neg_();
}

// Runs the CPU kernel now on host views: for views (which read no data),
// and for the ops that synchronize, once the stream's work has run.
void run_now(const c10::OperatorHandle &op, torch::jit::Stack *stack, c10::Device dev) {
    const auto &schema = op.schema();
    const size_t num_args = schema.arguments().size();
    HostViews views;
    std::vector<std::pair<at::Tensor, at::Tensor>> inputs; // rill tensor, its host view
    for (size_t i = 0; i < num_args; i++) {
        c10::IValue &arg = (*stack)[stack->size() - num_args + i];
        if (is_generator(schema.arguments()[i].real_type())) {
            arg = engine_arg(arg, dev);
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
    for (const auto &[rill_tensor, view] : inputs) {
        // In-place and out= arguments the kernel resized but did not return.
        if (!rill_tensor.sizes().equals(view.sizes()))
            to_rill(view, views, dev, inputs);
        settle_bits(view, rill_tensor.is_conj(), rill_tensor.is_neg());
    }
}

// Every result aliases an argument without writing it, and nothing is
// written: a view, which reads no data.
bool is_view(const c10::FunctionSchema &schema) {
    if (schema.returns().empty())
        return false;
    for (const c10::Argument &r : schema.returns())
        if (!r.alias_info() || r.alias_info()->isWrite())
            return false;
    for (const c10::Argument &a : schema.arguments())
        if (a.alias_info() && a.alias_info()->isWrite())
            return false;
    return true;
}

// ------------------------------------------------------ in stream order

// One op's work on the host, queued as a host function. It holds what it
// reads and writes (host views of rill tensors, which hold their rill
// storages), so that this memory is not handed out again before it ran.
struct HostCommand {
    std::string name; // the op and its device, for errors
    std::function<void()> body;
    bool kept = false;                 // a capture keeps it: each replay runs it again
    std::shared_ptr<HostCommand> self; // not kept: it owns itself until it ran
};

// Runs cmd's body; a failure fails its stream, as a kernel's does.
void run_body(HostCommand *cmd) {
    std::string failure;
    bool failed = true;
    try {
        const at::AutoDispatchBelowADInplaceOrView below;
        cmd->body();
        failed = false;
    } catch (const c10::Error &e) {
        failure = e.what_without_backtrace();
    } catch (const std::exception &e) {
        failure = e.what();
    } catch (...) {
        failure = "an exception that is not a std::exception";
    }
    if (failed) {
        // As CUDA's asynchronous errors, it surfaces at the next
        // synchronization with the stream.
        std::string message = cmd->name + " failed on the host: " + failure;
        rill_host_func_fail(message.c_str());
    }
}

// A kept command: a graph node that each replay runs.
void run_kept(void *user_data) {
    run_body(static_cast<HostCommand *>(user_data));
}

// A command that owns itself: a callback, which rill runs even where the
// stream skips its work after a failure, so that what it holds is freed.
void run_once(rill_stream *, rill_status status, void *user_data) {
    auto *cmd = static_cast<HostCommand *>(user_data);
    if (status == RILL_OK)
        run_body(cmd);
    std::shared_ptr<HostCommand> last = std::move(cmd->self); // frees what it held
}

// Makes a capturing stream refuse a call, which invalidates the capture
// (its end then fails): the capture does not go on without the op that
// raised.
void invalidate_capture(rill_stream *stream) {
    (void)rill_stream_query(stream);
}

// Before a queued op allocates its outputs: on a capturing stream that no
// torch capture keeps for, the op fails naming itself (its outputs could
// not outlive the graph either) and the capture is invalidated.
void check_capture(c10::DeviceIndex index, const std::string &name) {
    rill_stream *stream = rill_current_stream(device(index));
    TORCH_CHECK(stream, rill_last_error());
    try {
        check_capture_keeps(stream, index, name.c_str());
    } catch (...) {
        invalidate_capture(stream);
        throw;
    }
}

// Queues body as a host function on rill:index's current stream; a capture
// of it keeps the command for its replays.
void queue_command(c10::DeviceIndex index, std::string name, std::function<void()> body) {
    rill_stream *stream = rill_current_stream(device(index));
    TORCH_CHECK(stream, rill_last_error());
    auto cmd = std::make_shared<HostCommand>();
    cmd->name = std::move(name);
    cmd->body = std::move(body);
    try {
        cmd->kept = keep_for_capture(stream, index, cmd, cmd->name.c_str());
    } catch (...) {
        invalidate_capture(stream);
        throw;
    }
    HostCommand *raw = cmd.get();
    if (raw->kept) {
        check(rill_launch_host_func(stream, &run_kept, raw), "rill_launch_host_func");
        return;
    }
    raw->self = std::move(cmd);
    rill_status status = rill_stream_add_callback(stream, &run_once, raw);
    if (status != RILL_OK) {
        std::shared_ptr<HostCommand> unused = std::move(raw->self);
        check(status, "rill_stream_add_callback");
    }
}

// Meta tensors of a call's rill tensors, one meta storage per rill storage,
// so that the meta kernel sees the overlaps the CPU kernel would. CPU
// scalars stay as they are.
class MetaTwins {
  public:
    at::Tensor of(const at::Tensor &t) {
        if (!t.defined())
            return t;
        if (!is_rill(t)) // a CPU scalar, which meta kernels take as CUDA kernels do
            return t;
        auto same = twins_.find(t.unsafeGetTensorImpl());
        if (same != twins_.end()) // a tensor passed twice (x.logical_and_(y): self and out)
            return same->second;
        c10::StorageImpl *impl = t.storage().unsafeGetStorageImpl();
        auto found = storages_.find(impl);
        if (found == storages_.end()) {
            at::Tensor bytes = at::empty({static_cast<int64_t>(impl->nbytes())},
                                         at::TensorOptions().dtype(at::kByte).device(c10::kMeta));
            found = storages_.emplace(impl, bytes.storage()).first;
        }
        at::Tensor m = at::empty({0}, t.options().device(c10::kMeta));
        m.set_(found->second, t.storage_offset(), t.sizes(), t.strides());
        twins_.emplace(t.unsafeGetTensorImpl(), m);
        return m;
    }

  private:
    std::unordered_map<c10::StorageImpl *, c10::Storage> storages_;
    std::unordered_map<const c10::TensorImpl *, at::Tensor> twins_;
};

// A CPU scalar as read at submit (as CUDA reads it), still a wrapped
// number where it was one (which type promotion tells apart).
at::Tensor scalar_copy(const at::Tensor &t) {
    at::Tensor copy = t.clone();
    copy.unsafeGetTensorImpl()->set_wrapped_number(t.unsafeGetTensorImpl()->is_wrapped_number());
    return copy;
}

// A rill device argument stands for the CPU (or meta) on the host.
c10::IValue device_arg(const c10::IValue &arg, c10::DeviceType to) {
    if (arg.isDevice() && arg.toDevice().type() == kDeviceType)
        return c10::Device(to);
    return arg;
}

// Runs the meta kernel on stack; false when it cannot tell the outputs
// (their shape depends on the data, or it is not implemented for these
// arguments). Other errors are the op's own, and propagate.
bool run_meta(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
    const bool data_shape = op.hasTag(at::Tag::dynamic_output_shape);
    try {
        op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
        return true;
    } catch (const c10::NotImplementedError &) {
        return false;
    } catch (pybind11::error_already_set &e) {
        // A meta kernel written in Python.
        bool unknown = data_shape;
        if (!unknown) {
            const pybind11::gil_scoped_acquire gil;
            unknown = e.matches(PyExc_NotImplementedError);
        }
        if (unknown)
            return false;
        throw;
    } catch (const std::exception &) {
        if (data_shape)
            return false;
        throw;
    }
}

// A dimension argument out of range raises at submit with the CPU kernel's
// message, where some meta kernels let it through.
void check_dims(const c10::FunctionSchema &schema, c10::ArrayRef<c10::IValue> args) {
    if (args.empty() || schema.arguments()[0].name() != "self" || !args[0].isTensor() ||
        !args[0].toTensor().defined())
        return;
    const int64_t dims = args[0].toTensor().dim();
    for (size_t i = 1; i < args.size(); i++)
        if (schema.arguments()[i].name() == "dim" && args[i].isInt())
            at::maybe_wrap_dim(args[i].toInt(), dims);
}

// A written argument with elements that share memory, or that partly
// overlaps another argument: the CPU kernel's own checks decide (they
// refuse most such calls), running at once.
void rill_arguments(const c10::FunctionSchema &schema, c10::ArrayRef<c10::IValue> args,
                    std::vector<at::Tensor> &written, std::vector<at::Tensor> &all) {
    for (size_t i = 0; i < args.size(); i++) {
        const c10::AliasInfo *info = schema.arguments()[i].alias_info();
        const bool writes = info && info->isWrite();
        for_each_tensor(args[i], [&](const at::Tensor &t) {
            if (is_rill(t)) {
                all.push_back(t);
                if (writes)
                    written.push_back(t);
            }
        });
    }
}

bool overlaps(const c10::FunctionSchema &schema, c10::ArrayRef<c10::IValue> args) {
    std::vector<at::Tensor> written, all;
    rill_arguments(schema, args, written, all);
    for (const at::Tensor &w : written) {
        if (at::has_internal_overlap(w) == at::MemOverlap::Yes)
            return true;
        for (const at::Tensor &t : all)
            if (at::get_overlap_status(w, t) == at::MemOverlapStatus::Partial)
                return true;
    }
    return false;
}

// PyTorch's errors for a written argument with elements that share memory
// or that partly overlaps another: copies of the arguments (a device the
// host cannot read) would lose how they share memory, so such calls are
// refused as PyTorch's kernels refuse most of them.
void refuse_overlaps(const c10::FunctionSchema &schema, c10::ArrayRef<c10::IValue> args) {
    std::vector<at::Tensor> written, all;
    rill_arguments(schema, args, written, all);
    for (const at::Tensor &w : written) {
        at::assert_no_internal_overlap(w);
        for (const at::Tensor &t : all)
            at::assert_no_partial_overlap(w, t);
    }
}

// The argument whose alias set return r writes (in-place, out=), or -1.
int written_argument(const c10::FunctionSchema &schema, size_t r) {
    const c10::AliasInfo *info = schema.returns()[r].alias_info();
    if (!info || !info->isWrite())
        return -1;
    for (size_t i = 0; i < schema.arguments().size(); i++) {
        const c10::AliasInfo *a = schema.arguments()[i].alias_info();
        if (a && a->isWrite() && a->beforeSets() == info->beforeSets())
            return static_cast<int>(i);
    }
    return -1;
}

// Why an op must run at once, after the stream's work; nullptr when it may
// be queued.
const char *must_synchronize(const c10::OperatorHandle &op) {
    const auto &schema = op.schema();
    for (const c10::Argument &a : schema.arguments())
        if (is_generator(a.real_type()))
            return "it draws random numbers, which happens in submit order (as on CUDA)";
    if (op.hasTag(at::Tag::nondeterministic_seeded))
        return "it draws random numbers, which happens in submit order (as on CUDA)";
    for (const c10::Argument &r : schema.returns())
        if (!holds_tensors_only(r.real_type()))
            return "it returns a value to the host";
    if (!op.hasComputedKernelForDispatchKey(c10::DispatchKey::Meta))
        return "it has no meta kernel to tell its outputs' shapes before it runs";
    for (size_t r = 0; r < schema.returns().size(); r++)
        if (schema.returns()[r].alias_info() && written_argument(schema, r) < 0)
            return "its results are views of its inputs beside data it computes";
    return nullptr;
}

// What the meta kernel told of a call: its results and its arguments after
// it ran (out= arguments resized), as meta tensors.
struct MetaRun {
    std::vector<c10::IValue> results;
    std::vector<c10::IValue> args;
    // For an op of several results, whether the CPU kernel's first run gave
    // the results the meta kernel says (embedding_bag's meta kernel gives
    // some of them other shapes): kUnchecked until that run.
    enum Trust { kUnchecked, kAgrees, kDiffers };
    bool cached = false;
    mutable std::atomic<int> trust{kUnchecked};
};

// The storages and tensors a key has seen, in order.
struct KeySeen {
    std::vector<const c10::StorageImpl *> storages;
    std::vector<const c10::TensorImpl *> tensors;
};

// The index of x in seen, added at the end if new.
template <typename T> size_t index_in(std::vector<const T *> &seen, const T *x) {
    size_t index = std::find(seen.begin(), seen.end(), x) - seen.begin();
    if (index == seen.size())
        seen.push_back(x);
    return index;
}

// Appends what a meta kernel sees of value to key: a tensor's dtype, sizes,
// strides, offset, which earlier tensor shares its storage and whether it
// is an earlier tensor itself (a CPU scalar's value), other values in full.
// False for a kind of value it does not cover.
bool append_key(std::string &key, const c10::IValue &value, KeySeen &seen) {
    auto put = [&key](const auto &x) { key.append(reinterpret_cast<const char *>(&x), sizeof x); };
    auto put_ints = [&](c10::IntArrayRef xs) {
        put(xs.size());
        key.append(reinterpret_cast<const char *>(xs.data()), xs.size() * sizeof(int64_t));
    };
    if (value.isNone()) {
        key += 'N';
    } else if (value.isTensor()) {
        const at::Tensor &t = value.toTensor();
        key += 'T';
        put(t.defined());
        if (!t.defined())
            return true;
        put(t.scalar_type());
        put(is_rill(t));
        if (!is_rill(t)) { // a CPU scalar: the meta kernel may read it
            put(t.unsafeGetTensorImpl()->is_wrapped_number());
            key.append(static_cast<const char *>(t.const_data_ptr()), t.dtype().itemsize());
            return true;
        }
        put_ints(t.sizes());
        put_ints(t.strides());
        put(t.storage_offset());
        const c10::StorageImpl *impl = t.storage().unsafeGetStorageImpl();
        put(index_in(seen.storages, impl));
        put(index_in(seen.tensors, static_cast<const c10::TensorImpl *>(t.unsafeGetTensorImpl())));
        put(impl->nbytes());
    } else if (value.isTensorList() || value.isOptionalTensorList()) {
        key += 'L';
        bool ok = true;
        size_t n = 0;
        for_each_tensor(value, [&](const at::Tensor &t) {
            ok = ok && append_key(key, t, seen);
            n++;
        });
        put(n);
        if (value.isOptionalTensorList())
            for (const std::optional<at::Tensor> &t : value.toOptionalTensorList())
                put(t.has_value() && t->defined());
        return ok;
    } else if (value.isBool()) {
        key += 'b';
        put(value.toBool());
    } else if (value.isInt()) {
        key += 'i';
        put(value.toInt());
    } else if (value.isDouble()) {
        key += 'd';
        put(value.toDouble());
    } else if (value.isComplexDouble()) {
        key += 'c';
        put(value.toComplexDouble());
    } else if (value.isSymInt() && !value.toSymInt().is_symbolic()) {
        key += 'i';
        put(value.toSymInt().as_int_unchecked());
    } else if (value.isString()) {
        key += 's';
        put(value.toStringRef().size());
        key += value.toStringRef();
    } else if (value.isDevice()) {
        key += 'D';
        put(value.toDevice().type());
        put(value.toDevice().index());
    } else if (value.isIntList()) {
        key += 'I';
        put_ints(value.toIntVector());
    } else if (value.isDoubleList()) {
        key += 'F';
        for (double x : value.toDoubleVector())
            put(x);
        put(value.toDoubleVector().size());
    } else if (value.isBoolList()) {
        key += 'B';
        for (bool x : value.toBoolList())
            put(x);
        put(value.toBoolList().size());
    } else {
        return false;
    }
    return true;
}

// Meta runs by call, for calls repeated with arguments of the same shapes
// (a training loop's): many meta kernels are Python and cost far more than
// the op's submit.
class MetaCache {
  public:
    static constexpr size_t kMaxEntries = 4096;

    std::shared_ptr<const MetaRun> find(const std::string &key) {
        std::lock_guard<std::mutex> guard(lock_);
        auto found = runs_.find(key);
        return found == runs_.end() ? nullptr : found->second;
    }

    void add(std::string key, std::shared_ptr<const MetaRun> run) {
        std::lock_guard<std::mutex> guard(lock_);
        if (runs_.size() >= kMaxEntries)
            runs_.clear();
        runs_.emplace(std::move(key), std::move(run));
    }

  private:
    std::mutex lock_;
    std::unordered_map<std::string, std::shared_ptr<const MetaRun>> runs_;
};

MetaCache meta_cache;

// The meta run of the call on top of stack: from the cache, or the meta
// kernel's (nullptr when the meta kernel cannot tell, see run_meta).
std::shared_ptr<const MetaRun> meta_run(const c10::OperatorHandle &op,
                                        const torch::jit::Stack &stack) {
    const size_t num_args = op.schema().arguments().size();
    const size_t base = stack.size() - num_args;
    std::string key;
    key.reserve(256);
    const void *id = &op.schema();
    key.append(reinterpret_cast<const char *>(&id), sizeof id);
    KeySeen seen;
    bool cacheable = true;
    for (size_t i = 0; i < num_args && cacheable; i++)
        cacheable = append_key(key, stack[base + i], seen);
    if (cacheable)
        if (auto hit = meta_cache.find(key))
            return hit;
    MetaTwins twins;
    torch::jit::Stack meta;
    meta.reserve(num_args);
    for (size_t i = 0; i < num_args; i++)
        meta.push_back(map_tensors(device_arg(stack[base + i], c10::kMeta),
                                   [&](const at::Tensor &t) { return twins.of(t); }));
    auto run = std::make_shared<MetaRun>();
    run->args = meta; // the same tensors: as the kernel resized them
    if (!run_meta(op, &meta))
        return nullptr;
    run->results = std::move(meta);
    run->cached = cacheable;
    if (cacheable)
        meta_cache.add(std::move(key), run);
    return run;
}

constexpr const char *kDataShape = "its outputs' shapes depend on the data";

// Whether the op is a matrix product of rill tensors of several dtypes, or
// of bool (torch.mm(x, ids), the most frequent error of PyTorch users): the
// CPU kernels refuse these and the meta kernels let them through, so the
// op runs at once and its error reaches the caller.
bool product_of_refused_dtypes(const c10::FunctionSchema &schema, c10::ArrayRef<c10::IValue> args) {
    std::optional<at::ScalarType> dtype;
    bool refused = false;
    for (const c10::IValue &arg : args)
        for_each_tensor(arg, [&](const at::Tensor &t) {
            if (!t.defined() || !is_rill(t))
                return;
            refused =
                refused || t.scalar_type() == at::kBool || (dtype && *dtype != t.scalar_type());
            dtype = t.scalar_type();
        });
    if (!refused)
        return false;
    static const std::set<std::string> products = {
        "aten::mm",       "aten::addmm",  "aten::addmm_",  "aten::bmm", "aten::baddbmm",
        "aten::baddbmm_", "aten::addbmm", "aten::addbmm_", "aten::dot", "aten::vdot",
        "aten::mv",       "aten::addmv",  "aten::addmv_"};
    return products.count(schema.name()) != 0;
}

// A written argument to which the meta kernel (its arguments after it ran:
// meta_args) gave other sizes while its memory is also an argument read
// (same_tensor: while it is itself an argument read), and its meta twin;
// nullopt when there is none.
std::optional<std::pair<at::Tensor, at::Tensor>>
resized_read_output(const c10::FunctionSchema &schema, c10::ArrayRef<c10::IValue> args,
                    const std::vector<c10::IValue> &meta_args, bool same_tensor) {
    std::vector<const void *> read; // storages, or tensors
    for (size_t i = 0; i < args.size(); i++) {
        const c10::AliasInfo *info = schema.arguments()[i].alias_info();
        if (!info || !info->isWrite())
            for_each_tensor(args[i], [&](const at::Tensor &t) {
                if (t.defined() && is_rill(t))
                    read.push_back(same_tensor ? static_cast<const void *>(t.unsafeGetTensorImpl())
                                               : t.storage().unsafeGetStorageImpl());
            });
    }
    std::optional<std::pair<at::Tensor, at::Tensor>> found;
    for (size_t i = 0; i < args.size(); i++) {
        const c10::AliasInfo *info = schema.arguments()[i].alias_info();
        if (info && info->isWrite())
            zip_tensors(args[i], meta_args[i], [&](const at::Tensor &t, const at::Tensor &m) {
                if (found || !t.defined() || !m.defined() || t.sizes().equals(m.sizes()))
                    return;
                const void *key = same_tensor ? static_cast<const void *>(t.unsafeGetTensorImpl())
                                              : t.storage().unsafeGetStorageImpl();
                if (std::find(read.begin(), read.end(), key) != read.end())
                    found.emplace(t, m);
            });
    }
    return found;
}

// TensorIterator's error for an output that is also an input and that the
// meta kernel resizes (x.logical_and_(y) with a larger y), on a device the
// host cannot read: PyTorch's copying fallback gives the CPU kernel two
// copies of x, one of which it would resize. (On a CPU device the op runs
// at once on one host view of x, and the CPU kernel raises; see queue_op.)
void refuse_resizing_an_input(const c10::OperatorHandle &op, const torch::jit::Stack &stack) {
    if (must_synchronize(op)) // random ops, values for the host: no meta run
        return;
    const size_t num_args = op.schema().arguments().size();
    std::shared_ptr<const MetaRun> run;
    try {
        run = meta_run(op, stack);
    } catch (...) { // the CPU kernel raises it in its own words
        return;
    }
    if (!run)
        return;
    auto found =
        resized_read_output(op.schema(), torch::jit::last(stack, num_args), run->args, true);
    TORCH_CHECK(!found, "output with shape ", found->first.sizes(),
                " doesn't match the broadcast shape ", found->second.sizes());
}

// Queues the op (see the file's comment); false, with the stack as it was
// and why set, when it must run at once after all. *check is set to the
// meta run that the run at once is to confirm or refute.
bool queue_op(const c10::OperatorHandle &op, torch::jit::Stack *stack, c10::Device dev,
              const char *&why, std::shared_ptr<const MetaRun> *check) {
    const auto &schema = op.schema();
    const size_t num_args = schema.arguments().size();
    const size_t num_returns = schema.returns().size();
    const size_t base = stack->size() - num_args;

    check_dims(schema, torch::jit::last(*stack, num_args));
    if (overlaps(schema, torch::jit::last(*stack, num_args))) {
        why = "a written argument overlaps an argument";
        return false;
    }
    if (product_of_refused_dtypes(schema, torch::jit::last(*stack, num_args))) {
        why = "the CPU kernel of this matrix product refuses its dtypes";
        return false;
    }
    // An input with no elements: CPU kernels check empty tensors where
    // meta kernels may not (max() of one), so outside a capture it runs at
    // once, and such an error reaches the caller, not the stream.
    bool empty = false;
    for (size_t i = 0; i < num_args; i++) {
        const c10::AliasInfo *info = schema.arguments()[i].alias_info();
        if (!info || !info->isWrite())
            for_each_tensor((*stack)[base + i], [&](const at::Tensor &t) {
                empty = empty || (t.defined() && t.numel() == 0);
            });
    }
    if (empty && !is_capturing(rill_current_stream(device(dev.index())))) {
        why = "an input has no elements";
        return false;
    }
    std::shared_ptr<const MetaRun> run;
    try {
        run = meta_run(op, *stack);
    } catch (...) {
        // The CPU kernel raises it in its own words (meta kernels may word
        // it otherwise), running at once; a capture cannot wait for that,
        // and gets the meta kernel's error.
        rill_stream *stream = rill_current_stream(device(dev.index()));
        if (stream && is_capturing(stream))
            throw;
        why = "its meta kernel raised an error, which the CPU kernel words";
        return false;
    }
    if (!run) {
        why = kDataShape;
        return false;
    }
    const std::vector<c10::IValue> &meta = run->results;
    const std::vector<c10::IValue> &meta_args = run->args;
    TORCH_CHECK(meta.size() == num_returns, schema.operator_name(), ": its meta kernel left ",
                meta.size(), " values for ", num_returns, " results");
    bool dense = true;
    for (size_t r = 0; r < num_returns; r++)
        if (written_argument(schema, r) < 0)
            for_each_tensor(meta[r], [&](const at::Tensor &m) {
                dense = dense && (!m.defined() || m.is_non_overlapping_and_dense());
            });
    if (!dense) {
        why = "its meta kernel gives a result whose elements overlap";
        return false;
    }
    if (run->cached && num_returns > 1) {
        int trust = run->trust.load(std::memory_order_acquire);
        if (trust == MetaRun::kDiffers) {
            why = "its CPU kernel gives results of other shapes than its meta kernel says";
            return false;
        }
        if (trust == MetaRun::kUnchecked &&
            !is_capturing(rill_current_stream(device(dev.index())))) {
            why = "its first run checks its meta kernel";
            *check = run;
            return false;
        }
    }
    if (resized_read_output(schema, torch::jit::last(*stack, num_args), meta_args, false)) {
        // x.logical_and_(y) with a larger y: PyTorch's meta kernels resize
        // out, where the CPU kernel refuses an out that is also an input.
        why = "its meta kernel resizes an output whose memory it reads";
        return false;
    }

    std::string name = c10::toString(schema.operator_name()) + " on " + dev.str();
    check_capture(dev.index(), name);
    // Nothing refuses it now: resize out= arguments as the meta kernel did,
    // and allocate the new results on the current stream.
    for (size_t i = 0; i < num_args; i++) {
        const c10::AliasInfo *info = schema.arguments()[i].alias_info();
        if (!info || !info->isWrite())
            continue;
        zip_tensors((*stack)[base + i], meta_args[i], [](const at::Tensor &t, const at::Tensor &m) {
            if (!t.defined() || !m.defined() ||
                (t.sizes().equals(m.sizes()) && t.strides().equals(m.strides())))
                return;
            resize_strided(t, m.sizes(), m.strides());
        });
    }
    std::vector<c10::IValue> results(num_returns);
    for (size_t r = 0; r < num_returns; r++) {
        int arg = written_argument(schema, r);
        results[r] =
            arg >= 0 ? (*stack)[base + arg] : map_tensors(meta[r], [&](const at::Tensor &m) {
                if (!m.defined())
                    return m;
                return at::empty_strided(m.sizes(), m.strides(), m.options().device(dev));
            });
    }

    // What the host function reads and writes: host views of the rill
    // tensors, copies of the CPU scalars (read at submit, as CUDA does).
    HostViews views;
    std::vector<c10::IValue> args(num_args);
    struct Written {
        at::Tensor view;
        std::vector<int64_t> sizes;
        const void *data;
        void *first;                  // its first element in the rill memory
        std::vector<int64_t> strides; // there, whatever the kernel resizes
        bool conj, neg;               // its bits, whatever the kernel sets
    };
    std::vector<Written> written; // in-place and out= arguments, as the kernel gets them
    for (size_t i = 0; i < num_args; i++) {
        const c10::AliasInfo *info = schema.arguments()[i].alias_info();
        const bool writes = info && info->isWrite();
        args[i] = map_tensors(device_arg((*stack)[base + i], c10::kCPU), [&](const at::Tensor &t) {
            if (!t.defined())
                return t;
            if (!is_rill(t))
                return scalar_copy(t);
            at::Tensor view = views.view(t);
            if (writes)
                written.push_back({view, view.sizes().vec(), view.storage().data(), view.data_ptr(),
                                   view.strides().vec(), view.is_conj(), view.is_neg()});
            return view;
        });
    }
    std::vector<c10::IValue> targets(num_returns); // host views of the new results
    for (size_t r = 0; r < num_returns; r++)
        if (written_argument(schema, r) < 0)
            targets[r] = map_tensors(
                results[r], [&](const at::Tensor &t) { return t.defined() ? views.view(t) : t; });

    torch::jit::drop(*stack, num_args);
    for (c10::IValue &r : results)
        stack->push_back(std::move(r));

    queue_command(dev.index(), std::move(name), [op, args, targets, written] {
        torch::jit::Stack run(args.begin(), args.end());
        op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &run);
        for (size_t r = 0; r < targets.size(); r++)
            zip_tensors(targets[r], run[r], [](const at::Tensor &dst, const at::Tensor &src) {
                if (!dst.defined())
                    return;
                TORCH_CHECK(src.defined() && src.sizes().equals(dst.sizes()) &&
                                src.scalar_type() == dst.scalar_type(),
                            "its CPU kernel returned a result of another shape or dtype than its "
                            "meta kernel said (",
                            dst.sizes(), ", ", dst.scalar_type(), ")");
                if (src.data_ptr() != dst.data_ptr())
                    dst.copy_(src);
            });
        for (const Written &w : written) {
            TORCH_CHECK(w.view.sizes().equals(w.sizes),
                        "its CPU kernel resized an output that its meta kernel did not");
            // A kernel that resizes an output and back (mse_loss.out resizes
            // a [] out to its inputs' shape first) moved it to fresh CPU
            // memory: its values go back to the rill memory.
            if (w.view.storage().data() != w.data)
                at::from_blob(w.first, w.sizes, w.strides, w.view.options()).copy_(w.view);
            settle_bits(w.view, w.conj, w.neg);
        }
    });
    return true;
}

// Refuses a quantized dtype asked for (quantize_per_tensor's): rill has no
// quantized tensors, and the meta kernel says float where the CPU kernel
// makes a quantized tensor.
void refuse_quantized(const c10::FunctionSchema &schema, c10::ArrayRef<c10::IValue> args,
                      c10::Device dev) {
    for (size_t i = 0; i < args.size(); i++) {
        if (!args[i].isInt())
            continue;
        const c10::Type *type = schema.arguments()[i].real_type().get();
        if (auto opt = type->castRaw<c10::OptionalType>())
            type = opt->getElementType().get();
        auto dtype = static_cast<c10::ScalarType>(args[i].toInt());
        TORCH_CHECK_NOT_IMPLEMENTED(
            type->kind() != c10::TypeKind::ScalarTypeType || !c10::isQIntType(dtype),
            schema.operator_name(), " on ", dev.str(), ": rill has no quantized tensors (", dtype,
            "); quantize on the CPU");
    }
}

// Advanced indexing (index, index_put_) takes index tensors on the CPU for
// a tensor of a device, as on CUDA: they move to that device, as
// PyTorch's indexing moves them, before the op is checked and queued (so
// a later change of the CPU tensor does not reach the queued op).
void move_cpu_indices(const c10::FunctionSchema &schema, torch::jit::Stack *stack) {
    const size_t num_args = schema.arguments().size();
    const size_t base = stack->size() - num_args;
    if (num_args < 2 || !(*stack)[base].isTensor() || !is_rill((*stack)[base].toTensor()))
        return;
    c10::Device dev = (*stack)[base].toTensor().device();
    for (size_t i = 1; i < num_args; i++) {
        const c10::Argument &arg = schema.arguments()[i];
        if (arg.name() != "indices" || arg.real_type()->kind() != c10::TypeKind::ListType)
            continue;
        (*stack)[base + i] = map_tensors((*stack)[base + i], [&](const at::Tensor &t) {
            return t.defined() && t.is_cpu() ? t.to(dev) : t;
        });
    }
}

void fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
    const auto &schema = op.schema();
    const size_t num_args = schema.arguments().size();
    move_cpu_indices(schema, stack);
    c10::Device dev = device_of(op, torch::jit::last(*stack, num_args));
    refuse_quantized(schema, torch::jit::last(*stack, num_args), dev);
    TORCH_CHECK_NOT_IMPLEMENTED(
        op.hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
            op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd),
        "The operator '", schema.operator_name(),
        "' is not implemented for the rill "
        "device: rill has no kernel of its own for it, and PyTorch has no CPU kernel to run "
        "in its place");
    const c10::DeviceGuard guard(dev);
    if (!is_cpu_device(dev.index())) {
        if (const char *why = must_synchronize(op))
            refuse_capture(dev, c10::toString(schema.operator_name()), why);
        refuse_overlaps(schema, torch::jit::last(*stack, num_args));
        refuse_resizing_an_input(op, *stack);
        for (size_t i = 0; i < num_args; i++)
            if (is_generator(schema.arguments()[i].real_type())) {
                c10::IValue &arg = (*stack)[stack->size() - num_args + i];
                arg = engine_arg(arg, dev);
            }
        at::native::cpu_fallback(op, stack);
        // It leaves a result on the CPU where a CPU scalar came first ("c + x").
        const size_t num_returns = schema.returns().size();
        for (size_t i = stack->size() - num_returns; i < stack->size(); i++)
            (*stack)[i] = map_tensors((*stack)[i], [&](const at::Tensor &t) {
                return t.defined() && t.device().is_cpu() ? t.to(dev) : t;
            });
        return;
    }
    if (is_view(schema)) {
        run_now(op, stack, dev);
        return;
    }
    const char *why = must_synchronize(op);
    std::shared_ptr<const MetaRun> check;
    if (!why && queue_op(op, stack, dev, why, &check))
        return;
    refuse_capture(dev, c10::toString(schema.operator_name()), why);
    host_ready(dev.index());
    run_now(op, stack, dev);
    if (check) {
        // Whether the CPU kernel gave what the meta kernel said: later calls
        // of these shapes are queued if so, else they run at once.
        const size_t num_returns = schema.returns().size();
        bool agrees = true;
        try {
            for (size_t r = 0; r < num_returns; r++)
                if (written_argument(schema, r) < 0)
                    zip_tensors((*stack)[stack->size() - num_returns + r], check->results[r],
                                [&](const at::Tensor &got, const at::Tensor &said) {
                                    agrees = agrees && got.defined() == said.defined() &&
                                             (!got.defined() ||
                                              (got.sizes().equals(said.sizes()) &&
                                               got.scalar_type() == said.scalar_type()));
                                });
        } catch (const c10::Error &) { // lists of other lengths
            agrees = false;
        }
        check->trust.store(agrees ? MetaRun::kAgrees : MetaRun::kDiffers,
                           std::memory_order_release);
    }
}

} // namespace

void boxed_fallback(const c10::OperatorHandle &op, torch::jit::Stack *stack) {
    fallback(op, stack);
}

std::vector<at::Tensor> queue_on_host(const std::string &name, c10::Device dev,
                                      const std::vector<at::Tensor> &inputs, HostKernel kernel) {
    MetaTwins twins;
    std::vector<at::Tensor> meta;
    meta.reserve(inputs.size());
    for (const at::Tensor &t : inputs)
        meta.push_back(twins.of(t));
    std::vector<at::Tensor> shapes = kernel(meta);
    check_capture(dev.index(), name + " on " + dev.str());
    std::vector<at::Tensor> outputs, targets;
    HostViews views;
    for (const at::Tensor &m : shapes) {
        at::Tensor out =
            m.defined() ? at::empty_strided(m.sizes(), m.strides(), m.options().device(dev)) : m;
        outputs.push_back(out);
        targets.push_back(out.defined() ? views.view(out) : out);
    }
    std::vector<at::Tensor> host;
    host.reserve(inputs.size());
    for (const at::Tensor &t : inputs)
        host.push_back(!t.defined() ? t : is_rill(t) ? views.view(t) : scalar_copy(t));
    queue_command(dev.index(), name + " on " + dev.str(),
                  [kernel = std::move(kernel), host = std::move(host), targets] {
                      std::vector<at::Tensor> got = kernel(host);
                      TORCH_CHECK(got.size() == targets.size(), "its CPU kernel returned ",
                                  got.size(), " results for ", targets.size());
                      for (size_t i = 0; i < got.size(); i++) {
                          if (!targets[i].defined())
                              continue;
                          TORCH_CHECK(got[i].defined() &&
                                          got[i].sizes().equals(targets[i].sizes()) &&
                                          got[i].scalar_type() == targets[i].scalar_type(),
                                      "its CPU kernel returned a result of another shape or "
                                      "dtype than its meta run said (",
                                      targets[i].sizes(), ", ", targets[i].scalar_type(), ")");
                          targets[i].copy_(got[i]);
                      }
                  });
    return outputs;
}

void refuse_capture(c10::Device dev, const std::string &op, const char *why) {
    rill_stream *stream = rill_current_stream(device(dev.index()));
    TORCH_CHECK(stream, rill_last_error());
    if (!is_capturing(stream))
        return;
    invalidate_capture(stream);
    TORCH_CHECK(false, op, " cannot be captured: ", why,
                ", so it waits for the work queued on the current stream of ", dev, " (stream id ",
                wrap(stream).id(),
                "), which is capturing. The capture is invalidated (ending it raises); "
                "run ",
                op, " before or after the capture");
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
    m.fallback(torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

// PyTorch's kernels of mse_loss and smooth_l1_loss for devices without
// their own call the out= overload with a [] out, which the CPU kernel
// resizes to the inputs' shape first, warning (as it does on the CPU); the
// functional CPU kernels do not.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("mse_loss", torch::CppFunction::makeFromBoxedFunction<&fallback>());
    m.impl("smooth_l1_loss", torch::CppFunction::makeFromBoxedFunction<&fallback>());
    // These have a CPU kernel and, for other devices, a decomposition into
    // element-wise ops that rounds each step to the dtype (addr's
    // beta*self + alpha*outer; group norm's mean and variance in float16
    // 0.0078 off the CPU's); the CPU kernels round once, as CUDA's do.
    for (const char *name : {"addr", "addr.out", "native_group_norm"})
        m.impl(name, torch::CppFunction::makeFromBoxedFunction<&fallback>());
    // Its kernel for every device calls a CPU and CUDA dispatch stub, which
    // raises an internal assert on any other device.
    m.impl("conj_physical_", torch::CppFunction::makeFromBoxedFunction<&fallback>());
}

} // namespace torch_rill
