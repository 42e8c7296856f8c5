// SPDX-License-Identifier: MIT
// torch.Event of rill with what c10::Event's flags cannot say: blocking and
// interprocess events, and an event opened from another process's handle.
#pragma once

#include <string>

#include <c10/core/Event.h>

#include "runtime.h"

namespace torch_rill {

// Makes event, a torch.Event of rill:index never recorded, hold a new rill
// event of flags (rill_event_flags) from now on; the torch.Event destroys
// it. Recording, waiting, querying and synchronizing then go through the
// device guard as for any torch.Event.
void adopt_new_event(c10::Event &event, c10::DeviceIndex index, unsigned flags);
// The 64 bytes of rill_event_ipc_handle for event's rill event.
std::string event_ipc_handle(const c10::Event &event);
// Makes event, as adopt_new_event, hold the event that handle (bytes of
// event_ipc_handle, from this or another process) opens on rill:index.
void adopt_opened_event(c10::Event &event, c10::DeviceIndex index, const std::string &handle);
// The event that adopt_* hands to the device guard's record on this thread,
// taken once; nullptr outside adopt_*.
rill_event *take_adopted_event();

} // namespace torch_rill
