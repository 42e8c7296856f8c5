// SPDX-License-Identifier: MIT
// PyTorch's host allocator for rill: pin_memory() and pin_memory=True take
// rill_malloc_host memory (page-locked where the device copies by DMA),
// and is_pinned() answers for it. A non_blocking copy between such memory
// and a rill tensor is queued on the device's current stream
// (tensor_ops.cpp), which records an event per stream on the block; a block
// whose tensor died while such events are pending is freed with
// rill_free_host once they completed, at the next allocation, free or
// empty_host_cache. No block is cached for reuse: each allocation is one
// rill_malloc_host.
#include "pinned.h"

#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace torch_rill {
namespace {

// One rill_malloc_host allocation handed to PyTorch.
struct Block {
    void *ptr;
    size_t bytes;
    // guarded by State::lock: an event per stream that queued work on the
    // block, recorded after the latest such work (owned)
    std::vector<std::pair<rill_stream *, rill_event *>> uses;
};

// Invariants: live holds each block a tensor still owns, keyed by address;
// dying holds each dropped block whose uses have not all completed; a
// block is in at most one of them. stats.allocations counts both,
// stats.active_requests counts live.
struct State {
    std::mutex lock;
    std::map<uintptr_t, Block *> live;
    std::vector<Block *> dying;
    at::HostStats stats;
};

// Never destroyed: tensors may die after static destructors ran.
State &state() {
    static State *s = new State;
    return *s;
}

// Every use of b completed (or failed, or rill shut down: nothing runs).
bool idle_locked(const Block *b) {
    for (const auto &use : b->uses)
        if (rill_event_query(use.second) == RILL_NOT_READY)
            return false;
    return true;
}

void release_locked(State &s, Block *b) {
    for (const auto &use : b->uses)
        rill_event_destroy(use.second);
    // After rill_shutdown the memory is already gone and this refuses it.
    rill_free_host(b->ptr);
    s.stats.allocations.decrease(1);
    s.stats.allocated_bytes.decrease(b->bytes);
    s.stats.num_host_free++;
    delete b;
}

void reap_locked(State &s) {
    std::vector<Block *> still;
    for (Block *b : s.dying) {
        if (idle_locked(b))
            release_locked(s, b);
        else
            still.push_back(b);
    }
    s.dying.swap(still);
}

void free_pinned(void *ctx) {
    auto *b = static_cast<Block *>(ctx);
    if (!b)
        return;
    State &s = state();
    std::lock_guard<std::mutex> guard(s.lock);
    s.live.erase(reinterpret_cast<uintptr_t>(b->ptr));
    s.stats.active_requests.decrease(1);
    s.stats.active_bytes.decrease(b->bytes);
    reap_locked(s);
    if (idle_locked(b))
        release_locked(s, b);
    else
        s.dying.push_back(b);
}

Block *find_locked(State &s, const void *data) {
    auto at = reinterpret_cast<uintptr_t>(data);
    auto it = s.live.upper_bound(at);
    if (it == s.live.begin())
        return nullptr;
    --it;
    return at < it->first + it->second->bytes ? it->second : nullptr;
}

void record_use(Block *b, rill_stream *stream) {
    State &s = state();
    std::lock_guard<std::mutex> guard(s.lock);
    rill_event *event = nullptr;
    for (const auto &use : b->uses)
        if (use.first == stream)
            event = use.second;
    if (!event) {
        TORCH_RILL_CHECK(rill_event_create(RILL_EVENT_DEFAULT, &event));
        b->uses.emplace_back(stream, event);
    }
    TORCH_RILL_CHECK(rill_event_record(event, stream));
}

struct HostAllocator final : public at::HostAllocator {
    at::DataPtr allocate(size_t bytes) override {
        if (bytes == 0)
            return {nullptr, nullptr, &free_pinned, c10::Device(c10::kCPU)};
        State &s = state();
        {
            std::lock_guard<std::mutex> guard(s.lock);
            reap_locked(s);
        }
        void *ptr = nullptr;
        check(rill_malloc_host(bytes, &ptr), "torch_rill: allocating pinned host memory");
        auto *b = new Block{ptr, bytes, {}};
        std::lock_guard<std::mutex> guard(s.lock);
        s.live.emplace(reinterpret_cast<uintptr_t>(ptr), b);
        s.stats.allocations.increase(1);
        s.stats.allocated_bytes.increase(bytes);
        s.stats.active_requests.increase(1);
        s.stats.active_bytes.increase(bytes);
        s.stats.num_host_alloc++;
        return {ptr, b, &free_pinned, c10::Device(c10::kCPU)};
    }

    c10::DeleterFnPtr raw_deleter() const override {
        return nullptr; // the context (the block) is not the pointer
    }

    void copy_data(void *dest, const void *src, size_t count) const override {
        TORCH_RILL_CHECK(rill_memcpy(dest, src, count));
    }

    bool record_event(void *ptr, void *, c10::Stream stream) override {
        Block *b = nullptr;
        {
            State &s = state();
            std::lock_guard<std::mutex> guard(s.lock);
            b = find_locked(s, ptr);
        }
        if (!b)
            return false;
        record_use(b, unwrap(stream));
        return true;
    }

    // Frees the dropped blocks whose copies have completed.
    void empty_cache() override {
        State &s = state();
        std::lock_guard<std::mutex> guard(s.lock);
        reap_locked(s);
    }

    at::HostStats get_stats() override {
        State &s = state();
        std::lock_guard<std::mutex> guard(s.lock);
        return s.stats;
    }

    void reset_accumulated_stats() override {
        State &s = state();
        std::lock_guard<std::mutex> guard(s.lock);
        for (auto *stat : {&s.stats.allocations, &s.stats.allocated_bytes, &s.stats.active_requests,
                           &s.stats.active_bytes})
            stat->reset_accumulated();
        s.stats.num_host_alloc = 0;
        s.stats.num_host_free = 0;
    }

    void reset_peak_stats() override {
        State &s = state();
        std::lock_guard<std::mutex> guard(s.lock);
        for (auto *stat : {&s.stats.allocations, &s.stats.allocated_bytes, &s.stats.active_requests,
                           &s.stats.active_bytes})
            stat->reset_peak();
    }
};

HostAllocator allocator;

} // namespace

REGISTER_HOST_ALLOCATOR(c10::DeviceType::PrivateUse1, &allocator);

at::HostAllocator *host_allocator() {
    return &allocator;
}

bool is_pinned_ptr(const void *data) {
    State &s = state();
    std::lock_guard<std::mutex> guard(s.lock);
    return find_locked(s, data) != nullptr;
}

bool is_pinned_tensor(const at::Tensor &t) {
    return t.has_storage() && t.storage().data_ptr().get_deleter() == &free_pinned &&
           t.storage().data_ptr().get_context() != nullptr;
}

void record_pinned_use(const at::Tensor &t, rill_stream *stream) {
    TORCH_INTERNAL_ASSERT(is_pinned_tensor(t));
    record_use(static_cast<Block *>(t.storage().data_ptr().get_context()), stream);
}

} // namespace torch_rill
