// SPDX-License-Identifier: MIT
// PyTorch's allocator for rill devices is rill's stream-ordered pool: a
// tensor's memory comes from rill_malloc_async on the current stream and
// goes back with rill_free at the end of the work submitted to that stream,
// and the pool keeps it from reuse while other streams' kernels that use it
// have not run. torch.rill's memory figures read rill's.
//
// During a capture that torch_rill runs (graph.cpp), an allocation on a
// capturing stream is the graph's memory (rill's graph memory, "static
// outputs" in PyTorch's words): its tensor holds the capture's GraphMemory,
// so its address stays valid while it lives, after the graph is reset or
// deleted too. Freed inside the capture, it goes back with rill_free_async
// on its stream, for the graph to reuse; freed after it, it stays the
// graph's until the graph goes. A free of other memory while a capture is
// active waits for the capture's end: the capture may use that memory.
#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include <c10/core/CachingDeviceAllocator.h>

#include "capture.h"
#include "graph.h"
#include "runtime.h"

namespace torch_rill {
namespace {

std::atomic<int> captures_active{0}; // entries in captures
std::mutex captures_lock;
std::vector<std::shared_ptr<GraphMemory>> captures; // guarded by captures_lock
std::vector<void *> deferred;                       // guarded by captures_lock

void free_memory(void *ptr) {
    if (ptr == nullptr)
        return;
    if (captures_active.load(std::memory_order_acquire) > 0) {
        std::lock_guard<std::mutex> guard(captures_lock);
        if (!captures.empty()) {
            deferred.push_back(ptr);
            return;
        }
    }
    // A free after rill_shutdown (interpreter teardown) has nothing to free.
    rill_free(ptr);
}

// An allocation made in a capture: the captures of its device active then
// (one, unless several threads capture at once).
struct GraphAllocation {
    void *ptr;
    rill_stream *stream;                               // borrowed: rill's, lives on
    std::vector<std::shared_ptr<GraphMemory>> holders; // ref: keeps the graph's memory
};

void free_graph_memory(void *ctx) {
    auto *a = static_cast<GraphAllocation *>(ctx);
    // Inside the capture the graph takes it back for reuse; the capture's
    // failure, if that is why this fails, shows at capture_end.
    for (const std::shared_ptr<GraphMemory> &m : a->holders)
        if (m->capturing.load(std::memory_order_acquire)) {
            rill_free_async(a->ptr, a->stream);
            break;
        }
    delete a;
}

c10::DataPtr allocate_in_capture(size_t bytes, rill_stream *stream, c10::DeviceIndex index) {
    auto a = std::make_unique<GraphAllocation>();
    {
        std::lock_guard<std::mutex> guard(captures_lock);
        for (const std::shared_ptr<GraphMemory> &m : captures)
            if (m->device == index)
                a->holders.push_back(m);
    }
    if (a->holders.empty()) {
        // The op that asked fails: the capture must not go on without it.
        // A call rill refuses on a capturing stream invalidates the capture.
        (void)rill_stream_query(stream);
        TORCH_CHECK(false,
                    "torch_rill: allocating device memory on a capturing stream whose capture "
                    "was not begun by torch.rill.graph or torch.accelerator.Graph: the tensor "
                    "could not outlive the capture's graph, and the capture is invalidated; "
                    "capture with one of them");
    }
    void *ptr = nullptr;
    check(rill_malloc_async(bytes, stream, &ptr), "torch_rill: allocating device memory");
    a->ptr = ptr;
    a->stream = stream;
    return c10::DataPtr(ptr, a.release(), &free_graph_memory, c10::Device(kDeviceType, index));
}

void set_stat(c10::CachingAllocator::Stat &stat, int64_t current, int64_t peak, int64_t allocated,
              int64_t freed) {
    stat.current = current;
    stat.peak = peak;
    stat.allocated = allocated;
    stat.freed = freed;
}

// An allocation on device dev (rill:index), on its current stream.
c10::DataPtr allocate_on(rill_device *dev, c10::DeviceIndex index, size_t bytes) {
    c10::Device where(kDeviceType, index);
    if (bytes == 0)
        return c10::DataPtr(nullptr, nullptr, &free_memory, where);
    rill_stream *stream = rill_current_stream(dev);
    if (is_capturing(stream))
        return allocate_in_capture(bytes, stream, index);
    void *ptr = nullptr;
    rill_status status = rill_malloc_async(bytes, stream, &ptr);
    // Stream order could not serve it: rill_malloc also waits for the
    // frees that pending work holds, as PyTorch's caching allocator
    // synchronizes before it gives up.
    if (status == RILL_ERROR_OUT_OF_MEMORY)
        status = rill_malloc(dev, bytes, &ptr);
    check(status, "torch_rill: allocating device memory");
    return c10::DataPtr(ptr, ptr, &free_memory, where);
}

struct Allocator final : public c10::DeviceAllocator {
    // Counts as of resetAccumulatedStats, subtracted from rill's.
    std::array<std::atomic<uint64_t>, 64> base_allocations{};
    std::array<std::atomic<uint64_t>, 64> base_frees{};

