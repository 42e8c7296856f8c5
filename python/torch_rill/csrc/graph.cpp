// SPDX-License-Identifier: MIT
// Capture and replay for rill devices: PyTorch's device-generic graph
// (at::GraphImplInterface, so torch.accelerator.Graph and torch.rill's
// RillGraph) on rill's stream capture. A capture begins on the current
// stream of the current device; other streams join it by waiting on it
// (fork) and are joined back by the capturing stream waiting on them,
// before capture_end. The graph's memory is rill's graph memory (graph.h);
// what captured host functions need at every replay is kept by the
// capture (capture.h) until reset.
#include <atomic>
#include <string>

#include <ATen/core/GraphImplInterface.h>
#include <c10/util/Exception.h>

#include <Python.h>

#include "capture.h"
#include "graph.h"
#include "runtime.h"

namespace torch_rill {

GraphMemory::~GraphMemory() {
    // Calls after rill_shutdown (interpreter teardown) are refused, harmlessly.
    if (exec != nullptr)
        rill_graph_exec_destroy(exec);
    if (graph != nullptr)
        rill_graph_destroy(graph);
}

namespace {

std::atomic<uint64_t> next_pool{1};

rill_capture_mode capture_mode(at::GraphCaptureMode mode) {
    switch (mode) {
    case at::GraphCaptureMode::ThreadLocal:
        return RILL_CAPTURE_THREAD_LOCAL;
    case at::GraphCaptureMode::Relaxed:
        return RILL_CAPTURE_RELAXED;
    default: // Default and Global: PyTorch's default for CUDA is "global"
        return RILL_CAPTURE_GLOBAL;
    }
}

std::string last_error(rill_status status) {
    const char *why = rill_last_error();
    return std::string(rill_status_name(status)) + ": " +
           (why && *why ? why : rill_status_string(status));
}

class GraphImpl final : public at::GraphImplInterface {
  public:
    explicit GraphImpl(const at::GraphImplArgs &args) : keep_graph_(args.keep_graph) {}
    ~GraphImpl() override {
        try {
            reset();
        } catch (...) { // a destructor does not throw; reset's failures are reported there
        }
    }

    void capture_begin(at::MempoolId_t pool, at::GraphCaptureMode mode) override {
        TORCH_CHECK(!capturing_, "capture_begin: this graph is capturing already; call "
                                 "capture_end (or reset) first");
        TORCH_CHECK(!memory_, "capture_begin: this graph holds a capture already; call reset() "
                              "to capture again, or use another graph");
        c10::DeviceIndex index = current_device();
        rill_stream *stream = rill_current_stream(device(index));
        TORCH_CHECK(stream, rill_last_error());
        TORCH_CHECK(!is_capturing(stream),
                    "capture_begin: the current stream is capturing already (another graph's "
                    "capture); end that capture first, or capture on another stream");
        auto memory = std::make_shared<GraphMemory>(index);
        auto keep = capture_keep_begin(index);
        capture_memory_begin(memory);
        rill_status st = rill_stream_begin_capture(stream, capture_mode(mode));
        if (st != RILL_OK) {
            std::string why = last_error(st);
            capture_memory_end(memory);
            capture_keep_end(keep);
            TORCH_CHECK(false, "capture_begin: rill_stream_begin_capture: ", why);
        }
        memory_ = std::move(memory);
        keep_ = std::move(keep);
        stream_ = stream;
        capturing_ = true;
        pool_ = pool.first != 0 || pool.second != 0 ? pool : at::MempoolId_t{next_pool++, 0};
    }

    void capture_end() override {
        TORCH_CHECK(capturing_, "capture_end: this graph has no capture begun; call "
                                "capture_begin first");
        rill_graph *graph = nullptr;
        rill_status st = rill_stream_end_capture(stream_, &graph);
        // From another thread than the beginning one, the capture goes on.
        if (st == RILL_ERROR_CAPTURE_WRONG_THREAD)
            TORCH_CHECK(false, "capture_end: rill_stream_end_capture: ", last_error(st));
        std::string why = st == RILL_OK ? "" : last_error(st);
        capturing_ = false;
        capture_memory_end(memory_);
        capture_keep_end(keep_);
        if (st != RILL_OK) {
            // No graph: the allocations of the capture went with it.
            memory_.reset();
            keep_.reset();
            TORCH_CHECK(false,
                        "capture_end: the capture failed, and this graph holds nothing "
                        "(capture again after fixing the cause): rill_stream_end_capture: ",
                        why);
        }
        memory_->graph = graph;
        if (!keep_graph_)
            instantiate();
    }

