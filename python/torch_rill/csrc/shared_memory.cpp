// SPDX-License-Identifier: MIT
#include "shared_memory.h"

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <torch/extension.h>

#include "runtime.h"

namespace torch_rill {
namespace {

// A storage opened from another process's handle. Its release counts down
// the sender's counter (a slot of a CPU tensor in shared memory) once the
// mapping is closed, which tells the sender it may free the block.
struct Opened {
    void *ptr;
    at::Tensor counter;
    int64_t slot;
    std::string handle; // the sender's, which a send on passes along
};

// The open mappings by address, for sending them on.
std::mutex opened_lock;
std::unordered_map<void *, Opened *> opened; // guarded by opened_lock

// Mappings whose release came where rill may not wait (a kernel or host
// function), closed at the next open or collection.
std::mutex deferred_lock;
std::vector<Opened *> deferred; // guarded by deferred_lock

// Closes o's mapping (waiting for the work its device's streams have) and
// counts it released; false, leaving the mapping open, where rill may not
// wait.
bool close_opened(Opened *o) {
    {
        // Its storage died: nothing sends it on any more.
        std::lock_guard<std::mutex> guard(opened_lock);
        auto found = opened.find(o->ptr);
        if (found != opened.end() && found->second == o)
            opened.erase(found);
    }
    if (rill_ipc_close_mem_handle(o->ptr) == RILL_ERROR_NOT_PERMITTED)
        return false;
    // Any other failure (after rill_shutdown, at exit) has nothing to close.
    __atomic_fetch_sub(o->counter.data_ptr<int64_t>() + o->slot, 1, __ATOMIC_RELEASE);
    delete o;
    return true;
}

void release_opened(void *ctx) {
    auto *o = static_cast<Opened *>(ctx);
    if (!close_opened(o)) {
        std::lock_guard<std::mutex> guard(deferred_lock);
        deferred.push_back(o);
    }
}

void close_deferred() {
    std::vector<Opened *> now;
    {
        std::lock_guard<std::mutex> guard(deferred_lock);
        now.swap(deferred);
    }
    for (Opened *o : now)
        if (!close_opened(o)) {
            std::lock_guard<std::mutex> guard(deferred_lock);
            deferred.push_back(o);
        }
}

int64_t *counter_slot(const at::Tensor &counter, int64_t slot) {
    TORCH_CHECK(counter.device().is_cpu() && counter.scalar_type() == at::kLong &&
                    counter.is_contiguous() && slot >= 0 && slot < counter.numel(),
                "torch_rill: a release counter is a contiguous CPU int64 tensor and a slot in it");
    return counter.data_ptr<int64_t>() + slot;
}

py::bytes mem_handle(uintptr_t ptr) {
    rill_ipc_mem_handle handle;
    rill_status status = rill_ipc_get_mem_handle(reinterpret_cast<void *>(ptr), &handle);
    TORCH_CHECK(status != RILL_ERROR_INVALID_ARGUMENT,
                "torch.multiprocessing: this rill tensor's memory cannot be sent to another "
                "process: only memory that rill's allocator gave, or that came from another "
                "process, can be; send a clone()");
    check(status, "torch.multiprocessing: sending a rill tensor (rill_ipc_get_mem_handle)");
    return py::bytes(reinterpret_cast<const char *>(handle.bytes), sizeof handle.bytes);
}

at::Tensor open_storage(int index, const std::string &bytes, int64_t nbytes, at::Tensor counter,
                        int64_t slot) {
    close_deferred();
    counter_slot(counter, slot);
    rill_ipc_mem_handle handle;
    TORCH_CHECK(bytes.size() == sizeof handle.bytes, "torch_rill: a memory handle is ",
                sizeof handle.bytes, " bytes, not ", bytes.size());
    std::memcpy(handle.bytes, bytes.data(), sizeof handle.bytes);
    c10::Device dev(kDeviceType, static_cast<c10::DeviceIndex>(index));
    device(dev.index()); // a device of this process, or its error
    void *ptr = nullptr;
    check(rill_ipc_open_mem_handle(&handle, &ptr),
          "torch.multiprocessing: receiving a rill tensor (rill_ipc_open_mem_handle)");
    auto *o = new Opened{ptr, std::move(counter), slot, bytes};
    {
        std::lock_guard<std::mutex> guard(opened_lock);
        opened[ptr] = o;
    }
    c10::DataPtr data(ptr, o, release_opened, dev);
    c10::Storage storage(c10::Storage::use_byte_size_t(), nbytes, std::move(data), nullptr, false);
    return at::empty({0}, at::TensorOptions().dtype(at::kByte).device(dev)).set_(storage);
}

// For a storage opened from another process's handle: that handle, and
// its sender's counter and slot, counted up for one more receiver (the
// caller holds the storage, so the count is above 0 until that receiver
// closes its mapping). None for other memory.
py::object send_on(uintptr_t ptr) {
    std::lock_guard<std::mutex> guard(opened_lock);
    auto found = opened.find(reinterpret_cast<void *>(ptr));
    if (found == opened.end())
        return py::none();
    Opened *o = found->second;
    __atomic_fetch_add(o->counter.data_ptr<int64_t>() + o->slot, 1, __ATOMIC_RELAXED);
    return py::make_tuple(py::bytes(o->handle), o->counter, o->slot);
}

} // namespace

void define_shared_memory(py::module_ &m) {
    m.def("_ipc_mem_handle", &mem_handle);
    m.def("_ipc_open_storage", &open_storage);
    m.def("_ipc_send_on", &send_on);
    m.def("_ipc_count", [](const at::Tensor &counter, int64_t slot) {
        return __atomic_load_n(counter_slot(counter, slot), __ATOMIC_ACQUIRE);
    });
    m.def("_ipc_close_deferred", &close_deferred);
}

} // namespace torch_rill
