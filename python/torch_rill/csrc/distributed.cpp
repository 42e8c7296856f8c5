// SPDX-License-Identifier: MIT
// torch.distributed's backend "rill" over librill_mpi. Each device has a
// communication stream of the backend (as ProcessGroupNCCL has NCCL
// streams): a collective makes it wait for an event recorded on the
// current stream, queues the rill collective there, and records an event
// after it. Work::wait() makes the current stream wait for that event
// without blocking the host; the Work's future is completed at once with
// events of the communication stream, so DDP's reducer and comm hooks
// order their work after the collective the same way. Tensor memory needs
// no record_stream: rill's pool sees the collective's accesses on the
// communication stream (rill_mpi.h: buffers are declared accesses).
// CPU tensors go through a rill tensor of the backend's device, and their
// collectives are complete when the call returns.
#define OMPI_SKIP_MPICXX  1
#define MPICH_SKIP_MPICXX 1
#include <rill_mpi.h>

#include <map>
#include <mutex>
#include <set>

#include <ATen/core/ivalue.h>
#include <pybind11/stl.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/extension.h>

#include "distributed.h"
#include "runtime.h"

namespace torch_rill {
namespace {

class RillBackend;

std::mutex registry_lock;
std::set<RillBackend *> live_backends; // guarded by registry_lock
bool mpi_started_here = false;         // guarded by registry_lock
int thread_level = MPI_THREAD_SINGLE;  // MPI's; guarded by registry_lock
int world_rank = -1, world_size = -1;  // MPI_COMM_WORLD's; guarded by registry_lock
constexpr int kGroupTag = 0x7269;      // MPI_Comm_create_group's tag for subgroups

const char *reduce_op_name(c10d::ReduceOp::RedOpType op) {
    switch (op) {
    case c10d::ReduceOp::SUM:
        return "SUM";
    case c10d::ReduceOp::AVG:
        return "AVG";
    case c10d::ReduceOp::PRODUCT:
        return "PRODUCT";
    case c10d::ReduceOp::MIN:
        return "MIN";
    case c10d::ReduceOp::MAX:
        return "MAX";
    case c10d::ReduceOp::BAND:
        return "BAND";
    case c10d::ReduceOp::BOR:
        return "BOR";
    case c10d::ReduceOp::BXOR:
        return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
        return "PREMUL_SUM";
    default:
        return "an unknown ReduceOp";
    }
}

rill_reduce_op reduce_op(const c10d::ReduceOp &op, const char *call) {
    switch (op.op_) {
    case c10d::ReduceOp::SUM:
        return RILL_REDUCE_SUM;
    case c10d::ReduceOp::AVG:
        return RILL_REDUCE_AVG;
    case c10d::ReduceOp::MIN:
        return RILL_REDUCE_MIN;
    case c10d::ReduceOp::MAX:
        return RILL_REDUCE_MAX;
    case c10d::ReduceOp::PRODUCT:
        return RILL_REDUCE_PROD;
    default:
        break;
    }
    TORCH_CHECK_NOT_IMPLEMENTED(false, "the rill backend's ", call,
                                " supports ReduceOp.SUM, AVG, MIN, MAX and PRODUCT (librill_mpi's "
                                "rill_reduce_op), not ",
                                reduce_op_name(op.op_));
}

// torch's name of a dtype ("int64"), as Python prints it.
std::string dtype_name(at::ScalarType t) {
    switch (t) {
    case at::kFloat:
        return "float32";
    case at::kDouble:
        return "float64";
    case at::kHalf:
        return "float16";
    case at::kBFloat16:
        return "bfloat16";
    case at::kLong:
        return "int64";
    case at::kInt:
        return "int32";
    case at::kShort:
        return "int16";
    case at::kChar:
        return "int8";
    case at::kByte:
        return "uint8";
    case at::kBool:
        return "bool";
    case at::kComplexFloat:
        return "complex64";
    case at::kComplexDouble:
        return "complex128";
    default:
        return c10::toString(t);
    }
}

void check_device_tensor(const at::Tensor &t, const char *call) {
    TORCH_CHECK(t.device().type() == kDeviceType, "the rill backend's ", call,
                " takes tensors of rill devices (and CPU tensors), not of ", t.device());
    TORCH_CHECK(t.is_contiguous(), "the rill backend's ", call,
                " takes contiguous tensors; call .contiguous() first");
}

// The dtypes that reductions take: float32, float64, int32 and int64 in
// their own arithmetic (rill_allreduce_f32, rill_allreduce), float16 and
// bfloat16 through float32; an average of integers is refused.
void check_reducible(const at::Tensor &t, rill_reduce_op op, const char *call) {
    at::ScalarType d = t.scalar_type();
    bool integer = d == at::kInt || d == at::kLong;
    TORCH_CHECK_TYPE(integer || d == at::kFloat || d == at::kDouble || d == at::kHalf ||
                         d == at::kBFloat16,
                     "the rill backend's ", call,
                     " reduces float32, float64, float16, bfloat16, int32 and int64 tensors, "
                     "not torch.",
                     dtype_name(d), "; convert to one of them first");
    TORCH_CHECK(!integer || op != RILL_REDUCE_AVG, "the rill backend's ", call,
                " has no ReduceOp.AVG of torch.", dtype_name(d),
                " (no exact result): reduce with SUM and divide, or convert to a float dtype");
}

void check_single(size_t n, const char *call) {
    TORCH_CHECK(n == 1, "the rill backend's ", call, " takes one tensor per call, not ", n);
}

c10::DeviceIndex common_device(const std::vector<at::Tensor> &ts, const char *call) {
    TORCH_CHECK(!ts.empty(), "the rill backend's ", call, " got no tensors");
    c10::Device d = ts[0].device();
    for (const at::Tensor &t : ts)
        TORCH_CHECK(t.device() == d, "the rill backend's ", call,
                    " takes tensors of one device; got ", d, " and ", t.device());
    return d.index();
}

bool any_cpu(const std::vector<at::Tensor> &ts) {
    for (const at::Tensor &t : ts)
        if (t.is_cpu())
            return true;
    return false;
}

// A rill event the scope owns.
struct OwnedEvent {
    rill_event *event = nullptr;
    OwnedEvent() {
        TORCH_RILL_CHECK(rill_event_create(0, &event));
    }
    ~OwnedEvent() {
        if (event != nullptr)
            rill_event_destroy(event);
    }
    rill_event *release() {
        rill_event *e = event;
        event = nullptr;
        return e;
    }
    OwnedEvent(const OwnedEvent &) = delete;
    OwnedEvent &operator=(const OwnedEvent &) = delete;
};

// Makes stream current and names the commands the thread submits until the
// scope ends (traces read "c10d::allreduce (allreduce)").
struct OnStream {
    c10::Stream previous;
    const char *op_name;
    OnStream(rill_stream *stream, const char *name)
        : previous(exchange_stream(wrap(stream))), op_name(name) {
        rill_thread_exchange_op_name(&op_name);
    }
    ~OnStream() {
        rill_thread_exchange_op_name(&op_name);
        exchange_stream(previous);
    }
    OnStream(const OnStream &) = delete;
    OnStream &operator=(const OnStream &) = delete;
};

class RillWork final : public c10d::Work {
  public:
    RillWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs, c10::DeviceIndex index,
             rill_event *done, bool host_wait, c10::intrusive_ptr<c10::ivalue::Future> future)
        : c10d::Work(rank, type), outputs_(std::move(outputs)), index_(index), done_(done),
          host_wait_(host_wait), future_(std::move(future)) {}
    ~RillWork() override {
        if (done_ != nullptr)
            rill_event_destroy(done_);
    }

