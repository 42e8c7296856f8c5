// SPDX-License-Identifier: MIT
#include "runtime.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <vector>

#include <pthread.h>

#include <c10/util/Exception.h>

namespace torch_rill {

namespace {

// Whether torch_rill has reached a rill device in this process, and
// whether this process is the child of a fork of one that had (set in the
// child, while its only thread runs the fork handler, and never cleared).
std::atomic<bool> reached{false};
bool forked_after_use = false;

void note_fork_child() {
    forked_after_use = reached.load(std::memory_order_relaxed);
}

// Marks the process as one that used rill, and refuses in a child forked
// after that: the parent's tensors are memory the child shares with the
// parent, and their streams stayed in the parent.
inline void reach() {
    if (forked_after_use)
        refuse_after_fork();
    if (!reached.load(std::memory_order_relaxed))
        reached.store(true, std::memory_order_relaxed);
}

} // namespace

void watch_forks() {
    static const bool registered = pthread_atfork(nullptr, nullptr, note_fork_child) == 0;
    (void)registered;
}

bool in_bad_fork() {
    return forked_after_use;
}

void refuse_after_fork() {
    C10_THROW_ERROR(Error, "torch_rill: cannot use rill in a process forked from one that had "
                           "used it: its streams and workers stayed in the parent. To use rill "
                           "with multiprocessing, use the 'spawn' or 'forkserver' start method");
}

void check(rill_status status, const char *call) {
    if (status == RILL_OK)
        return;
    if (forked_after_use)
        refuse_after_fork();
    const char *why = rill_last_error();
    std::string text = std::string(call) + ": " + rill_status_name(status) + ": " +
                       (why && *why ? why : rill_status_string(status));
    if (status == RILL_ERROR_KERNEL_FAILED)
        text += " (from PyTorch: torch.rill.clear_errors(), or the stream's clear_error())";
    switch (status) {
    case RILL_ERROR_OUT_OF_MEMORY:
        TORCH_CHECK_WITH(OutOfMemoryError, false, text);
    case RILL_ERROR_NOT_SUPPORTED:
        TORCH_CHECK_NOT_IMPLEMENTED(false, text);
    case RILL_ERROR_INVALID_ARGUMENT:
    case RILL_ERROR_DEVICE_MISMATCH:
        TORCH_CHECK_VALUE(false, text);
    default:
        TORCH_CHECK(false, text);
    }
}

c10::DeviceIndex device_count() noexcept {
    static const c10::DeviceIndex count = [] {
        int n = 0;
        return rill_device_count(&n) == RILL_OK ? static_cast<c10::DeviceIndex>(n)
                                                : c10::DeviceIndex{0};
    }();
    return count;
}

namespace {

constexpr size_t kMaxDevices = 64; // the devices torch_rill serves

// rill_device_get(i) of each device once asked: a device handle lives
// until rill_shutdown, so an op's guard and stream look-ups compare and
// reuse handles instead of asking rill for them again (nullptr: not yet).
std::array<std::atomic<rill_device *>, kMaxDevices> handles{};

} // namespace

rill_device *device(c10::DeviceIndex index) {
    reach();
    if (index < 0) {
        rill_device *dev = nullptr;
        TORCH_RILL_CHECK(rill_get_device(&dev));
        return dev;
    }
    TORCH_CHECK(index < device_count(), "rill:", static_cast<int>(index),
                " is not a device: rill has ", static_cast<int>(device_count()),
                " (set RILL_CPU_DEVICES=N for more CPU devices)");
    // relaxed: a handle is a plain value that rill gives every thread alike.
    if (static_cast<size_t>(index) < kMaxDevices)
        if (rill_device *dev = handles[index].load(std::memory_order_relaxed))
            return dev;
    rill_device *dev = nullptr;
    TORCH_RILL_CHECK(rill_device_get(index, &dev));
    if (static_cast<size_t>(index) < kMaxDevices)
        handles[index].store(dev, std::memory_order_relaxed);
    return dev;
}

c10::DeviceIndex index_of(rill_device *dev) {
    size_t n = std::min(static_cast<size_t>(device_count()), kMaxDevices);
    for (size_t i = 0; i < n; i++)
        if (handles[i].load(std::memory_order_relaxed) == dev)
            return static_cast<c10::DeviceIndex>(i);
    rill_device_info info;
    TORCH_RILL_CHECK(rill_device_get_info(dev, &info));
    if (info.ordinal >= 0 && static_cast<size_t>(info.ordinal) < n)
        handles[info.ordinal].store(dev, std::memory_order_relaxed);
    return static_cast<c10::DeviceIndex>(info.ordinal);
}

c10::DeviceIndex current_device() {
    reach();
    rill_device *dev = nullptr;
    TORCH_RILL_CHECK(rill_get_device(&dev));
    return index_of(dev);
}

void set_device(c10::DeviceIndex index) {
    TORCH_RILL_CHECK(rill_set_device(device(index)));
}

bool is_cpu_device(c10::DeviceIndex index) {
    rill_device_info info;
    TORCH_RILL_CHECK(rill_device_get_info(device(index), &info));
    return info.kind == RILL_DEVICE_CPU;
}

namespace {

constexpr size_t kTableSize = 4096;
constexpr int kLevels = 16; // priorities rill may offer, greatest..least

// A device's streams. Entries are written once, under lock, and read
// without it: an id below count names a stream for good.
struct Table {
    std::array<std::atomic<rill_stream *>, kTableSize> streams{};
    std::atomic<size_t> count{0};
    std::mutex lock;
    std::array<std::array<int64_t, kPoolSize>, kLevels> pool{}; // ids; 0: not made yet
    std::array<unsigned, kLevels> next{};
};

Table &table(c10::DeviceIndex index) {
    static std::array<Table, 64> tables;
    TORCH_CHECK(index >= 0 && static_cast<size_t>(index) < tables.size(),
                "rill:", static_cast<int>(index), " is past the 64 devices torch_rill serves");
    Table &t = tables[index];
    if (t.count.load(std::memory_order_acquire) == 0) {
        std::lock_guard<std::mutex> guard(t.lock);
        if (t.count.load(std::memory_order_relaxed) == 0) {
            t.streams[0].store(rill_default_stream(device(index)), std::memory_order_relaxed);
            t.count.store(1, std::memory_order_release);
        }
    }
    return t;
}

int64_t enter_locked(Table &t, rill_stream *stream) {
    size_t n = t.count.load(std::memory_order_relaxed);
    for (size_t i = 0; i < n; i++)
        if (t.streams[i].load(std::memory_order_relaxed) == stream)
            return static_cast<int64_t>(i);
    TORCH_CHECK(n < kTableSize, "torch_rill: more than ", kTableSize,
                " streams on one device; reuse streams (torch.Stream takes them from a pool)");
    t.streams[n].store(stream, std::memory_order_relaxed);
    t.count.store(n + 1, std::memory_order_release);
    return static_cast<int64_t>(n);
}

} // namespace

c10::Stream wrap(rill_stream *stream) {
    rill_device *dev = nullptr;
    TORCH_RILL_CHECK(rill_stream_get_device(stream, &dev));
    c10::DeviceIndex index = index_of(dev);
    Table &t = table(index);
    size_t n = t.count.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; i++)
        if (t.streams[i].load(std::memory_order_relaxed) == stream)
            return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, index),
                               static_cast<c10::StreamId>(i));
    std::lock_guard<std::mutex> guard(t.lock);
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, index),
                       enter_locked(t, stream));
}