    c10::DataPtr allocate(size_t bytes) override {
        rill_device *dev = device(-1);
        return allocate_on(dev, index_of(dev), bytes);
    }

    c10::DeleterFnPtr raw_deleter() const override {
        return &free_memory;
    }

    void copy_data(void *dest, const void *src, size_t count) const override {
        TORCH_RILL_CHECK(rill_memcpy(dest, src, count));
    }

    bool initialized() override {
        return device_count() > 0;
    }

    void emptyCache(c10::MempoolId_t) override {
        for (c10::DeviceIndex i = 0; i < device_count(); i++)
            TORCH_RILL_CHECK(rill_mem_empty_cache(device(i)));
    }

    void recordStream(const c10::DataPtr &ptr, c10::Stream stream) override {
        if (ptr.get())
            TORCH_RILL_CHECK(rill_record_stream(ptr.get(), unwrap(stream)));
    }

    c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex index) override {
        rill_device *dev = device(index);
        rill_mem_stats s;
        TORCH_RILL_CHECK(rill_mem_get_stats(dev, &s));
        c10::CachingDeviceAllocator::DeviceStats out;
        int64_t allocs = static_cast<int64_t>(s.allocations - base_allocations[index].load());
        int64_t frees = static_cast<int64_t>(s.frees - base_frees[index].load());
        const size_t agg = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
        set_stat(out.allocation[agg], static_cast<int64_t>(s.allocations - s.frees),
                 static_cast<int64_t>(s.allocations - s.frees), allocs, frees);
        set_stat(out.allocated_bytes[agg], s.allocated_bytes, s.peak_allocated_bytes, 0, 0);
        set_stat(out.active_bytes[agg], s.allocated_bytes, s.peak_allocated_bytes, 0, 0);
        set_stat(out.requested_bytes[agg], s.allocated_bytes, s.peak_allocated_bytes, 0, 0);
        set_stat(out.reserved_bytes[agg], s.reserved_bytes, s.peak_reserved_bytes, 0, 0);
        rill_mem_pool pools[2] = {RILL_MEM_POOL_SMALL, RILL_MEM_POOL_LARGE};
        const size_t kinds[2] = {static_cast<size_t>(c10::CachingAllocator::StatType::SMALL_POOL),
                                 static_cast<size_t>(c10::CachingAllocator::StatType::LARGE_POOL)};
        int64_t segments = 0;
        for (int i = 0; i < 2; i++) {
            rill_mem_pool_stats p;
            TORCH_RILL_CHECK(rill_mem_get_pool_stats(dev, pools[i], &p));
            segments += static_cast<int64_t>(p.segments);
            set_stat(out.segment[kinds[i]], p.segments, p.segments, 0, 0);
            set_stat(out.allocated_bytes[kinds[i]], p.allocated_bytes, p.allocated_bytes, 0, 0);
            set_stat(out.reserved_bytes[kinds[i]], p.reserved_bytes, p.reserved_bytes, 0, 0);
            set_stat(out.active[kinds[i]], p.live_blocks, p.live_blocks, 0, 0);
        }
        set_stat(out.segment[agg], segments, segments, 0, 0);
        set_stat(out.active[agg], static_cast<int64_t>(s.allocations - s.frees),
                 static_cast<int64_t>(s.allocations - s.frees), 0, 0);
        out.num_alloc_retries = static_cast<int64_t>(s.oom_recoveries);
        return out;
    }

