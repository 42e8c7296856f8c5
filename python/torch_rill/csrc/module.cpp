// SPDX-License-Identifier: MIT
// torch_rill._C: what torch.rill calls that PyTorch's generic API does not
// offer (rill's own stream handles, the with block of a stream, device
// names, generators, blocking and interprocess events, pinned memory's
// figures).
#include <torch/csrc/Event.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/extension.h>

#include "capture.h"
#ifdef TORCH_RILL_DISTRIBUTED
#include "distributed.h"
#endif
#include "events.h"
#include "generator.h"
#include "graph.h"
#include "op_names.h"
#include "pinned.h"
#include "runtime.h"
#include "shared_memory.h"
#include "stream_context.h"

namespace torch_rill {
namespace {

py::tuple stream_tuple(const c10::Stream &s) {
    return py::make_tuple(s.id(), s.device_index(), static_cast<int>(s.device_type()));
}

c10::Stream from_parts(int64_t id, c10::DeviceIndex index) {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, index), id);
}

std::string device_name(c10::DeviceIndex index) {
    rill_device_info info;
    TORCH_RILL_CHECK(rill_device_get_info(device(index), &info));
    return info.name;
}

c10::Event &torch_event(const py::object &obj, const char *call) {
    TORCH_CHECK_TYPE(THPEvent_Check(obj.ptr()), call, " expects a torch.Event, not ",
                     py::str(py::type::of(obj)).cast<std::string>());
    return reinterpret_cast<THPEvent *>(obj.ptr())->event;
}

void add_stat(py::dict &out, const std::string &name, const c10::CachingAllocator::Stat &stat) {
    out[py::str(name + ".current")] = stat.current;
    out[py::str(name + ".peak")] = stat.peak;
    out[py::str(name + ".allocated")] = stat.allocated;
    out[py::str(name + ".freed")] = stat.freed;
}

// torch.cuda.host_memory_stats()'s keys that a cacheless allocator has.
py::dict host_memory_stats() {
    at::HostStats s = host_allocator()->get_stats();
    py::dict out;
    add_stat(out, "active_bytes", s.active_bytes);
    add_stat(out, "active_requests", s.active_requests);
    add_stat(out, "allocated_bytes", s.allocated_bytes);
    add_stat(out, "allocations", s.allocations);
    out["num_host_alloc"] = s.num_host_alloc;
    out["num_host_free"] = s.num_host_free;
    return out;
}

