// SPDX-License-Identifier: MIT
// What a captured command needs at every replay of its graph (a host
// function's arguments and the tensors it reads) lives as long as the graph
// made from the capture: captures that torch_rill begins keep it.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "runtime.h"

namespace torch_rill {

// The objects one capture keeps; the graph holds this after the capture.
struct CaptureKeep {
    c10::DeviceIndex device;
    std::mutex lock;
    std::vector<std::shared_ptr<void>> objects;
};

// Starts keeping objects for a capture begun on device; capture_keep_end
// stops it (the capture ended or failed), the caller holding what it kept.
std::shared_ptr<CaptureKeep> capture_keep_begin(c10::DeviceIndex device);
void capture_keep_end(const std::shared_ptr<CaptureKeep> &keep);

// Whether stream is capturing.
bool is_capturing(rill_stream *stream);

// Throws, naming what, when stream is capturing and no capture that
// torch_rill keeps for holds its device: what cannot be captured there.
void check_capture_keeps(rill_stream *stream, c10::DeviceIndex device, const char *what);

// When stream is capturing, gives obj to every capture of its device that
// torch_rill keeps for and returns true; throws when none does (a capture
// begun through rill itself, which cannot own it). Returns false when
// stream is not capturing.
bool keep_for_capture(rill_stream *stream, c10::DeviceIndex device, std::shared_ptr<void> obj,
                      const char *what);

} // namespace torch_rill