    bool isCompleted() override {
        return done_ == nullptr || rill_event_query(done_) != RILL_NOT_READY;
    }
    bool isSuccess() const override {
        return done_ == nullptr || rill_event_query(done_) == RILL_OK;
    }
    // The current stream of the device waits for the collective: later
    // work queued there runs after it; the host does not wait.
    void synchronize() override {
        if (done_ == nullptr)
            return;
        TORCH_RILL_CHECK(rill_stream_wait_event(unwrap(current_stream(index_)), done_));
    }
    bool wait(std::chrono::milliseconds /*timeout*/) override {
        synchronize();
        if (host_wait_ && done_ != nullptr) {
            rill_event *done = done_;
            wait_interruptibly("rill_event_synchronize_for (barrier)", [done](uint64_t ns) {
                return rill_event_synchronize_for(done, ns);
            });
        }
        return true;
    }
    std::vector<at::Tensor> result() override {
        return outputs_;
    }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
        return future_;
    }

  private:
    std::vector<at::Tensor> outputs_;
    c10::DeviceIndex index_;
    rill_event *done_; // owned; nullptr: complete when made (CPU tensors)
    bool host_wait_;   // wait() blocks the host too (barrier)
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A Work already complete (CPU tensors): its future holds outputs.
c10::intrusive_ptr<c10d::Work> completed_work(int rank, c10d::OpType type,
                                              std::vector<at::Tensor> outputs) {
    auto future =
        c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()));
    future->markCompleted(c10::IValue(outputs));
    return c10::make_intrusive<RillWork>(rank, type, std::move(outputs), -1, nullptr, false,
                                         std::move(future));
}

class RillBackend final : public c10d::Backend {
  public:
    RillBackend(int rank, int size, rill_comm *comm) : c10d::Backend(rank, size), comm_(comm) {
        std::lock_guard<std::mutex> guard(registry_lock);
        live_backends.insert(this);
    }
    ~RillBackend() override {
        {
            std::lock_guard<std::mutex> guard(registry_lock);
            live_backends.erase(this);
        }
        close();
    }

    const std::string getBackendName() const override {
        return "rill";
    }

    // Waits for the collectives queued on the communication streams.
    void synchronize_streams() noexcept {
        std::lock_guard<std::mutex> guard(lock_);
        for (auto &entry : streams_)
            rill_stream_synchronize(entry.second);
    }

