// SPDX-License-Identifier: MIT
// Blocking and interprocess torch.Events of rill. c10::Event creates its
// backend event itself, at its first record, from a flag that says only
// whether it times; so a rill event of other flags (or one opened from
// another process's handle) is handed to it through that first record:
// adopt() records the never-recorded torch.Event once with the event in a
// thread-local slot, and the device guard's record (guard.cpp) takes it
// from the slot instead of creating and recording one.
#include "events.h"

#include <cstring>

#include <c10/core/DeviceGuard.h>

namespace torch_rill {
namespace {

thread_local rill_event *adopting = nullptr;

void adopt(c10::Event &event, c10::DeviceIndex index, rill_event *ev, const char *call) {
    // torch.Event(device=...) keeps only the type: its index is -1 until
    // the first record.
    if (event.device_type() != kDeviceType || event.was_marked_for_recording() ||
        (event.device_index() != -1 && event.device_index() != index)) {
        rill_event_destroy(ev);
        TORCH_CHECK(false, call, ": expected a torch.Event of rill:", static_cast<int>(index),
                    " that was never recorded");
    }
    adopting = ev;
    try {
        event.record(current_stream(index));
    } catch (...) {
        if (adopting)
            rill_event_destroy(adopting);
        adopting = nullptr;
        throw;
    }
    TORCH_INTERNAL_ASSERT(!adopting, "the device guard did not take the adopted event");
}

} // namespace

rill_event *take_adopted_event() {
    rill_event *ev = adopting;
    adopting = nullptr;
    return ev;
}

void adopt_new_event(c10::Event &event, c10::DeviceIndex index, unsigned flags) {
    rill_event *ev = nullptr;
    check(rill_event_create(flags, &ev), "torch.rill.Event");
    adopt(event, index, ev, "torch.rill.Event");
}

std::string event_ipc_handle(const c10::Event &event) {
    auto *ev = static_cast<rill_event *>(event.eventId());
    TORCH_CHECK(event.device_type() == kDeviceType && ev,
                "torch.rill.Event.ipc_handle: the event is not interprocess; create it with "
                "torch.rill.Event(interprocess=True)");
    // A never-recorded event binds to the current device: make it the event's.
    const c10::DeviceGuard guard(event.device());
    rill_ipc_event_handle handle;
    check(rill_event_ipc_handle(ev, &handle), "torch.rill.Event.ipc_handle");
    return std::string(reinterpret_cast<const char *>(handle.bytes), sizeof handle.bytes);
}

void adopt_opened_event(c10::Event &event, c10::DeviceIndex index, const std::string &bytes) {
    const char *call = "torch.rill.Event.from_ipc_handle";
    rill_ipc_event_handle handle;
    TORCH_CHECK_VALUE(bytes.size() == sizeof handle.bytes, call, ": the handle must be the ",
                      sizeof handle.bytes, " bytes that ipc_handle() returned, not ", bytes.size(),
                      " bytes");
    std::memcpy(handle.bytes, bytes.data(), sizeof handle.bytes);
    rill_event *ev = nullptr;
    check(rill_event_open_ipc_handle(&handle, &ev), call);
    rill_device *dev = nullptr;
    rill_status status = rill_event_get_device(ev, &dev);
    if (status != RILL_OK || index_of(dev) != index) {
        c10::DeviceIndex named = status == RILL_OK ? index_of(dev) : -1;
        rill_event_destroy(ev);
        check(status, call);
        TORCH_CHECK_VALUE(false, call,
                          ": the handle names an event of rill:", static_cast<int>(named),
                          ", not rill:", static_cast<int>(index), "; open it on its own device");
    }
    adopt(event, index, ev, call);
}

} // namespace torch_rill
