// SPDX-License-Identifier: MIT
// torch.rill.StreamContext (torch.rill.stream(s)): a with block that makes
// a rill stream and its device current in the calling thread, and restores
// both at its end, as torch.cuda.StreamContext does. A type of the C API
// rather than a pybind11 or Python class, so that a with block costs one
// construction and two method calls through CPython's own fast paths: the
// stream's id and device are read from the torch.Stream object's fields, and
// devices are compared as rill handles (no rill_device_get_info).
#include "stream_context.h"

#include <utility>
#include <vector>

#include <structmember.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Stream.h>
#include <torch/csrc/utils/pybind.h>

#include "runtime.h"

namespace py = pybind11;

namespace torch_rill {
namespace {

// The device and the stream of the target's device that were current
// before an entry.
using Saved = std::pair<rill_device *, rill_stream *>;

struct StreamContext {
    PyObject ob_base;
    PyObject *stream;    // a rill torch.Stream, or None (owned)
    rill_stream *target; // its rill stream; nullptr for None
    rill_device *dev;    // target's device
    // Per entry not yet left (entries nest, as with blocks do): the first
    // one in place, so that a with block allocates nothing, deeper ones of
    // the same object in more (created at the first such entry).
    Saved first;
    size_t depth;
    std::vector<Saved> *more;
};

PyObject *context_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    HANDLE_TH_ERRORS
    static const char *names[] = {"stream", nullptr};
    PyObject *stream = nullptr;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:StreamContext", const_cast<char **>(names),
                                     &stream))
        return nullptr;
    rill_stream *target = nullptr;
    rill_device *dev = nullptr;
    if (stream != Py_None) {
        auto *t = reinterpret_cast<THPStream *>(stream);
        TORCH_CHECK_TYPE(THPStream_Check(stream) &&
                             t->device_type == static_cast<int64_t>(kDeviceType),
                         "torch.rill.stream takes a rill torch.Stream or None, not ",
                         py::repr(stream).cast<std::string>());
        auto index = static_cast<c10::DeviceIndex>(t->device_index);
        target = unwrap(c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, index),
                                    static_cast<c10::StreamId>(t->stream_id)));
        dev = device(index);
    }
    auto *self = reinterpret_cast<StreamContext *>(type->tp_alloc(type, 0));
    if (self == nullptr)
        return nullptr;
    Py_INCREF(stream);
    self->stream = stream;
    self->target = target;
    self->dev = dev;
    self->first = {};
    self->depth = 0;
    self->more = nullptr;
    return reinterpret_cast<PyObject *>(self);
    END_HANDLE_TH_ERRORS
}

void context_dealloc(PyObject *obj) {
    auto *self = reinterpret_cast<StreamContext *>(obj);
    Py_XDECREF(self->stream);
    delete self->more;
    Py_TYPE(obj)->tp_free(obj);
}

PyObject *context_enter(PyObject *obj, PyObject *) {
    HANDLE_TH_ERRORS
    auto *self = reinterpret_cast<StreamContext *>(obj);
    if (self->target != nullptr) {
        rill_device *prev = nullptr;
        TORCH_RILL_CHECK(rill_get_device(&prev));
        if (prev != self->dev)
            TORCH_RILL_CHECK(rill_set_device(self->dev));
        rill_stream *before = rill_set_current_stream(self->target);
        if (before == nullptr) {
            std::string why = rill_last_error();
            rill_set_device(prev);
            TORCH_CHECK(false, "rill_set_current_stream: ", why);
        }
        if (self->depth == 0) {
            self->first = {prev, before};
        } else {
            if (self->more == nullptr)
                self->more = new std::vector<Saved>();
            self->more->emplace_back(prev, before);
        }
        self->depth++;
    }
    Py_INCREF(self->stream);
    return self->stream;
    END_HANDLE_TH_ERRORS
}

PyObject *context_exit(PyObject *obj, PyObject *const *, Py_ssize_t) {
    HANDLE_TH_ERRORS
    auto *self = reinterpret_cast<StreamContext *>(obj);
    if (self->target != nullptr && self->depth > 0) {
        auto [prev, before] = self->depth == 1 ? self->first : self->more->back();
        if (--self->depth > 0)
            self->more->pop_back();
        TORCH_CHECK(rill_set_current_stream(before), rill_last_error());
        rill_device *now = nullptr;
        TORCH_RILL_CHECK(rill_get_device(&now));
        if (now != prev)
            TORCH_RILL_CHECK(rill_set_device(prev));
    }
    Py_RETURN_FALSE;
    END_HANDLE_TH_ERRORS
}

PyMethodDef context_methods[] = {
    {"__enter__", context_enter, METH_NOARGS, nullptr},
    {"__exit__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(context_exit)),
     METH_FASTCALL, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef context_members[] = {
    {const_cast<char *>("stream"), T_OBJECT, offsetof(StreamContext, stream), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

PyTypeObject context_type = [] {
    PyTypeObject t{}; // what PyVarObject_HEAD_INIT(nullptr, 0) would set, but the count:
    Py_SET_REFCNT(reinterpret_cast<PyObject *>(&t), 1);
    t.tp_name = "torch_rill._C.StreamContext";
    t.tp_basicsize = sizeof(StreamContext);
    t.tp_dealloc = context_dealloc;
    t.tp_flags = Py_TPFLAGS_DEFAULT;
    t.tp_doc = "Makes a stream current on its device, and its device current, for a with block "
               "(torch.cuda.StreamContext); None does nothing.";
    t.tp_methods = context_methods;
    t.tp_members = context_members;
    t.tp_new = context_new;
    return t;
}();

} // namespace

void define_stream_context(py::module_ &m) {
    if (PyType_Ready(&context_type) < 0)
        throw py::error_already_set();
    Py_INCREF(&context_type);
    m.add_object("StreamContext", reinterpret_cast<PyObject *>(&context_type));
}

} // namespace torch_rill