    // Destroys the communicator (waiting for its collectives) and the
    // communication streams; collectives after it raise.
    void close() noexcept {
        std::lock_guard<std::mutex> guard(lock_);
        if (comm_ != nullptr)
            rill_comm_destroy(comm_);
        comm_ = nullptr;
        for (auto &entry : streams_) {
            rill_stream_synchronize(entry.second);
            rill_stream_destroy(entry.second);
        }
        streams_.clear();
    }

    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &opts) override {
        check_single(tensors.size(), "allreduce");
        if (tensors[0].is_cpu())
            return on_host(c10d::OpType::ALLREDUCE, tensors, {},
                           [&](auto &dev, auto &) { return allreduce(dev, opts); });
        return allreduce_many(tensors, opts.reduceOp, "allreduce", c10d::OpType::ALLREDUCE);
    }

    c10::intrusive_ptr<c10d::Work>
    allreduce_coalesced(std::vector<at::Tensor> &tensors,
                        const c10d::AllreduceCoalescedOptions &opts) override {
        if (any_cpu(tensors))
            return on_host(c10d::OpType::ALLREDUCE_COALESCED, tensors, {},
                           [&](auto &dev, auto &) { return allreduce_coalesced(dev, opts); });
        return allreduce_many(tensors, opts.reduceOp, "allreduce_coalesced",
                              c10d::OpType::ALLREDUCE_COALESCED);
    }

    c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
                                             const c10d::BroadcastOptions &opts) override {
        check_single(tensors.size(), "broadcast");
        TORCH_CHECK(opts.rootTensor == 0, "the rill backend's broadcast takes one tensor per call");
        if (tensors[0].is_cpu())
            return on_host(c10d::OpType::BROADCAST, tensors, {},
                           [&](auto &dev, auto &) { return broadcast(dev, opts); });
        at::Tensor t = tensors[0];
        check_device_tensor(t, "broadcast");
        int root = static_cast<int>(opts.rootRank);
        return run(c10d::OpType::BROADCAST, "c10d::broadcast", t.device().index(), tensors,
                   [&](rill_stream *s) {
                       TORCH_RILL_CHECK(rill_broadcast(s, comm_, t.data_ptr(), t.nbytes(), root));
                   });
    }

    c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
                                             std::vector<at::Tensor> &inputs,
                                             const c10d::AllgatherOptions &opts) override {
        check_single(inputs.size(), "allgather");
        check_single(outputs.size(), "allgather");
        std::vector<at::Tensor> &outs = outputs[0];
        TORCH_CHECK(static_cast<int>(outs.size()) == size_, "the rill backend's allgather needs ",
                    size_, " output tensors (one per rank), got ", outs.size());
        const at::Tensor in = inputs[0];
        for (const at::Tensor &o : outs)
            TORCH_CHECK(o.numel() == in.numel() && o.scalar_type() == in.scalar_type(),
                        "the rill backend's allgather needs outputs of the input's numel (",
                        in.numel(), ") and dtype (", dtype_name(in.scalar_type()), ")");
        if (in.is_cpu() || any_cpu(outs))
            return on_host(c10d::OpType::ALLGATHER, inputs, outs, [&](auto &dev_in, auto &dev_out) {
                std::vector<std::vector<at::Tensor>> lists{dev_out};
                return allgather(lists, dev_in, opts);
            });
        check_device_tensor(in, "allgather");
        c10::DeviceIndex index = common_device(outs, "allgather");
        TORCH_CHECK(index == in.device().index(), "the rill backend's allgather takes tensors of "
                                                  "one device");
        return run(c10d::OpType::ALLGATHER, "c10d::allgather", index, outs, [&](rill_stream *s) {
            // Into one buffer of the communication stream, then the outputs.
            at::Tensor flat = at::empty({size_ * in.numel()}, in.options());
            TORCH_RILL_CHECK(rill_allgather(s, comm_, flat.data_ptr(), in.data_ptr(), in.nbytes()));
            for (int r = 0; r < size_; r++)
                outs[r].copy_(flat.narrow(0, r * in.numel(), in.numel()).view(outs[r].sizes()));
        });
    }

    c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
                                                   const c10d::AllgatherOptions &opts) override {
        TORCH_CHECK(output.numel() == input.numel() * size_ &&
                        output.scalar_type() == input.scalar_type(),
                    "the rill backend's allgather_into_tensor needs an output of ", size_,
                    " times the input's numel (", input.numel(), ") and its dtype (",
                    dtype_name(input.scalar_type()), "), got ", output.numel(), " of ",
                    dtype_name(output.scalar_type()));
        if (input.is_cpu() || output.is_cpu()) {
            std::vector<at::Tensor> ins{input}, outs{output};
            return on_host(c10d::OpType::_ALLGATHER_BASE, ins, outs,
                           [&](auto &dev_in, auto &dev_out) {
                               return _allgather_base(dev_out[0], dev_in[0], opts);
                           });
        }
        check_device_tensor(input, "allgather_into_tensor");
        check_device_tensor(output, "allgather_into_tensor");
        return run(c10d::OpType::_ALLGATHER_BASE, "c10d::allgather_into_tensor",
                   common_device({input, output}, "allgather_into_tensor"), {output},
                   [&](rill_stream *s) {
                       TORCH_RILL_CHECK(rill_allgather(s, comm_, output.data_ptr(),
                                                       input.data_ptr(), input.nbytes()));
                   });
    }

    c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor> &outputs,
                                                  std::vector<std::vector<at::Tensor>> &inputs,
                                                  const c10d::ReduceScatterOptions &opts) override {
        check_single(outputs.size(), "reduce_scatter");
        check_single(inputs.size(), "reduce_scatter");
        std::vector<at::Tensor> &ins = inputs[0];
        const at::Tensor out = outputs[0];
        TORCH_CHECK(static_cast<int>(ins.size()) == size_,
                    "the rill backend's reduce_scatter needs ", size_,
                    " input tensors (one per rank), got ", ins.size());
        for (const at::Tensor &i : ins)
            TORCH_CHECK(i.numel() == out.numel(),
                        "the rill backend's reduce_scatter needs inputs "
                        "of the output's numel (",
                        out.numel(), ")");
        if (out.is_cpu() || any_cpu(ins))
            return on_host(c10d::OpType::REDUCE_SCATTER, ins, outputs,
                           [&](auto &dev_in, auto &dev_out) {
                               std::vector<std::vector<at::Tensor>> lists{dev_in};
                               return reduce_scatter(dev_out, lists, opts);
                           });
        check_device_tensor(out, "reduce_scatter");
        rill_reduce_op op = reduce_op(opts.reduceOp, "reduce_scatter");
        check_reducible(out, op, "reduce_scatter");
        for (const at::Tensor &i : ins)
            TORCH_CHECK_TYPE(i.scalar_type() == out.scalar_type(),
                             "the rill backend's reduce_scatter takes inputs of the output's "
                             "dtype (",
                             dtype_name(out.scalar_type()), "), not ", dtype_name(i.scalar_type()));
        c10::DeviceIndex index = common_device(ins, "reduce_scatter");
        TORCH_CHECK(index == out.device().index(), "the rill backend's reduce_scatter takes "
                                                   "tensors of one device");
        return run(c10d::OpType::REDUCE_SCATTER, "c10d::reduce_scatter", index, outputs,
                   [&](rill_stream *s) {
                       at::Tensor flat = at::empty({size_ * out.numel()}, out.options());
                       for (int r = 0; r < size_; r++)
                           flat.narrow(0, r * out.numel(), out.numel())
                               .copy_(ins[r].reshape({out.numel()}));
                       reduce_scatter_into(s, out, flat, op);
                   });
    }

    c10::intrusive_ptr<c10d::Work>
    _reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                         const c10d::ReduceScatterOptions &opts) override {
        TORCH_CHECK(input.numel() == output.numel() * size_,
                    "the rill backend's reduce_scatter_tensor needs an input of ", size_,
                    " times the output's numel (", output.numel(), "), got ", input.numel());
        if (input.is_cpu() || output.is_cpu()) {
            std::vector<at::Tensor> ins{input}, outs{output};
            return on_host(c10d::OpType::_REDUCE_SCATTER_BASE, ins, outs,
                           [&](auto &dev_in, auto &dev_out) {
                               return _reduce_scatter_base(dev_out[0], dev_in[0], opts);
                           });
        }
        check_device_tensor(input, "reduce_scatter_tensor");
        check_device_tensor(output, "reduce_scatter_tensor");
        rill_reduce_op op = reduce_op(opts.reduceOp, "reduce_scatter_tensor");
        check_reducible(output, op, "reduce_scatter_tensor");
        TORCH_CHECK_TYPE(input.scalar_type() == output.scalar_type(),
                         "the rill backend's reduce_scatter_tensor takes an input of the "
                         "output's dtype (",
                         dtype_name(output.scalar_type()), "), not ",
                         dtype_name(input.scalar_type()));
        return run(c10d::OpType::_REDUCE_SCATTER_BASE, "c10d::reduce_scatter_tensor",
                   common_device({input, output}, "reduce_scatter_tensor"), {output},
                   [&](rill_stream *s) { reduce_scatter_into(s, output, input, op); });
    }

    // An allreduce kept at the root: the other ranks reduce into a scratch
    // tensor, so that their tensor is left as it was.
    c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
                                          const c10d::ReduceOptions &opts) override {
        check_single(tensors.size(), "reduce");
        TORCH_CHECK(opts.rootTensor == 0, "the rill backend's reduce takes one tensor per call");
        int root = check_root(opts.rootRank, "reduce");
        if (tensors[0].is_cpu())
            return on_host(c10d::OpType::REDUCE, tensors, {},
                           [&](auto &dev, auto &) { return reduce(dev, opts); });
        at::Tensor t = tensors[0];
        check_device_tensor(t, "reduce");
        rill_reduce_op op = reduce_op(opts.reduceOp, "reduce");
        check_reducible(t, op, "reduce");
        return run(c10d::OpType::REDUCE, "c10d::reduce", t.device().index(), tensors,
                   [&](rill_stream *s) {
                       allreduce_into(s, rank_ == root ? t : at::empty_like(t), t, op);
                   });
    }

    // Each rank sends its tensor to the root, which receives them in rank
    // order.
    c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
                                          std::vector<at::Tensor> &inputs,
                                          const c10d::GatherOptions &opts) override {
        check_single(inputs.size(), "gather");
        int root = check_root(opts.rootRank, "gather");
        const at::Tensor in = inputs[0];
        std::vector<at::Tensor> outs;
        if (rank_ == root) {
            check_single(outputs.size(), "gather");
            outs = outputs[0];
            check_per_rank(outs, in, "gather", "gather_list");
        } else {
            TORCH_CHECK(outputs.empty() || outputs[0].empty(), "the rill backend's gather takes a "
                                                               "gather_list on the dst rank only");
        }
        if (in.is_cpu() || any_cpu(outs))
            return on_host(c10d::OpType::GATHER, inputs, outs, [&](auto &dev_in, auto &dev_out) {
                std::vector<std::vector<at::Tensor>> lists;
                if (rank_ == root)
                    lists.push_back(dev_out);
                return gather(lists, dev_in, opts);
            });
        check_device_tensor(in, "gather");
        for (const at::Tensor &o : outs)
            check_device_tensor(o, "gather");
        outs.push_back(in);
        c10::DeviceIndex index = common_device(outs, "gather");
        outs.pop_back();
        return run(c10d::OpType::GATHER, "c10d::gather", index, outs, [&](rill_stream *s) {
            if (rank_ != root) {
                TORCH_RILL_CHECK(rill_send(s, comm_, in.data_ptr(), in.nbytes(), root));
                return;
            }
            for (int r = 0; r < size_; r++)
                if (r == root)
                    outs[r].copy_(in.reshape(outs[r].sizes()));
                else
                    TORCH_RILL_CHECK(rill_recv(s, comm_, outs[r].data_ptr(), outs[r].nbytes(), r));
        });
    }

    // The root sends each rank its tensor, in rank order.
    c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
                                           std::vector<std::vector<at::Tensor>> &inputs,
                                           const c10d::ScatterOptions &opts) override {
        check_single(outputs.size(), "scatter");
        int root = check_root(opts.rootRank, "scatter");
        const at::Tensor out = outputs[0];
        std::vector<at::Tensor> ins;
        if (rank_ == root) {
            check_single(inputs.size(), "scatter");
            ins = inputs[0];
            check_per_rank(ins, out, "scatter", "scatter_list");
        } else {
            TORCH_CHECK(inputs.empty() || inputs[0].empty(), "the rill backend's scatter takes a "
                                                             "scatter_list on the src rank only");
        }
        if (out.is_cpu() || any_cpu(ins))
            return on_host(c10d::OpType::SCATTER, ins, outputs, [&](auto &dev_in, auto &dev_out) {
                std::vector<std::vector<at::Tensor>> lists;
                if (rank_ == root)
                    lists.push_back(dev_in);
                return scatter(dev_out, lists, opts);
            });
        check_device_tensor(out, "scatter");
        for (const at::Tensor &i : ins)
            check_device_tensor(i, "scatter");
        ins.push_back(out);
        c10::DeviceIndex index = common_device(ins, "scatter");
        ins.pop_back();
        return run(c10d::OpType::SCATTER, "c10d::scatter", index, outputs, [&](rill_stream *s) {
            if (rank_ != root) {
                TORCH_RILL_CHECK(rill_recv(s, comm_, out.data_ptr(), out.nbytes(), root));
                return;
            }
            for (int r = 0; r < size_; r++)
                if (r == root)
                    out.copy_(ins[r].reshape(out.sizes()));
                else
                    TORCH_RILL_CHECK(rill_send(s, comm_, ins[r].data_ptr(), ins[r].nbytes(), r));
        });
    }

    // all_to_all_single: rows of dim 0, split evenly or by the split sizes.
    c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
                                                 std::vector<int64_t> &output_splits,
                                                 std::vector<int64_t> &input_splits,
                                                 const c10d::AllToAllOptions &opts) override {
        const char *call = "all_to_all_single";
        TORCH_CHECK(input.dim() > 0 && output.dim() > 0, "the rill backend's ", call,
                    " splits dim 0, and a tensor has none");
        TORCH_CHECK(input.scalar_type() == output.scalar_type(), "the rill backend's ", call,
                    " takes an input and an output of one dtype, not ",
                    dtype_name(input.scalar_type()), " and ", dtype_name(output.scalar_type()));
        std::vector<int64_t> in_rows = split_rows(input, input_splits, call, "input");
        std::vector<int64_t> out_rows = split_rows(output, output_splits, call, "output");
        if (input.is_cpu() || output.is_cpu()) {
            std::vector<at::Tensor> ins{input}, outs{output};
            return on_host(
                c10d::OpType::ALLTOALL_BASE, ins, outs, [&](auto &dev_in, auto &dev_out) {
                    return alltoall_base(dev_out[0], dev_in[0], output_splits, input_splits, opts);
                });
        }
        check_device_tensor(input, call);
        check_device_tensor(output, call);
        size_t in_row = input.numel() == 0 ? 0 : input.nbytes() / input.size(0);
        size_t out_row = output.numel() == 0 ? 0 : output.nbytes() / output.size(0);
        std::vector<Part> sends, recvs;
        char *in_p = static_cast<char *>(input.data_ptr());
        char *out_p = static_cast<char *>(output.data_ptr());
        for (int r = 0; r < size_; r++) {
            sends.push_back({in_p, in_row * in_rows[r]});
            recvs.push_back({out_p, out_row * out_rows[r]});
            in_p += in_row * in_rows[r];
            out_p += out_row * out_rows[r];
        }
        return run(c10d::OpType::ALLTOALL_BASE, "c10d::all_to_all_single",
                   common_device({input, output}, call), {output},
                   [&](rill_stream *s) { exchange(s, sends, recvs, call); });
    }

    // all_to_all: rank r's input_list[k] becomes rank k's output_list[r].
    c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
                                            std::vector<at::Tensor> &inputs,
                                            const c10d::AllToAllOptions &opts) override {
        const char *call = "all_to_all";
        TORCH_CHECK(static_cast<int>(inputs.size()) == size_ &&
                        static_cast<int>(outputs.size()) == size_,
                    "the rill backend's all_to_all needs ", size_,
                    " input and output tensors (one per rank), got ", inputs.size(), " and ",
                    outputs.size());
        for (int r = 0; r < size_; r++)
            TORCH_CHECK(inputs[r].scalar_type() == outputs[r].scalar_type(),
                        "the rill backend's all_to_all takes inputs and outputs of one dtype, "
                        "not ",
                        dtype_name(inputs[r].scalar_type()), " and ",
                        dtype_name(outputs[r].scalar_type()));
        if (any_cpu(inputs) || any_cpu(outputs))
            return on_host(
                c10d::OpType::ALLTOALL, inputs, outputs,
                [&](auto &dev_in, auto &dev_out) { return alltoall(dev_out, dev_in, opts); });
        std::vector<Part> sends, recvs;
        for (int r = 0; r < size_; r++) {
            check_device_tensor(inputs[r], call);
            check_device_tensor(outputs[r], call);
            sends.push_back({static_cast<char *>(inputs[r].data_ptr()), inputs[r].nbytes()});
            recvs.push_back({static_cast<char *>(outputs[r].data_ptr()), outputs[r].nbytes()});
        }
        std::vector<at::Tensor> all = inputs;
        all.insert(all.end(), outputs.begin(), outputs.end());
        return run(c10d::OpType::ALLTOALL, "c10d::all_to_all", common_device(all, call), outputs,
                   [&](rill_stream *s) { exchange(s, sends, recvs, call); });
    }

    // An allreduce of one float on the backend's device; wait() blocks the
    // host until every rank reached it.
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override {
        c10::DeviceIndex index = opts.device && opts.device->type() == kDeviceType
                                     ? opts.device->index()
                                     : host_device();
        at::Tensor token = at::zeros(
            {1}, at::TensorOptions().dtype(at::kFloat).device(c10::Device(kDeviceType, index)));
        return run(
            c10d::OpType::BARRIER, "c10d::barrier", index, {},
            [&](rill_stream *s) {
                TORCH_RILL_CHECK(rill_allreduce_f32(s, comm_, token.data_ptr<float>(),
                                                    token.data_ptr<float>(), 1, RILL_REDUCE_SUM));
            },
            true);
    }

    c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                        int /*tag*/) override {
        check_single(tensors.size(), "send");
        if (tensors[0].is_cpu())
            return on_host(c10d::OpType::SEND, tensors, {},
                           [&](auto &dev, auto &) { return send(dev, dst, 0); });
        at::Tensor t = tensors[0];
        check_device_tensor(t, "send");
        return run(c10d::OpType::SEND, "c10d::send", t.device().index(), tensors,
                   [&](rill_stream *s) {
                       TORCH_RILL_CHECK(rill_send(s, comm_, t.data_ptr(), t.nbytes(), dst));
                   });
    }

    c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                        int /*tag*/) override {
        check_single(tensors.size(), "recv");
        if (tensors[0].is_cpu())
            return on_host(c10d::OpType::RECV, {}, tensors,
                           [&](auto &, auto &dev) { return recv(dev, src, 0); });
        at::Tensor t = tensors[0];
        check_device_tensor(t, "recv");
        return run(c10d::OpType::RECV, "c10d::recv", t.device().index(), tensors,
                   [&](rill_stream *s) {
                       TORCH_RILL_CHECK(rill_recv(s, comm_, t.data_ptr(), t.nbytes(), src));
                   });
    }

  private:
    // The device CPU tensors and barriers use: the one the group is bound
    // to (init_process_group's device_id), else the current one.
    c10::DeviceIndex host_device() const {
        std::optional<at::Device> bound = getBoundDeviceId();
        if (bound && bound->type() == kDeviceType)
            return bound->index();
        return current_device();
    }

    rill_stream *comm_stream(c10::DeviceIndex index) {
        std::lock_guard<std::mutex> guard(lock_);
        TORCH_CHECK(comm_ != nullptr, "the rill backend's process group was destroyed (or MPI "
                                      "finalized); make a new one with init_process_group");
        auto it = streams_.find(index);
        if (it != streams_.end())
            return it->second;
        rill_stream *s = nullptr;
        TORCH_RILL_CHECK(rill_stream_create(device(index), 0, &s));
        rill_stream_set_name(s, "c10d:rill");
        streams_[index] = s;
        return s;
    }

    // Queues issue(communication stream) after the current stream's work,
    // with the communication stream current, and returns its Work.
    template <class Issue>
    c10::intrusive_ptr<c10d::Work> run(c10d::OpType type, const char *name, c10::DeviceIndex index,
                                       std::vector<at::Tensor> outputs, Issue &&issue,
                                       bool host_wait = false) {
        rill_stream *comm_s = comm_stream(index);
        {
            OwnedEvent ready;
            TORCH_RILL_CHECK(rill_event_record(ready.event, unwrap(current_stream(index))));
            TORCH_RILL_CHECK(rill_stream_wait_event(comm_s, ready.event));
        }
        OwnedEvent done;
        auto future = c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()),
            std::vector<c10::Device>{c10::Device(kDeviceType, index)});
        {
            OnStream on(comm_s, name);
            issue(comm_s);
            TORCH_RILL_CHECK(rill_event_record(done.event, comm_s));
            // The future's events are recorded on the current stream: the
            // communication stream, after the collective.
            future->markCompleted(c10::IValue(outputs));
        }
        return c10::make_intrusive<RillWork>(rank_, type, std::move(outputs), index, done.release(),
                                             host_wait, std::move(future));
    }

    // recv = op over the ranks of send (contiguous tensors of one dtype and
    // numel, recv == send in place), queued on s, the current stream.
    void allreduce_into(rill_stream *s, const at::Tensor &recv, const at::Tensor &send,
                        rill_reduce_op op) {
        size_t n = static_cast<size_t>(send.numel());
        rill_dtype dtype;
        switch (send.scalar_type()) {
        case at::kFloat:
            TORCH_RILL_CHECK(rill_allreduce_f32(s, comm_, recv.data_ptr<float>(),
                                                send.data_ptr<float>(), n, op));
            return;
        case at::kDouble:
            dtype = RILL_DTYPE_F64;
            break;
        case at::kInt:
            dtype = RILL_DTYPE_I32;
            break;
        case at::kLong:
            dtype = RILL_DTYPE_I64;
            break;
        default: { // float16 and bfloat16: reduced in float32, rounded once
            at::Tensor wide = send.to(at::kFloat);
            allreduce_into(s, wide, wide, op);
            recv.copy_(wide);
            return;
        }
        }
        TORCH_RILL_CHECK(rill_allreduce(s, comm_, recv.data_ptr(), send.data_ptr(), n, dtype, op));
    }

    // out = block rank_ of op over the ranks of in (size_ blocks of out's
    // numel): rill_reduce_scatter_f32 for float32; other dtypes reduce all
    // of in (an allreduce of a copy) and keep their block.
    void reduce_scatter_into(rill_stream *s, const at::Tensor &out, const at::Tensor &in,
                             rill_reduce_op op) {
        size_t n = static_cast<size_t>(out.numel());
        if (out.scalar_type() == at::kFloat) {
            TORCH_RILL_CHECK(rill_reduce_scatter_f32(s, comm_, out.data_ptr<float>(),
                                                     in.data_ptr<float>(), n, op));
            return;
        }
        at::Tensor all = in.clone();
        allreduce_into(s, all, all, op);
        out.copy_(all.reshape({-1}).narrow(0, rank_ * out.numel(), out.numel()).view(out.sizes()));
    }

    // A root of the group, or a sentence naming the call.
    int check_root(int64_t root, const char *call) const {
        TORCH_CHECK(root >= 0 && root < size_, "the rill backend's ", call, ": rank ", root,
                    " is not a rank of the group (0 to ", size_ - 1, ")");
        return static_cast<int>(root);
    }

    // One tensor per rank, each of like's numel and dtype.
    void check_per_rank(const std::vector<at::Tensor> &ts, const at::Tensor &like, const char *call,
                        const char *list) const {
        TORCH_CHECK(static_cast<int>(ts.size()) == size_, "the rill backend's ", call, " needs ",
                    size_, " tensors in ", list, " (one per rank), got ", ts.size());
        for (const at::Tensor &t : ts)
            TORCH_CHECK(t.numel() == like.numel() && t.scalar_type() == like.scalar_type(),
                        "the rill backend's ", call, " needs tensors in ", list,
                        " of the other tensor's numel (", like.numel(), ") and dtype (",
                        dtype_name(like.scalar_type()), "), got ", t.numel(), " of ",
                        dtype_name(t.scalar_type()));
    }

    // Rows of dim 0 of t per rank: splits, or an even split when empty.
    std::vector<int64_t> split_rows(const at::Tensor &t, const std::vector<int64_t> &splits,
                                    const char *call, const char *what) const {
        int64_t rows = t.size(0);
        if (splits.empty()) {
            TORCH_CHECK(rows % size_ == 0, "the rill backend's ", call, " splits the ", what, "'s ",
                        rows, " rows evenly over ", size_,
                        " ranks, which does not divide them; pass split sizes");
            return std::vector<int64_t>(size_, rows / size_);
        }
        TORCH_CHECK(static_cast<int>(splits.size()) == size_, "the rill backend's ", call,
                    " needs ", size_, " ", what, " split sizes (one per rank), got ",
                    splits.size());
        int64_t sum = 0;
        for (int64_t n : splits) {
            TORCH_CHECK(n >= 0, "the rill backend's ", call, ": a split size is negative (", n,
                        ")");
            sum += n;
        }
        TORCH_CHECK(sum == rows, "the rill backend's ", call, ": the ", what,
                    " split sizes add up to ", sum, " rows, and the ", what, " has ", rows);
        return splits;
    }

    struct Part {
        char *ptr;
        size_t bytes;
    };

    // Sends sends[r] to and receives recvs[r] from every rank r (this
    // rank's own part is a copy). On the stream each send and receive
    // waits for the one before, so the pairs of ranks go in one order on
    // every rank ((0,1), (0,2), ..., (1,2), ...), and in a pair the lower
    // rank sends first and the higher receives first: the first pair not
    // yet done has both its ranks at it, so it cannot deadlock.
    void exchange(rill_stream *s, const std::vector<Part> &sends, const std::vector<Part> &recvs,
                  const char *call) {
        const Part &own_in = sends[rank_], &own_out = recvs[rank_];
        TORCH_CHECK(own_in.bytes == own_out.bytes, "the rill backend's ", call, ": rank ", rank_,
                    " sends itself ", own_in.bytes, " bytes and receives ", own_out.bytes,
                    "; pass split sizes that match");
        if (own_in.bytes > 0)
            TORCH_RILL_CHECK(rill_memcpy_async(own_out.ptr, own_in.ptr, own_in.bytes, s));
        for (int i = 0; i < size_; i++)
            for (int j = i + 1; j < size_; j++) {
                if (rank_ != i && rank_ != j)
                    continue;
                int peer = rank_ == i ? j : i;
                const Part &out = sends[peer], &in = recvs[peer];
                if (rank_ == i)
                    TORCH_RILL_CHECK(rill_send(s, comm_, out.ptr, out.bytes, peer));
                TORCH_RILL_CHECK(rill_recv(s, comm_, in.ptr, in.bytes, peer));
                if (rank_ == j)
                    TORCH_RILL_CHECK(rill_send(s, comm_, out.ptr, out.bytes, peer));
            }
    }

    c10::intrusive_ptr<c10d::Work> allreduce_many(std::vector<at::Tensor> &tensors,
                                                  const c10d::ReduceOp &reduce, const char *call,
                                                  c10d::OpType type) {
        c10::DeviceIndex index = common_device(tensors, call);
        rill_reduce_op op = reduce_op(reduce, call);
        for (const at::Tensor &t : tensors) {
            check_device_tensor(t, call);
            check_reducible(t, op, call);
        }
        return run(type, "c10d::allreduce", index, tensors, [&](rill_stream *s) {
            for (at::Tensor &t : tensors)
                allreduce_into(s, t, t, op);
        });
    }

    // CPU tensors: the collective runs on rill copies on the backend's
    // device, and the outputs are copied back before the call returns.
    template <class Op>
    c10::intrusive_ptr<c10d::Work> on_host(c10d::OpType type, const std::vector<at::Tensor> &ins,
                                           const std::vector<at::Tensor> &outs, Op &&op) {
        c10::Device dev(kDeviceType, host_device());
        std::vector<at::Tensor> dev_in, dev_out;
        for (const at::Tensor &t : ins)
            dev_in.push_back(t.contiguous().to(dev));
        for (const at::Tensor &t : outs)
            dev_out.push_back(at::empty(t.sizes(), t.options().device(dev)));
        // In-place collectives (allreduce, broadcast, send): the input is
        // the output.
        c10::intrusive_ptr<c10d::Work> work = op(dev_in, dev_out);
        work->wait();
        std::vector<at::Tensor> results = outs.empty() ? ins : outs;
        std::vector<at::Tensor> &dev_results = outs.empty() ? dev_in : dev_out;
        if (type != c10d::OpType::SEND)
            for (size_t i = 0; i < results.size(); i++)
                results[i].copy_(dev_results[i]); // waits for the current stream
        else
            TORCH_RILL_CHECK(rill_stream_synchronize(unwrap(current_stream(dev.index()))));
        return completed_work(rank_, type, results);
    }

    std::mutex lock_;
    rill_comm *comm_; // guarded by lock_ for close
    std::map<c10::DeviceIndex, rill_stream *> streams_;
};