// One backward through the autograd engine's thread for device `index`,
// with the GIL released: once it returns, that thread has let go of every
// earlier backward (it takes one task at a time). Its tensors are made here,
// with no Python objects, and it runs without the Python context that
// torch.autograd.backward keeps in the thread-local state, so the thread may
// let go of this one whenever it likes, even while the interpreter
// finalizes.
void settle_autograd_thread(c10::DeviceIndex index) {
    py::gil_scoped_release no_gil;
    at::Tensor x = at::zeros({}, at::TensorOptions().device(kDeviceType, index)).requires_grad_();
    at::Tensor y = x * 2;
    torch::autograd::grad({y}, {x}, {at::ones_like(y)}, /*retain_graph=*/false,
                          /*create_graph=*/false, /*allow_unused=*/true);
}

} // namespace
} // namespace torch_rill

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    using namespace torch_rill;
    register_hooks();
    watch_forks();
    name_ops_from_environment();
    if (py::module_::import("threading")
            .attr("current_thread")()
            .is(py::module_::import("threading").attr("main_thread")()))
        remember_main_thread();
    m.def("_device_count", [] { return static_cast<int>(device_count()); });
    m.def("_is_in_bad_fork", [] { return in_bad_fork(); });
    m.def("_refuse_after_fork", [] { refuse_after_fork(); });
    m.def("_current_device", [] { return static_cast<int>(current_device()); });
    m.def("_set_device", [](int index) { set_device(static_cast<c10::DeviceIndex>(index)); });
    m.def("_exchange_device", [](int index) {
        c10::DeviceIndex prev = current_device();
        if (index >= 0 && index != prev)
            set_device(static_cast<c10::DeviceIndex>(index));
        return static_cast<int>(prev);
    });
    m.def("_device_name",
          [](int index) { return device_name(static_cast<c10::DeviceIndex>(index)); });
    m.def("_is_cpu_device",
          [](int index) { return is_cpu_device(static_cast<c10::DeviceIndex>(index)); });
    m.def("_current_stream", [](int index) {
        return stream_tuple(current_stream(static_cast<c10::DeviceIndex>(index)));
    });
    m.def("_default_stream", [](int index) {
        return stream_tuple(
            wrap(rill_default_stream(device(static_cast<c10::DeviceIndex>(index)))));
    });
    m.def("_set_stream", [](int64_t id, int index) {
        return stream_tuple(exchange_stream(from_parts(id, static_cast<c10::DeviceIndex>(index))));
    });
    // The rill_stream * behind a stream, as an integer (rill's Python
    // package wraps it), and the stream of such a handle.
    m.def("_stream_handle", [](int64_t id, int index) {
        return reinterpret_cast<uintptr_t>(
            unwrap(from_parts(id, static_cast<c10::DeviceIndex>(index))));
    });
    m.def("_clear_stream_error", [](int64_t id, int index) {
        TORCH_RILL_CHECK(
            rill_stream_clear_error(unwrap(from_parts(id, static_cast<c10::DeviceIndex>(index)))));
    });
    m.def("_clear_errors", [](int index) { clear_errors(static_cast<c10::DeviceIndex>(index)); });
    m.def("_wrap_stream_handle", [](uintptr_t handle) {
        return stream_tuple(wrap(reinterpret_cast<rill_stream *>(handle)));
    });
    define_stream_context(m);
    define_shared_memory(m);
    m.def("_settle_autograd_thread",
          [](int index) { settle_autograd_thread(static_cast<c10::DeviceIndex>(index)); });
    m.def("_synchronize", [](int index) {
        rill_device *dev = device(static_cast<c10::DeviceIndex>(index));
        py::gil_scoped_release nogil;
        wait_interruptibly("rill_device_synchronize",
                           [dev](uint64_t ns) { return rill_device_synchronize_for(dev, ns); });
    });
    m.def("_graph_pool_handle", [] {
        auto id = graph_pool_handle();
        return py::make_tuple(id.first, id.second);
    });
    m.def("_is_current_stream_capturing", [] {
        rill_stream *stream = rill_current_stream(device(-1));
        TORCH_CHECK(stream, rill_last_error());
        return is_capturing(stream);
    });
    m.def("_adopt_new_event", [](py::object event, int index, unsigned flags) {
        adopt_new_event(torch_event(event, "torch.rill.Event"),
                        static_cast<c10::DeviceIndex>(index), flags);
    });
    m.def("_event_ipc_handle", [](py::object event) {
        return py::bytes(event_ipc_handle(torch_event(event, "torch.rill.Event.ipc_handle")));
    });
    m.def("_adopt_opened_event", [](py::object event, int index, py::bytes handle) {
        adopt_opened_event(torch_event(event, "torch.rill.Event.from_ipc_handle"),
                           static_cast<c10::DeviceIndex>(index), handle.cast<std::string>());
    });
    m.def("_event_flags", [] {
        return py::make_tuple(static_cast<unsigned>(RILL_EVENT_TIMING),
                              static_cast<unsigned>(RILL_EVENT_BLOCKING_SYNC),
                              static_cast<unsigned>(RILL_EVENT_INTERPROCESS));
    });
    m.def("_host_memory_stats", host_memory_stats);
    m.def("_reset_peak_host_memory_stats", [] { host_allocator()->reset_peak_stats(); });
    m.def("_reset_accumulated_host_memory_stats",
          [] { host_allocator()->reset_accumulated_stats(); });
    m.def("_default_generator", [](int index) {
        const at::Generator &gen = at::globalContext().defaultGenerator(
            c10::Device(kDeviceType, static_cast<c10::DeviceIndex>(index)));
        return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(gen));
    });
    m.def("_name_ops", [](bool enabled) { name_ops(enabled); });
    m.def("_naming_ops", [] { return naming_ops(); });
#ifdef TORCH_RILL_DISTRIBUTED
    define_distributed(m);
#endif
}
