// SPDX-License-Identifier: MIT
// Host waits that Ctrl-C ends: a wait runs in slices, and between slices
// the thread looks for a signal Python has received (only the main thread
// sees them), as PyTorch's own waits on CUDA do not but Python programs
// expect.
#include <Python.h>

#include <atomic>
#include <thread>

#include <pybind11/pybind11.h>

#include "runtime.h"

namespace torch_rill {
namespace {

constexpr uint64_t kSliceNs = 50 * 1000 * 1000;

// Python runs signal handlers in its main thread only; other threads (the
// autograd engine's) never take the GIL here.
std::atomic<std::thread::id> main_thread;

// True when a signal handler raised (KeyboardInterrupt is then the
// thread's Python error).
bool interrupted() {
    if (!Py_IsInitialized() || std::this_thread::get_id() != main_thread.load())
        return false;
    PyGILState_STATE gil = PyGILState_Ensure();
    bool raised = PyErr_CheckSignals() != 0;
    PyGILState_Release(gil);
    return raised;
}

} // namespace

void remember_main_thread() {
    main_thread.store(std::this_thread::get_id());
}

void wait_interruptibly(const char *call, const std::function<rill_status(uint64_t)> &wait) {
    for (;;) {
        rill_status status = wait(kSliceNs);
        if (status != RILL_NOT_READY) {
            check(status, call);
            return;
        }
        if (interrupted()) {
            pybind11::gil_scoped_acquire gil;
            throw pybind11::error_already_set();
        }
    }
}

} // namespace torch_rill