rill_stream *unwrap(const c10::Stream &stream) {
    TORCH_CHECK(stream.device_type() == kDeviceType, "expected a rill stream, got one of ",
                stream.device());
    Table &t = table(stream.device_index());
    c10::StreamId id = stream.id();
    TORCH_CHECK_VALUE(id >= 0 && static_cast<size_t>(id) < t.count.load(std::memory_order_acquire),
                      "stream id ", id, " names no stream of ", stream.device(),
                      "; use ids that torch.rill or torch.Stream gave");
    return t.streams[id].load(std::memory_order_relaxed);
}

c10::Stream pool_stream(c10::DeviceIndex index, int priority) {
    if (index < 0)
        index = current_device();
    rill_device *dev = device(index);
    rill_device_info info;
    TORCH_RILL_CHECK(rill_device_get_info(dev, &info));
    priority = std::max(info.greatest_priority, std::min(info.least_priority, priority));
    int level = std::min(priority - info.greatest_priority, kLevels - 1);
    Table &t = table(index);
    std::lock_guard<std::mutex> guard(t.lock);
    unsigned slot = t.next[level]++ % kPoolSize;
    int64_t id = t.pool[level][slot];
    if (id == 0) {
        rill_stream *stream = nullptr;
        TORCH_RILL_CHECK(rill_stream_create(dev, priority, &stream));
        std::string name = "torch:" + std::to_string(priority) + ":" + std::to_string(slot);
        rill_stream_set_name(stream, name.c_str());
        id = t.pool[level][slot] = enter_locked(t, stream);
    }
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kDeviceType, index), id);
}

void clear_errors(c10::DeviceIndex index) {
    if (index < 0)
        index = current_device();
    Table &t = table(index);
    std::vector<rill_stream *> made{t.streams[0].load(std::memory_order_relaxed)};
    {
        std::lock_guard<std::mutex> guard(t.lock);
        for (const auto &level : t.pool)
            for (int64_t id : level)
                if (id != 0)
                    made.push_back(t.streams[id].load(std::memory_order_relaxed));
    }
    for (rill_stream *stream : made)
        TORCH_RILL_CHECK(rill_stream_clear_error(stream));
}

c10::Stream current_stream(c10::DeviceIndex index) {
    if (index < 0)
        index = current_device();
    rill_stream *stream = rill_current_stream(device(index));
    TORCH_CHECK(stream, rill_last_error());
    return wrap(stream);
}

c10::Stream exchange_stream(const c10::Stream &stream) {
    rill_stream *prev = rill_set_current_stream(unwrap(stream));
    TORCH_CHECK(prev, rill_last_error());
    return wrap(prev);
}

} // namespace torch_rill