    void resetAccumulatedStats(c10::DeviceIndex index) override {
        rill_mem_stats s;
        TORCH_RILL_CHECK(rill_mem_get_stats(device(index), &s));
        base_allocations[index] = s.allocations;
        base_frees[index] = s.frees;
    }

    void resetPeakStats(c10::DeviceIndex index) override {
        TORCH_RILL_CHECK(rill_mem_reset_peak_stats(device(index)));
    }

    // Free and total bytes: for CPU devices, what all of them may still
    // take of the amount rill may take (they share it), else the device's.
    std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex index) override {
        rill_device_info info;
        TORCH_RILL_CHECK(rill_device_get_info(device(index), &info));
        size_t reserved = 0;
        for (c10::DeviceIndex i = 0; i < device_count(); i++) {
            rill_device_info other;
            rill_mem_stats s;
            TORCH_RILL_CHECK(rill_device_get_info(device(i), &other));
            bool shares = info.kind == RILL_DEVICE_CPU && other.kind == RILL_DEVICE_CPU;
            if (i != index && !shares)
                continue;
            TORCH_RILL_CHECK(rill_mem_get_stats(device(i), &s));
            reserved += s.reserved_bytes;
        }
        size_t total = info.memory_bytes;
        return {reserved < total ? total - reserved : 0, total};
    }
};

Allocator allocator;

// The allocator of one device, whatever the thread's current device: what
// empty and empty_strided use, so that they need no device guard.
struct DeviceAllocator final : public c10::Allocator {
    c10::DeviceIndex index = 0;

    c10::DataPtr allocate(size_t bytes) override {
        return allocate_on(device(index), index, bytes);
    }

    c10::DeleterFnPtr raw_deleter() const override {
        return &free_memory;
    }

    void copy_data(void *dest, const void *src, size_t count) const override {
        allocator.copy_data(dest, src, count);
    }
};

std::array<DeviceAllocator, 64> device_allocators = [] {
    std::array<DeviceAllocator, 64> all;
    for (size_t i = 0; i < all.size(); i++)
        all[i].index = static_cast<c10::DeviceIndex>(i);
    return all;
}();

} // namespace

c10::Allocator *allocator_on(c10::DeviceIndex index) {
    if (index < 0)
        return &allocator;
    // An index past rill's devices is refused by device(), when it allocates.
    if (static_cast<size_t>(index) < device_allocators.size())
        return &device_allocators[static_cast<size_t>(index)];
    return nullptr;
}

void capture_memory_begin(const std::shared_ptr<GraphMemory> &memory) {
    std::lock_guard<std::mutex> guard(captures_lock);
    captures.push_back(memory);
    captures_active.store(static_cast<int>(captures.size()), std::memory_order_release);
}

void capture_memory_end(const std::shared_ptr<GraphMemory> &memory) {
    std::vector<void *> frees;
    {
        std::lock_guard<std::mutex> guard(captures_lock);
        memory->capturing.store(false, std::memory_order_release);
        std::erase(captures, memory);
        captures_active.store(static_cast<int>(captures.size()), std::memory_order_release);
        if (captures.empty())
            frees.swap(deferred);
    }
    for (void *ptr : frees)
        rill_free(ptr);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator);

} // namespace torch_rill