// Starts MPI unless the program did (registry_lock held), and learns
// MPI_COMM_WORLD's rank and size.
void start_mpi_locked() {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    TORCH_CHECK(!finalized, "the rill backend: MPI was already finalized in this process; "
                            "it cannot start again");
    if (!initialized) {
        TORCH_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &thread_level) ==
                        MPI_SUCCESS,
                    "the rill backend: MPI_Init_thread failed; run the processes with "
                    "mpirun -np <world size>");
        mpi_started_here = true;
    } else {
        MPI_Query_thread(&thread_level);
    }
    TORCH_CHECK(thread_level >= MPI_THREAD_SERIALIZED,
                "the rill backend needs MPI at MPI_THREAD_SERIALIZED or above (librill_mpi "
                "makes MPI calls on a thread of its own); MPI was initialized at level ",
                thread_level, ": initialize it with MPI_Init_thread, or let the backend do it");
    if (world_size < 0) {
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    }
}

// Checks that torch's group (ranks: its members' global ranks, in group
// rank order; empty for the default group) is one that MPI_COMM_WORLD can
// make, and returns true when it is the whole world in MPI's order.
bool check_group_locked(int rank, int size, const std::vector<int64_t> &ranks) {
    if (ranks.empty()) {
        TORCH_CHECK(rank == world_rank && size == world_size,
                    "the rill backend runs over MPI_COMM_WORLD, and torch.distributed asks for "
                    "rank ",
                    rank, " of ", size, " where MPI says rank ", world_rank, " of ", world_size,
                    ": start the processes with mpirun -np <world size> and leave RANK and "
                    "WORLD_SIZE unset (torch_rill.distributed takes them from mpirun)");
        return true;
    }
    TORCH_CHECK(static_cast<int>(ranks.size()) == size && rank >= 0 && rank < size,
                "the rill backend's new_group: torch.distributed asks for rank ", rank, " of ",
                size, " in a group of ", ranks.size(), " global ranks");
    std::set<int64_t> seen;
    for (int64_t r : ranks)
        TORCH_CHECK(r >= 0 && r < world_size && seen.insert(r).second,
                    "the rill backend's new_group: global rank ", r,
                    " is not a rank of MPI_COMM_WORLD (0 to ", world_size - 1,
                    ") or appears twice; pass distinct ranks of the default group");
    TORCH_CHECK(ranks[rank] == world_rank, "the rill backend's new_group: torch.distributed's ",
                "global rank ", ranks[rank], " (rank ", rank,
                " of the group) is MPI_COMM_WORLD's rank ", world_rank,
                ": make the default group with the rill backend (or with MPI's ranks) "
                "under mpirun");
    bool whole = size == world_size;
    for (int i = 0; whole && i < size; i++)
        whole = ranks[i] == i;
    return whole;
}

