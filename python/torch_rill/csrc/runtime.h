// SPDX-License-Identifier: MIT
// The rill device under PyTorch: device indices, streams as c10::Stream and
// rill's failures as PyTorch errors. Every file of csrc/ reaches rill
// through these helpers and rill.h's public calls.
#pragma once

#include <functional>

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <rill.h>

namespace torch_rill {

constexpr c10::DeviceType kDeviceType = c10::DeviceType::PrivateUse1;

// Throws the c10 error that matches status (OutOfMemoryError for
// RILL_ERROR_OUT_OF_MEMORY, NotImplementedError for NOT_SUPPORTED, else
// Error), with call and rill's sentence; returns for RILL_OK.
void check(rill_status status, const char *call);
#define TORCH_RILL_CHECK(expr) ::torch_rill::check((expr), #expr)

// Calls wait(slice_ns) until it returns other than RILL_NOT_READY (which
// check() then judges), ending with Python's KeyboardInterrupt when Ctrl-C
// arrives meanwhile: synchronizations from Python can be interrupted.
void wait_interruptibly(const char *call, const std::function<rill_status(uint64_t)> &wait);
// The calling thread is Python's main thread (called at import when so).
void remember_main_thread();

// fork(): a child of a process that had used rill cannot use it (as CUDA
// cannot be used after a fork). watch_forks registers the handler that
// notes such a child (once, at import); refuse_after_fork throws the error
// that says so, which every call to rill's devices throws there.
void watch_forks();
bool in_bad_fork();
[[noreturn]] void refuse_after_fork();

// rill's devices in rill's order: rill:i is rill_device_get(i).
c10::DeviceIndex device_count() noexcept;
rill_device *device(c10::DeviceIndex index); // index -1: the current device
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex index);
c10::DeviceIndex index_of(rill_device *dev);
bool is_cpu_device(c10::DeviceIndex index); // the host reads its memory
// PyTorch's allocator for the device, serving rill:index whatever the
// thread's current device (index -1: the current device's); nullptr for an
// index past those it keeps one for (allocator.cpp).
c10::Allocator *allocator_on(c10::DeviceIndex index);

// Streams: a c10::Stream's id is an index in its device's table of rill
// streams; 0 is the default stream. Streams that PyTorch asks for come from
// a pool of kPoolSize per priority, as CUDA's do; streams that rill's own
// Python package made are entered in the table when first seen.
constexpr int kPoolSize = 32;
c10::Stream wrap(rill_stream *stream);
rill_stream *unwrap(const c10::Stream &stream);
c10::Stream pool_stream(c10::DeviceIndex index, int priority);
c10::Stream current_stream(c10::DeviceIndex index);
c10::Stream exchange_stream(const c10::Stream &stream); // returns the previous one
// rill_stream_clear_error on the streams torch_rill made on the device: its
// default stream and its pool's (a stream rill's own Python package made
// is its owner's to clear).
void clear_errors(c10::DeviceIndex index);

} // namespace torch_rill
