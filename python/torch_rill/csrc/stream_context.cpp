// SPDX-License-Identifier: MIT
// torch.rill.StreamContext (torch.rill.stream(s)): a with block that makes
// a rill stream and its device current in the calling thread, and restores
// both at its end, as torch.cuda.StreamContext does. A class of the module
// rather than of Python, so that a with block costs the construction and
// two calls, with no Python frame: the stream's id and device are read from
// the torch.Stream object's fields, and devices are compared as rill
// handles (no rill_device_get_info).
#include "stream_context.h"

#include <utility>
#include <vector>

#include <torch/csrc/Stream.h>
#include <torch/csrc/utils/pybind.h>

#include "runtime.h"

namespace py = pybind11;

namespace torch_rill {
namespace {

struct StreamContext {
    py::object stream;             // a rill torch.Stream, or None
    rill_stream *target = nullptr; // its rill stream; nullptr for None
    rill_device *dev = nullptr;    // target's device
    // Per entry not yet left, the device and the stream of dev that were
    // current before it (entries nest, as with blocks do): the first one
    // in place, so that a with block allocates nothing, deeper ones of the
    // same object in more.
    using Saved = std::pair<rill_device *, rill_stream *>;
    Saved first{};
    size_t depth = 0;
    std::vector<Saved> more;

    explicit StreamContext(py::object s) : stream(std::move(s)) {
        if (stream.is_none())
            return;
        PyObject *obj = stream.ptr();
        auto *t = reinterpret_cast<THPStream *>(obj);
        TORCH_CHECK_TYPE(THPStream_Check(obj) &&
                             t->device_type == static_cast<int64_t>(kDeviceType),
                         "torch.rill.stream takes a rill torch.Stream or None, not ",
                         py::repr(stream).cast<std::string>());
        auto index = static_cast<c10::DeviceIndex>(t->device_index);
        target = unwrap(c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, index),
                                    static_cast<c10::StreamId>(t->stream_id)));
        dev = device(index);
    }

    py::object enter() {
        if (!target)
            return stream;
        rill_device *prev = nullptr;
        TORCH_RILL_CHECK(rill_get_device(&prev));
        if (prev != dev)
            TORCH_RILL_CHECK(rill_set_device(dev));
        rill_stream *before = rill_set_current_stream(target);
        if (!before) {
            std::string why = rill_last_error();
            rill_set_device(prev);
            TORCH_CHECK(false, "rill_set_current_stream: ", why);
        }
        if (depth == 0)
            first = {prev, before};
        else
            more.emplace_back(prev, before);
        depth++;
        return stream;
    }

    bool exit(const py::args &) {
        if (!target || depth == 0)
            return false;
        auto [prev, before] = depth == 1 ? first : more.back();
        if (--depth > 0)
            more.pop_back();
        TORCH_CHECK(rill_set_current_stream(before),
                    "rill_set_current_stream: ", rill_last_error());
        rill_device *now = nullptr;
        TORCH_RILL_CHECK(rill_get_device(&now));
        if (now != prev)
            TORCH_RILL_CHECK(rill_set_device(prev));
        return false;
    }
};

} // namespace

void define_stream_context(py::module_ &m) {
    py::class_<StreamContext>(m, "StreamContext",
                              "Makes a stream current on its device, and its device current, for "
                              "a with block (torch.cuda.StreamContext); None does nothing.")
        .def(py::init<py::object>(), py::arg("stream"))
        .def_readonly("stream", &StreamContext::stream)
        .def("__enter__", &StreamContext::enter)
        .def("__exit__", &StreamContext::exit);
}

} // namespace torch_rill
