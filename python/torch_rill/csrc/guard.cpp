// SPDX-License-Identifier: MIT
// PyTorch's device guard for rill: the current device and stream per
// thread, and events, all rill's own (rill_set_device,
// rill_set_current_stream, rill_event_*), so that rill's Python package and
// PyTorch see one current stream.
#include <c10/core/Allocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "events.h"
#include "runtime.h"

namespace torch_rill {
namespace {

rill_event *as_event(void *event) {
    return static_cast<rill_event *>(event);
}

struct Guard final : public c10::impl::DeviceGuardImplInterface {
    c10::DeviceType type() const override {
        return kDeviceType;
    }

    c10::Device exchangeDevice(c10::Device d) const override {
        c10::DeviceIndex prev = current_device();
        if (d.index() != prev)
            set_device(d.index());
        return c10::Device(kDeviceType, prev);
    }

    c10::Device getDevice() const override {
        return c10::Device(kDeviceType, current_device());
    }

    void setDevice(c10::Device d) const override {
        set_device(d.index());
    }

    void uncheckedSetDevice(c10::Device d) const noexcept override {
        if (d.index() < 0)
            return;
        try {
            rill_set_device(device(d.index())); // device() knows the handle: no look-up
        } catch (const c10::Error &) {
        }
    }

    c10::Stream getStream(c10::Device d) const override {
        return current_stream(d.index());
    }

    c10::Stream getDefaultStream(c10::Device d) const override {
        return wrap(rill_default_stream(device(d.index())));
    }

    c10::Stream getStreamFromGlobalPool(c10::Device d, bool high_priority) const override {
        return pool_stream(d.index(), high_priority ? -1 : 0);
    }

    c10::Stream getNewStream(c10::Device d, int priority) const override {
        return pool_stream(d.index(), priority);
    }

    c10::Stream exchangeStream(c10::Stream s) const override {
        return exchange_stream(s);
    }

    void *getStreamNativeHandle(const c10::Stream s) const override {
        void *native = nullptr;
        TORCH_RILL_CHECK(rill_stream_native(unwrap(s), &native));
        return native;
    }

    c10::DeviceIndex deviceCount() const noexcept override {
        return device_count();
    }

    void record(void **event, const c10::Stream &stream, const c10::DeviceIndex device_index,
                const c10::EventFlag flag) const override {
        TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                    "event of rill:", static_cast<int>(device_index), " recorded on a stream of ",
                    stream.device());
        if (!*event) {
            // A blocking or interprocess event handed over (events.cpp).
            if (rill_event *adopted = take_adopted_event()) {
                *event = adopted;
                return;
            }
            unsigned flags =
                flag == c10::EventFlag::BACKEND_DEFAULT ? RILL_EVENT_TIMING : RILL_EVENT_DEFAULT;
            rill_event *created = nullptr;
            TORCH_RILL_CHECK(rill_event_create(flags, &created));
            *event = created;
        }
        TORCH_RILL_CHECK(rill_event_record(as_event(*event), unwrap(stream)));
    }

    void block(void *event, const c10::Stream &stream) const override {
        if (event)
            TORCH_RILL_CHECK(rill_stream_wait_event(unwrap(stream), as_event(event)));
    }

    bool queryEvent(void *event) const override {
        if (!event)
            return true;
        rill_status status = rill_event_query(as_event(event));
        if (status == RILL_NOT_READY)
            return false;
        TORCH_RILL_CHECK(status);
        return true;
    }

    void destroyEvent(void *event, const c10::DeviceIndex) const noexcept override {
        if (event)
            rill_event_destroy(as_event(event));
    }

    bool queryStream(const c10::Stream &stream) const override {
        rill_status status = rill_stream_query(unwrap(stream));
        if (status == RILL_NOT_READY)
            return false;
        TORCH_RILL_CHECK(status);
        return true;
    }

    void synchronizeStream(const c10::Stream &stream) const override {
        rill_stream *s = unwrap(stream);
        wait_interruptibly("rill_stream_synchronize",
                           [s](uint64_t ns) { return rill_stream_synchronize_for(s, ns); });
    }

    bool isStreamCapturing(const c10::Stream &stream) const override {
        rill_capture_status status;
        TORCH_RILL_CHECK(rill_stream_get_capture_status(unwrap(stream), &status));
        return status == RILL_CAPTURE_ACTIVE;
    }

    void synchronizeEvent(void *event) const override {
        if (event)
            wait_interruptibly("rill_event_synchronize", [event](uint64_t ns) {
                return rill_event_synchronize_for(as_event(event), ns);
            });
    }

    void synchronizeDevice(const c10::DeviceIndex index) const override {
        rill_device *dev = device(index);
        wait_interruptibly("rill_device_synchronize",
                           [dev](uint64_t ns) { return rill_device_synchronize_for(dev, ns); });
    }

    // rill's pool keeps memory that other streams' kernels use until they
    // ran, with no record; the record is kept for work rill cannot see.
    void recordDataPtrOnStream(const c10::DataPtr &ptr, const c10::Stream &stream) const override {
        if (ptr.get())
            TORCH_RILL_CHECK(rill_record_stream(ptr.get(), unwrap(stream)));
    }

    double elapsedTime(void *start, void *end, const c10::DeviceIndex) const override {
        TORCH_CHECK(start && end, "both events must be recorded before elapsed_time");
        float ms = 0;
        TORCH_RILL_CHECK(rill_event_elapsed_ms(as_event(start), as_event(end), &ms));
        return ms;
    }
};

} // namespace

C10_REGISTER_GUARD_IMPL(PrivateUse1, Guard);

} // namespace torch_rill