// A communicator of MPI_COMM_WORLD's ranks ranks, in that order
// (MPI_Comm_create_group: collective over those ranks only, as torch calls
// the creator only on a group's members). The caller frees it.
MPI_Comm group_comm(const std::vector<int64_t> &ranks) {
    std::vector<int> members(ranks.begin(), ranks.end());
    MPI_Group world_group = MPI_GROUP_NULL, group = MPI_GROUP_NULL;
    MPI_Comm comm = MPI_COMM_NULL;
    int rc = MPI_Comm_group(MPI_COMM_WORLD, &world_group);
    if (rc == MPI_SUCCESS)
        rc = MPI_Group_incl(world_group, static_cast<int>(members.size()), members.data(), &group);
    if (rc == MPI_SUCCESS) {
        pybind11::gil_scoped_release nogil; // blocks until every member has called it
        rc = MPI_Comm_create_group(MPI_COMM_WORLD, group, kGroupTag, &comm);
    }
    if (group != MPI_GROUP_NULL)
        MPI_Group_free(&group);
    if (world_group != MPI_GROUP_NULL)
        MPI_Group_free(&world_group);
    if (rc != MPI_SUCCESS) {
        char text[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, text, &len);
        TORCH_CHECK(false, "the rill backend's new_group: MPI_Comm_create_group of ",
                    members.size(), " ranks failed: ", std::string(text, len));
    }
    return comm;
}

