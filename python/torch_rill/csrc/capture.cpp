// SPDX-License-Identifier: MIT
#include "capture.h"

#include <algorithm>

#include <c10/util/Exception.h>

namespace torch_rill {
namespace {

std::mutex captures_lock;
std::vector<std::weak_ptr<CaptureKeep>> captures; // those still collecting

} // namespace

std::shared_ptr<CaptureKeep> capture_keep_begin(c10::DeviceIndex device) {
    auto keep = std::make_shared<CaptureKeep>();
    keep->device = device;
    std::lock_guard<std::mutex> guard(captures_lock);
    captures.push_back(keep);
    return keep;
}

void capture_keep_end(const std::shared_ptr<CaptureKeep> &keep) {
    std::lock_guard<std::mutex> guard(captures_lock);
    std::erase_if(captures, [&](const std::weak_ptr<CaptureKeep> &w) {
        auto held = w.lock();
        return !held || held == keep;
    });
}

bool is_capturing(rill_stream *stream) {
    rill_capture_status status = RILL_CAPTURE_NONE;
    TORCH_RILL_CHECK(rill_stream_get_capture_status(stream, &status));
    return status != RILL_CAPTURE_NONE;
}

namespace {

[[noreturn]] void refuse(const char *what) {
    TORCH_CHECK(false, what,
                " cannot be captured: the stream captures, but not through torch.rill.graph "
                "or torch.accelerator.Graph, which keep what its replays need; capture with "
                "one of them");
}

} // namespace

void check_capture_keeps(rill_stream *stream, c10::DeviceIndex device, const char *what) {
    if (!is_capturing(stream))
        return;
    std::lock_guard<std::mutex> guard(captures_lock);
    for (const std::weak_ptr<CaptureKeep> &w : captures) {
        auto keep = w.lock();
        if (keep && keep->device == device)
            return;
    }
    refuse(what);
}

bool keep_for_capture(rill_stream *stream, c10::DeviceIndex device, std::shared_ptr<void> obj,
                      const char *what) {
    if (!is_capturing(stream))
        return false;
    bool kept = false;
    {
        std::lock_guard<std::mutex> guard(captures_lock);
        for (const std::weak_ptr<CaptureKeep> &w : captures) {
            auto keep = w.lock();
            if (!keep || keep->device != device)
                continue;
            std::lock_guard<std::mutex> keep_guard(keep->lock);
            keep->objects.push_back(obj);
            kept = true;
        }
    }
    if (!kept)
        refuse(what);
    return true;
}

} // namespace torch_rill
