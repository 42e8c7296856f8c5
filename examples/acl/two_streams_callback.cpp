// SPDX-License-Identifier: MIT
// An ACL program in the style of CANN's runtime samples, built unchanged
// against librill_acl: two streams in one context, an event that orders
// them, asynchronous copies, aclnnAdd, and callbacks that a thread of the
// program runs in aclrtProcessReport, then a model captured across both
// streams and replayed. It prints what each step computed.
//
//   stream 2: copy b in, callback (checks b on the host), record event
//   stream 1: copy a in, wait for the event, out = a + 2 * b, copy out back,
//             callback (sums out on the host)
//   model (captured on stream 1, stream 2 forked in and joined back):
//             stream 2: out = out + 2 * b; stream 1: copy out back
//   each replay: execute the model on stream 1, callback (sums out)
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "acl/acl.h"
#include "aclnnop/aclnn_add.h"

#define CHECK(call)                                                                        \
    do {                                                                                   \
        aclError check_rc_ = (call);                                                       \
        if (check_rc_ != ACL_SUCCESS) {                                                    \
            std::printf("%s failed: %d (%s)\n", #call, check_rc_, aclGetRecentErrMsg());   \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

namespace {

const int kCount = 1024;

struct HostView {
    const float *data;
    int count;
    const char *what;
};

std::atomic<bool> g_processing{true};
aclrtContext g_context = nullptr;

// The thread that runs the streams' callbacks.
void ReportThread() {
    if (aclrtSetCurrentContext(g_context) != ACL_SUCCESS) {
        std::printf("aclrtSetCurrentContext failed in the report thread\n");
        return;
    }
    while (g_processing.load()) {
        (void)aclrtProcessReport(50);  // ACL_ERROR_RT_REPORT_TIMEOUT while idle
    }
}

// Stream 2's callback: b has reached the device, and the host copy is intact.
void CheckInput(void *arg) {
    const HostView *v = static_cast<const HostView *>(arg);
    double sum = 0;
    for (int i = 0; i < v->count; ++i) {
        sum += v->data[i];
    }
    std::printf("callback on stream 2: %s copied, host sum %.1f\n", v->what, sum);
}

// Stream 1's callback: out is back on the host.
void SumOutput(void *arg) {
    const HostView *v = static_cast<const HostView *>(arg);
    double sum = 0;
    for (int i = 0; i < v->count; ++i) {
        sum += v->data[i];
    }
    std::printf("callback on stream 1: %s = %.1f, first %.1f, last %.1f\n", v->what, sum,
                v->data[0], v->data[v->count - 1]);
}

aclTensor *Vector(float *device) {
    int64_t shape[1] = {kCount};
    int64_t strides[1] = {1};
    return aclCreateTensor(shape, 1, ACL_FLOAT, strides, 0, ACL_FORMAT_ND, shape, 1, device);
}

}  // namespace

int main() {
    const size_t bytes = kCount * sizeof(float);
    CHECK(aclInit(nullptr));
    CHECK(aclrtSetDevice(0));
    CHECK(aclrtCreateContext(&g_context, 0));
    aclrtRunMode mode;
    CHECK(aclrtGetRunMode(&mode));
    std::printf("run mode: %s\n", mode == ACL_HOST ? "ACL_HOST" : "ACL_DEVICE");

    aclrtStream stream1 = nullptr, stream2 = nullptr;
    CHECK(aclrtCreateStream(&stream1));
    CHECK(aclrtCreateStream(&stream2));
    CHECK(aclrtSetStreamFailureMode(stream1, ACL_STOP_ON_FAILURE));
    CHECK(aclrtSetStreamFailureMode(stream2, ACL_STOP_ON_FAILURE));
    aclrtEvent bReady = nullptr;
    CHECK(aclrtCreateEvent(&bReady));

    std::thread reporter(ReportThread);
    uint64_t reporterId = static_cast<uint64_t>(reporter.native_handle());
    CHECK(aclrtSubscribeReport(reporterId, stream1));
    CHECK(aclrtSubscribeReport(reporterId, stream2));

    float *hostA = nullptr, *hostB = nullptr, *hostOut = nullptr;
    CHECK(aclrtMallocHost(reinterpret_cast<void **>(&hostA), bytes));
    CHECK(aclrtMallocHost(reinterpret_cast<void **>(&hostB), bytes));
    CHECK(aclrtMallocHost(reinterpret_cast<void **>(&hostOut), bytes));
    for (int i = 0; i < kCount; ++i) {
        hostA[i] = static_cast<float>(i);
        hostB[i] = 0.5f;
    }
    float *devA = nullptr, *devB = nullptr, *devOut = nullptr;
    CHECK(aclrtMalloc(reinterpret_cast<void **>(&devA), bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(reinterpret_cast<void **>(&devB), bytes, ACL_MEM_MALLOC_HUGE_FIRST));
    CHECK(aclrtMalloc(reinterpret_cast<void **>(&devOut), bytes, ACL_MEM_MALLOC_HUGE_FIRST));

    HostView inputView = {hostB, kCount, "b"};
    HostView outputView = {hostOut, kCount, "sum(a + 2 * b)"};

    // Stream 2 brings b in and tells stream 1 when it is there.
    CHECK(aclrtMemcpyAsync(devB, bytes, hostB, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream2));
    CHECK(aclrtLaunchCallback(CheckInput, &inputView, ACL_CALLBACK_BLOCK, stream2));
    CHECK(aclrtRecordEvent(bReady, stream2));

    // Stream 1 brings a in, waits for b, adds, and copies the result back.
    CHECK(aclrtMemcpyAsync(devA, bytes, hostA, bytes, ACL_MEMCPY_HOST_TO_DEVICE, stream1));
    CHECK(aclrtStreamWaitEvent(stream1, bReady));
    aclTensor *a = Vector(devA), *b = Vector(devB), *out = Vector(devOut);
    float alphaValue = 2.0f;
    aclScalar *alpha = aclCreateScalar(&alphaValue, ACL_FLOAT);
    uint64_t workspaceSize = 0;
    aclOpExecutor *executor = nullptr;
    if (aclnnAddGetWorkspaceSize(a, b, alpha, out, &workspaceSize, &executor) != 0 ||
        aclnnAdd(nullptr, workspaceSize, executor, stream1) != 0) {
        std::printf("aclnnAdd failed: %s\n", aclGetRecentErrMsg());
        return 1;
    }
    CHECK(aclrtMemcpyAsync(hostOut, bytes, devOut, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream1));
    CHECK(aclrtLaunchCallback(SumOutput, &outputView, ACL_CALLBACK_BLOCK, stream1));

    CHECK(aclrtSynchronizeStreamWithTimeout(stream1, 10000));
    CHECK(aclrtSynchronizeStream(stream2));
    aclrtStreamStatus status;
    CHECK(aclrtStreamQuery(stream1, &status));
    std::printf("stream 1 %s\n", status == ACL_STREAM_STATUS_COMPLETE ? "complete" : "pending");
    bool exact = true;
    for (int i = 0; i < kCount; ++i) {
        exact = exact && hostOut[i] == static_cast<float>(i) + 1.0f;
    }
    std::printf("out[i] == a[i] + 2 * b[i] for all %d elements: %s\n", kCount,
                exact ? "yes" : "no");

    // A model of both streams: stream 2 joins the capture through fork and
    // adds 2 * b to out in place; stream 1 waits for it through join and
    // copies out back. Nothing runs until the model is executed.
    aclrtEvent fork = nullptr, join = nullptr;
    CHECK(aclrtCreateEvent(&fork));
    CHECK(aclrtCreateEvent(&join));
    aclmdlRI model = nullptr;
    CHECK(aclmdlRICaptureBegin(stream1, ACL_MODEL_RI_CAPTURE_MODE_GLOBAL));
    CHECK(aclrtRecordEvent(fork, stream1));
    CHECK(aclrtStreamWaitEvent(stream2, fork));
    if (aclnnAddGetWorkspaceSize(out, b, alpha, out, &workspaceSize, &executor) != 0 ||
        aclnnAdd(nullptr, workspaceSize, executor, stream2) != 0) {
        std::printf("aclnnAdd (captured) failed: %s\n", aclGetRecentErrMsg());
        return 1;
    }
    CHECK(aclrtRecordEvent(join, stream2));
    CHECK(aclrtStreamWaitEvent(stream1, join));
    CHECK(aclrtMemcpyAsync(hostOut, bytes, devOut, bytes, ACL_MEMCPY_DEVICE_TO_HOST, stream1));
    CHECK(aclmdlRICaptureEnd(stream1, &model));
    std::printf("captured: out[0] still %.1f\n", hostOut[0]);

    HostView replayView = {hostOut, kCount, "sum(out)"};
    for (int replay = 1; replay <= 3; ++replay) {
        CHECK(aclmdlRIExecuteAsync(model, stream1));
        CHECK(aclrtLaunchCallback(SumOutput, &replayView, ACL_CALLBACK_BLOCK, stream1));
        CHECK(aclrtSynchronizeStream(stream1));
        bool right = true;
        for (int i = 0; i < kCount; ++i) {
            right = right && hostOut[i] == static_cast<float>(i + 1 + replay);
        }
        std::printf("replay %d: out[i] == a[i] + 2 * b[i] * %d for all %d elements: %s\n", replay,
                    replay + 1, kCount, right ? "yes" : "no");
    }
    CHECK(aclmdlRIDestroy(model));
    CHECK(aclrtDestroyEvent(fork));
    CHECK(aclrtDestroyEvent(join));

    g_processing.store(false);
    reporter.join();
    CHECK(aclrtUnSubscribeReport(reporterId, stream1));
    CHECK(aclrtUnSubscribeReport(reporterId, stream2));
    aclDestroyTensor(a);
    aclDestroyTensor(b);
    aclDestroyTensor(out);
    aclDestroyScalar(alpha);
    CHECK(aclrtFree(devA));
    CHECK(aclrtFree(devB));
    CHECK(aclrtFree(devOut));
    CHECK(aclrtFreeHost(hostA));
    CHECK(aclrtFreeHost(hostB));
    CHECK(aclrtFreeHost(hostOut));
    CHECK(aclrtDestroyEvent(bReady));
    CHECK(aclrtDestroyStream(stream1));
    CHECK(aclrtDestroyStream(stream2));
    CHECK(aclrtDestroyContext(g_context));
    CHECK(aclrtResetDeviceForce(0));
    CHECK(aclFinalize());
    std::printf("done\n");
    return 0;
}