    void instantiate() override {
        TORCH_CHECK(memory_ && !capturing_,
                    "instantiate: this graph holds no capture; capture one first");
        TORCH_CHECK(memory_->graph, "instantiate: the graph was instantiated already and not "
                                    "kept (keep_graph=False)");
        if (memory_->exec != nullptr) {
            rill_graph_exec_destroy(memory_->exec);
            memory_->exec = nullptr;
        }
        TORCH_RILL_CHECK(rill_graph_instantiate(memory_->graph, &memory_->exec));
        if (!keep_graph_ && !debug_) {
            rill_graph_destroy(memory_->graph);
            memory_->graph = nullptr;
        }
    }

    void replay() override {
        TORCH_CHECK(!capturing_, "replay: this graph is still capturing; call capture_end first");
        TORCH_CHECK(memory_, "replay: this graph holds no capture (it was reset, or never "
                             "captured); capture it again before replaying");
        if (memory_->exec == nullptr)
            instantiate(); // keep_graph=True: instantiated at the first replay
        rill_stream *stream = rill_current_stream(device(memory_->device));
        TORCH_CHECK(stream, rill_last_error());
        TORCH_RILL_CHECK(rill_graph_launch(memory_->exec, stream));
        if (keep_ && !keep_->objects.empty()) {
            // What the launch's host functions use is released after it ran.
            if (done_ == nullptr)
                TORCH_RILL_CHECK(rill_event_create(RILL_EVENT_DEFAULT, &done_));
            TORCH_RILL_CHECK(rill_event_record(done_, stream));
        }
    }

    void reset() override {
        if (capturing_) {
            // A capture abandoned (an exception in the captured code): ended
            // and discarded, when this thread may end it.
            rill_graph *graph = nullptr;
            if (rill_stream_end_capture(stream_, &graph) == RILL_OK && graph != nullptr)
                rill_graph_destroy(graph);
            capturing_ = false;
            capture_memory_end(memory_);
            capture_keep_end(keep_);
        }
        release_keep();
        memory_.reset(); // tensors allocated in the capture may still hold it
        stream_ = nullptr;
    }

    at::MempoolId_t pool() const override {
        TORCH_CHECK(memory_ || capturing_,
                    "pool: this graph has no capture; pool() is known from capture_begin on");
        return pool_;
    }

    void enable_debug_mode() override {
        debug_ = true;
    }

    void debug_dump(const std::string &path) override {
        TORCH_CHECK(memory_ && !capturing_, "debug_dump: this graph holds no capture");
        TORCH_CHECK(memory_->graph, "debug_dump: the graph was not kept after instantiation; "
                                    "call enable_debug_mode() before capture_end (or make the "
                                    "graph with keep_graph=True)");
        TORCH_RILL_CHECK(rill_graph_write_dot(memory_->graph, path.c_str()));
    }

  private:
    // Drops what captured host functions needed, once the replays that may
    // still run them have: a wait, with Python's lock released (a host
    // function may want it).
    void release_keep() {
        if (done_ != nullptr) {
            rill_event *done = done_;
            done_ = nullptr;
            if (rill_event_query(done) == RILL_NOT_READY) {
                PyThreadState *state =
                    Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
                rill_event_synchronize(done);
                if (state != nullptr)
                    PyEval_RestoreThread(state);
            }
            rill_event_destroy(done);
        }
        keep_.reset();
    }

    const bool keep_graph_;
    bool debug_ = false;
    bool capturing_ = false;
    std::shared_ptr<GraphMemory> memory_; // the capture's; shared with its tensors
    std::shared_ptr<CaptureKeep> keep_;   // what replays' host functions use
    rill_stream *stream_ = nullptr;       // borrowed: the capture's origin
    rill_event *done_ = nullptr;          // owned: recorded after the last replay
    at::MempoolId_t pool_{0, 0};
};

} // namespace

std::pair<uint64_t, uint64_t> graph_pool_handle() {
    return {0, next_pool++};
}

} // namespace torch_rill

namespace at {
// The registry's key is c10::DeviceTypeName(PrivateUse1, false): the
// renamed backend's name in capitals once torch_rill is imported.
C10_REGISTER_TYPED_CLASS(GraphImplRegistry, "RILL", torch_rill::GraphImpl)
} // namespace at