// The creator of torch.distributed's backend "rill" for a group of size
// ranks, rank being this process's; ranks holds the group's global ranks
// (empty for the default group, which is MPI_COMM_WORLD).
c10::intrusive_ptr<c10d::Backend> create_backend(int rank, int size,
                                                 const std::vector<int64_t> &ranks) {
    rill_comm *comm = nullptr;
    bool whole = false;
    {
        std::lock_guard<std::mutex> guard(registry_lock);
        start_mpi_locked();
        whole = check_group_locked(rank, size, ranks);
        // Below MPI_THREAD_MULTIPLE, the MPI calls of group_comm must not
        // meet the communication thread's: let the collectives end first.
        if (!whole && thread_level < MPI_THREAD_MULTIPLE)
            for (RillBackend *b : live_backends)
                b->synchronize_streams();
    }
    if (whole) {
        pybind11::gil_scoped_release nogil; // blocks until every rank has called it
        TORCH_RILL_CHECK(rill_comm_create_mpi(MPI_COMM_WORLD, &comm));
    } else {
        // rill_comm_create_mpi duplicates it: ours goes at once.
        MPI_Comm members = group_comm(ranks);
        rill_status status;
        {
            pybind11::gil_scoped_release nogil; // blocks until every member has called it
            status = rill_comm_create_mpi(members, &comm);
        }
        MPI_Comm_free(&members);
        TORCH_RILL_CHECK(status);
    }
    return c10::make_intrusive<RillBackend>(rank, size, comm);
}

void finalize() {
    std::lock_guard<std::mutex> guard(registry_lock);
    for (RillBackend *b : live_backends)
        b->close();
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (mpi_started_here && !finalized)
        MPI_Finalize();
}

} // namespace

void define_distributed(pybind11::module_ &m) {
    m.def(
        "_dist_create",
        [](const pybind11::object & /*store*/, int rank, int size,
           const pybind11::object & /*timeout*/,
           const std::vector<int64_t> &ranks) { return create_backend(rank, size, ranks); },
        "The rill backend of torch.distributed for a group of global ranks ranks (empty: "
        "the default group, MPI_COMM_WORLD); store and timeout unused");
    m.def("_dist_finalize", finalize,
          "Destroys the rill backends' communicators and ends the MPI that they started");
}

} // namespace torch_rill
