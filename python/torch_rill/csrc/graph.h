// SPDX-License-Identifier: MIT
// Graphs: what the allocator (allocator.cpp) and the graph object
// (graph.cpp) share about captures that torch_rill runs.
#pragma once

#include <atomic>
#include <memory>
#include <utility>

#include "runtime.h"

namespace torch_rill {

// The memory of one capture. rill_malloc_async on a capturing stream gives
// memory that belongs to the capture's graph: the same address at every
// replay, released when the graph and its last exec are destroyed. The
// graph object and every tensor allocated in the capture hold this, so
// those tensors stay valid after the graph object is reset or deleted.
struct GraphMemory {
    explicit GraphMemory(c10::DeviceIndex index) : device(index) {}
    ~GraphMemory(); // destroys exec and graph
    GraphMemory(const GraphMemory &) = delete;
    GraphMemory &operator=(const GraphMemory &) = delete;

    const c10::DeviceIndex device;
    std::atomic<bool> capturing{true}; // until the capture ended or failed
    // Set by the graph object after the capture, read by nobody else.
    rill_graph *graph = nullptr;     // owned; NULL once instantiated unless kept
    rill_graph_exec *exec = nullptr; // owned
};

// The allocator serves the capture's allocations on capturing streams of
// its device from the graph's memory from capture_memory_begin until
// capture_memory_end, and defers frees of other memory meanwhile (a free of
// memory the capture uses is an unsafe call): capture_memory_end makes them
// once no capture is active.
void capture_memory_begin(const std::shared_ptr<GraphMemory> &memory);
void capture_memory_end(const std::shared_ptr<GraphMemory> &memory);

// torch.rill.graph_pool_handle(): a new pool id, as CUDA's.
std::pair<uint64_t, uint64_t> graph_pool_handle();

} // namespace torch_rill
