/* SPDX-License-Identifier: MIT */
/*
 * acl/acl_rt.h: ACL's runtime (devices, streams, events, memory) on rill.
 * Every call returns ACL_SUCCESS or an ACL error code, and a failing call
 * leaves its message for aclGetRecentErrMsg. An aclrtStream is a rill
 * stream, an aclrtEvent a rill event: NULL as a stream means the calling
 * thread's current stream of its current device (ACL's default stream).
 * docs/acl.md lists what differs from CANN.
 */
#ifndef RILL_ACL_ACL_RT_H
#define RILL_ACL_ACL_RT_H

#include "acl_base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void *aclrtStream;
typedef void *aclrtEvent;
typedef void *aclrtContext;

/* aclrtCreateEventWithFlag's flags (a bit set). */
#define ACL_EVENT_SYNC                    0x00000001U
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x00000002U
#define ACL_EVENT_TIME_LINE               0x00000008U
#define ACL_EVENT_IPC                     0x00000040U

/* aclrtRecordEventWithFlag's and aclrtStreamWaitEventWithFlag's flags. */
#define ACL_EVENT_RECORD_DEFAULT  0x0U
#define ACL_EVENT_RECORD_EXTERNAL 0x01U
#define ACL_EVENT_WAIT_DEFAULT    0x0U
#define ACL_EVENT_WAIT_EXTERNAL   0x01U

/* aclrtSetStreamFailureMode's modes. */
#define ACL_CONTINUE_ON_FAILURE 0x00000000U
#define ACL_STOP_ON_FAILURE     0x00000001U

#define ACL_IPC_EVENT_HANDLE_SIZE 64U

/* aclrtCreateStreamWithConfig's flags (a bit set); none changes a rill stream. */
#define ACL_STREAM_FAST_LAUNCH 0x00000001U
#define ACL_STREAM_FAST_SYNC   0x00000002U
#define ACL_STREAM_PERSISTENT  0x00000004U
#define ACL_STREAM_HUGE        0x00000008U

typedef enum aclrtMemcpyKind {
    ACL_MEMCPY_HOST_TO_HOST,
    ACL_MEMCPY_HOST_TO_DEVICE,
    ACL_MEMCPY_DEVICE_TO_HOST,
    ACL_MEMCPY_DEVICE_TO_DEVICE,
    ACL_MEMCPY_DEFAULT
} aclrtMemcpyKind;

/* One of the first eight, optionally or-ed with one bandwidth type. rill's
 * memory has no page sizes or bandwidth classes: every policy gets the same
 * memory from the device's caching pool. */
typedef enum aclrtMemMallocPolicy {
    ACL_MEM_MALLOC_HUGE_FIRST,
    ACL_MEM_MALLOC_HUGE_ONLY,
    ACL_MEM_MALLOC_NORMAL_ONLY,
    ACL_MEM_MALLOC_HUGE_FIRST_P2P,
    ACL_MEM_MALLOC_HUGE_ONLY_P2P,
    ACL_MEM_MALLOC_NORMAL_ONLY_P2P,
    ACL_MEM_MALLOC_HUGE1G_ONLY,
    ACL_MEM_MALLOC_HUGE1G_ONLY_P2P,
    ACL_MEM_TYPE_LOW_BAND_WIDTH = 0x0100,
    ACL_MEM_TYPE_HIGH_BAND_WIDTH = 0x1000
} aclrtMemMallocPolicy;

/* aclrtGetMemInfo's kinds of memory; each reports the device's memory. */
typedef enum aclrtMemAttr {
    ACL_DDR_MEM,
    ACL_HBM_MEM,
    ACL_DDR_MEM_HUGE,
    ACL_DDR_MEM_NORMAL,
    ACL_HBM_MEM_HUGE,
    ACL_HBM_MEM_NORMAL,
    ACL_DDR_MEM_P2P_HUGE,
    ACL_DDR_MEM_P2P_NORMAL,
    ACL_HBM_MEM_P2P_HUGE,
    ACL_HBM_MEM_P2P_NORMAL
} aclrtMemAttr;

typedef enum aclrtRunMode { ACL_DEVICE, ACL_HOST } aclrtRunMode;

typedef enum aclrtStreamStatus {
    ACL_STREAM_STATUS_COMPLETE = 0,
    ACL_STREAM_STATUS_NOT_READY = 1,
    ACL_STREAM_STATUS_RESERVED = 0xFFFF
} aclrtStreamStatus;

/* Whether a callback holds its stream back until it has run. */
typedef enum aclrtCallbackBlockType {
    ACL_CALLBACK_NO_BLOCK,
    ACL_CALLBACK_BLOCK
} aclrtCallbackBlockType;

typedef void (*aclrtCallback)(void *userData);
typedef void (*aclrtHostFunc)(void *args);

/* An interprocess event's handle: rill_ipc_event_handle's 64 bytes. */
typedef struct aclrtIpcEventHandle {
    char reserved[ACL_IPC_EVENT_HANDLE_SIZE];
} aclrtIpcEventHandle;

typedef enum aclrtLastErrLevel { ACL_RT_THREAD_LEVEL = 0 } aclrtLastErrLevel;

/* Device fault details (aclrtGetErrorVerbose), an NPU's: never filled here. */
typedef enum {
    ACL_RT_NO_ERROR = 0,
    ACL_RT_ERROR_MEMORY = 1,
    ACL_RT_ERROR_L2 = 2,
    ACL_RT_ERROR_AICORE = 3,
    ACL_RT_ERROR_LINK = 4,
    ACL_RT_ERROR_L3_PORT = 5,
    ACL_RT_ERROR_OTHERS = 0xFFFF
} aclrtErrorType;

typedef enum aclrtAicoreErrorType {
    ACL_RT_AICORE_ERROR_UNKNOWN,
    ACL_RT_AICORE_ERROR_SW,
    ACL_RT_AICORE_ERROR_HW_LOCAL
} aclrtAicoreErrorType;

#define MAX_MEM_UCE_INFO_ARRAY_SIZE 128
#define UCE_INFO_RESERVED_SIZE      14
#define ACL_RT_MEM_UCE_INFO_MAX_NUM 20

typedef struct aclrtMemUceInfo {
    void *addr;
    size_t len;
    size_t reserved[UCE_INFO_RESERVED_SIZE];
} aclrtMemUceInfo;

typedef struct {
    size_t arraySize;
    aclrtMemUceInfo memUceInfoArray[ACL_RT_MEM_UCE_INFO_MAX_NUM];
} aclrtMemUceInfoArray;

typedef union aclrtErrorInfoDetail {
    aclrtMemUceInfoArray uceInfo;
    aclrtAicoreErrorType aicoreErrType;
} aclrtErrorInfoDetail;

typedef struct aclrtErrorInfo {
    uint8_t tryRepair;
    uint8_t hasDetail;
    uint8_t reserved[2];
    aclrtErrorType errorType;
    aclrtErrorInfoDetail detail;
} aclrtErrorInfo;

/* A failed task's details, passed to an exception callback (opaque). */
typedef struct rtExceptionInfo aclrtExceptionInfo;
typedef void (*aclrtExceptionInfoCallback)(aclrtExceptionInfo *exceptionInfo);

/* aclrtRandomNumAsync's task: a value (isAddr 0: the first size bytes of
 * valueOrAddr) or the address of one (isAddr 1). */
typedef struct {
    uint8_t isAddr;
    uint8_t valueOrAddr[8];
    uint8_t size;
    uint8_t rsv[6];
} aclrtRandomParaInfo;

typedef struct {
    aclrtRandomParaInfo dropoutRation;
} aclrtDropoutBitmaskInfo;

typedef struct {
    aclrtRandomParaInfo min;
    aclrtRandomParaInfo max;
} aclrtUniformDisInfo;

typedef struct {
    aclrtRandomParaInfo mean;
    aclrtRandomParaInfo stddev;
} aclrtNormalDisInfo;

typedef enum {
    ACL_RT_RANDOM_NUM_FUNC_TYPE_DROPOUT_BITMASK = 0,
    ACL_RT_RANDOM_NUM_FUNC_TYPE_UNIFORM_DIS,
    ACL_RT_RANDOM_NUM_FUNC_TYPE_NORMAL_DIS,
    ACL_RT_RANDOM_NUM_FUNC_TYPE_TRUNCATED_NORMAL_DIS
} aclrtRandomNumFuncType;

/* aclrtReduceAsync's combinations of dst with src. */
typedef enum {
    ACL_RT_MEMCPY_SDMA_AUTOMATIC_SUM = 10,
    ACL_RT_MEMCPY_SDMA_AUTOMATIC_MAX = 11,
    ACL_RT_MEMCPY_SDMA_AUTOMATIC_MIN = 12,
    ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL = 13
} aclrtReduceKind;

typedef struct {
    aclrtRandomNumFuncType funcType;
    union {
        aclrtDropoutBitmaskInfo dropoutBitmaskInfo;
        aclrtUniformDisInfo uniformDisInfo;
        aclrtNormalDisInfo normalDisInfo;
    } paramInfo;
} aclrtRandomNumFuncParaInfo;

typedef struct {
    aclDataType dataType;
    aclrtRandomNumFuncParaInfo randomNumFuncParaInfo;
    void *randomParaAddr;
    void *randomResultAddr;
    void *randomCounterAddr;
    aclrtRandomParaInfo randomSeed;
    aclrtRandomParaInfo randomNum;
    uint8_t rsv[8];
} aclrtRandomNumTaskInfo;

typedef enum aclrtEventRecordedStatus {
    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

/* ---- devices: ACL device ids are rill's device ordinals ---- */

/* Makes device deviceId current for the calling thread (rill_set_device)
 * and adds one to the device's count of such calls, for the resets. */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);
/* Takes one from the device's count; when it reaches 0, waits for the
 * device's work and destroys the streams and events made through ACL on
 * the device and frees its aclrtMalloc memory (later uses of them are
 * refused). A count already 0: ACL_ERROR_INVALID_PARAM. */
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);
/* The calling thread's current device (rill's default until set). */
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t *deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t *count);
/* aclrtResetDevice at once, whatever the count (which becomes 0). */
ACL_FUNC_VISIBILITY aclError aclrtResetDeviceForce(int32_t deviceId);
/* Waits for the work of the current device's streams. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void);
/* The same for at most timeout ms (-1: no limit, 0: a check):
 * ACL_ERROR_RT_STREAM_SYNC_TIMEOUT when the work is not done by then. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout);
/* ACL_HOST: the program runs on the host, beside rill's devices. */
ACL_FUNC_VISIBILITY aclError aclrtGetRunMode(aclrtRunMode *runMode);

/* ---- contexts: a context stands for one device ---- */

/* A context of device deviceId, made current for the calling thread. */
ACL_FUNC_VISIBILITY aclError aclrtCreateContext(aclrtContext *context, int32_t deviceId);
/* Only contexts from aclrtCreateContext; a thread whose current context it
 * was has its device's default context again. Streams stay. */
ACL_FUNC_VISIBILITY aclError aclrtDestroyContext(aclrtContext context);
/* Makes context current for the calling thread, and its device current. */
ACL_FUNC_VISIBILITY aclError aclrtSetCurrentContext(aclrtContext context);
/* The calling thread's context: the last one set or created on this thread
 * while its device is current, else the current device's default context. */
ACL_FUNC_VISIBILITY aclError aclrtGetCurrentContext(aclrtContext *context);

/* ---- streams ---- */

ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream *stream);
/* priority: lower is higher, 0 the highest, as in ACL; rill clamps it into
 * the device's range. flag: ACL_STREAM_* bits, accepted and without effect. */
ACL_FUNC_VISIBILITY aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority,
                                                         uint32_t flag);
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
/* aclrtDestroyStream: returns at once; the stream's queued work still runs
 * (rill cannot take work back from a stream). */
ACL_FUNC_VISIBILITY aclError aclrtDestroyStreamForce(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);
/* timeout in ms, -1 for none: ACL_ERROR_RT_STREAM_SYNC_TIMEOUT when the
 * work is not done by then (it runs on). */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout);
/* Never blocks: COMPLETE when all the stream's work has run. */
ACL_FUNC_VISIBILITY aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status);
/* The priority given at creation, clamped as aclrtCreateStreamWithConfig
 * clamps it; the ACL_STREAM_* flags given at creation. */
ACL_FUNC_VISIBILITY aclError aclrtStreamGetPriority(aclrtStream stream, uint32_t *priority);
ACL_FUNC_VISIBILITY aclError aclrtStreamGetFlags(aclrtStream stream, uint32_t *flags);
/* The current device's range of ACL priorities: 0 the greatest. */
ACL_FUNC_VISIBILITY aclError aclrtDeviceGetStreamPriorityRange(int32_t *leastPriority,
                                                               int32_t *greatestPriority);
/* ACL_STOP_ON_FAILURE is how every rill stream behaves (a failed task's
 * later work is skipped); ACL_CONTINUE_ON_FAILURE cannot be had. */
ACL_FUNC_VISIBILITY aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode);
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);
/* flag ACL_EVENT_WAIT_DEFAULT with timeout 0: aclrtStreamWaitEvent.
 * ACL_EVENT_WAIT_EXTERNAL, on the stream that began a capture
 * (aclmdlRICaptureBegin): the model waits at each execution for the event
 * as last recorded when the execution is submitted (the capture is cut
 * there; see acl_mdl.h). */
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEventWithFlag(aclrtStream stream, aclrtEvent event,
                                                          uint32_t timeout, uint32_t flag);

/* ---- callbacks: run on a thread the program chooses ---- */

/* Binds stream's callbacks to the thread threadId ((uint64_t)pthread_self()
 * of it): a stream has one such thread, a thread may serve many streams.
 * A subscribed thread that synchronizes (aclrtSynchronizeStream, ...Event,
 * ...Device, with or without a timeout) runs its callbacks while it waits,
 * so that it never waits for a callback that only it would run. */
ACL_FUNC_VISIBILITY aclError aclrtSubscribeReport(uint64_t threadId, aclrtStream stream);
/* Queues fn(userData) on stream, which must be subscribed: when the stream
 * reaches it, the subscribed thread runs it in aclrtProcessReport.
 * ACL_CALLBACK_BLOCK holds the stream's later work until fn has returned;
 * ACL_CALLBACK_NO_BLOCK lets it run on. Refused during a capture. */
ACL_FUNC_VISIBILITY aclError aclrtLaunchCallback(aclrtCallback fn, void *userData,
                                                 aclrtCallbackBlockType blockType,
                                                 aclrtStream stream);
/* On a subscribed thread: waits up to timeout ms (-1: no limit) for its
 * streams' callbacks and runs those that arrived.
 * ACL_ERROR_RT_REPORT_TIMEOUT when none did. */
ACL_FUNC_VISIBILITY aclError aclrtProcessReport(int32_t timeout);
/* Ends the binding; callbacks already queued for it run at once, on the
 * calling thread (NO_BLOCK) or on the stream's own (BLOCK). */
ACL_FUNC_VISIBILITY aclError aclrtUnSubscribeReport(uint64_t threadId, aclrtStream stream);
/* fn(args) in stream order: on the thread subscribed to the stream with
 * aclrtSubscribeHostFunc, in its aclrtProcessHostFunc, the stream waiting
 * until fn has returned; on one of rill's threads (rill_launch_host_func)
 * when the stream has no such thread. */
ACL_FUNC_VISIBILITY aclError aclrtLaunchHostFunc(aclrtStream stream, aclrtHostFunc fn, void *args);
/* Makes hostFuncThreadId (a pthread_self() value) the thread that runs the
 * host functions launched on exeStream; a stream has at most one, besides
 * its aclrtSubscribeReport thread. */
ACL_FUNC_VISIBILITY aclError aclrtSubscribeHostFunc(uint64_t hostFuncThreadId,
                                                    aclrtStream exeStream);
/* Runs the host functions handed to the calling thread, waiting up to
 * timeout ms (-1: no limit) for the first; ACL_ERROR_RT_REPORT_TIMEOUT when
 * none came. */
ACL_FUNC_VISIBILITY aclError aclrtProcessHostFunc(int32_t timeout);
/* Ends the subscription; host functions queued for the thread run as
 * aclrtUnSubscribeReport runs queued blocking callbacks. */
ACL_FUNC_VISIBILITY aclError aclrtUnSubscribeHostFunc(uint64_t hostFuncThreadId,
                                                      aclrtStream exeStream);

/* ---- random numbers ---- */

/* Normal distribution into float32 memory (rill_op_randn_f32); the other
 * distributions and types are ACL_ERROR_RT_FEATURE_NOT_SUPPORT. */
ACL_FUNC_VISIBILITY aclError aclrtRandomNumAsync(const aclrtRandomNumTaskInfo *taskInfo,
                                                 const aclrtStream stream, void *reserve);

/* ---- reduce tasks ---- */

/* dst[i] = dst[i] (kind) src[i] on stream for the count bytes of dst,
 * count a multiple of the element's size: SUM, MAX and MIN of ACL_FLOAT
 * (rill_op_binary_f32) and SUM of ACL_FLOAT16 (rill_op_add_f16). Other
 * types, and ACL_RT_MEMCPY_SDMA_AUTOMATIC_EQUAL, are
 * ACL_ERROR_RT_FEATURE_NOT_SUPPORT. src may be dst, or overlap it not at
 * all; reserve must be NULL. */
ACL_FUNC_VISIBILITY aclError aclrtReduceAsync(void *dst, const void *src, uint64_t count,
                                              aclrtReduceKind kind, aclDataType type,
                                              aclrtStream stream, void *reserve);

/* ---- events ---- */

/* An event that records timestamps (aclrtEventElapsedTime works on it). */
ACL_FUNC_VISIBILITY aclError aclrtCreateEvent(aclrtEvent *event);
/* flag: ACL_EVENT_* bits; ACL_EVENT_TIME_LINE records timestamps. */
ACL_FUNC_VISIBILITY aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag);
ACL_FUNC_VISIBILITY aclError aclrtDestroyEvent(aclrtEvent event);
ACL_FUNC_VISIBILITY aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream);
/* COMPLETE when the recorded work is done or the event was never recorded. */
ACL_FUNC_VISIBILITY aclError aclrtQueryEventStatus(aclrtEvent event,
                                                   aclrtEventRecordedStatus *status);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEvent(aclrtEvent event);
ACL_FUNC_VISIBILITY aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent,
                                                   aclrtEvent endEvent);
/* aclrtCreateEventWithFlag: rill's events may be recorded again always. */
ACL_FUNC_VISIBILITY aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag);
/* flag ACL_EVENT_RECORD_DEFAULT: aclrtRecordEvent. ACL_EVENT_RECORD_EXTERNAL,
 * on the stream that began a capture: the model records the event at each
 * execution, for waits outside it. */
ACL_FUNC_VISIBILITY aclError aclrtRecordEventWithFlag(aclrtEvent event, aclrtStream stream,
                                                      uint32_t flag);
/* When the event's recorded work completed, in nanoseconds of the host's
 * CLOCK_MONOTONIC: the time of the call less aclrtEventElapsedTime from the
 * event to a record made by the call (a float of ms: microseconds for an
 * event up to about 16 s old). Refused as aclrtEventElapsedTime refuses
 * an event: no ACL_EVENT_TIME_LINE, never recorded, or pending. Blocks
 * until the reference record is done. */
ACL_FUNC_VISIBILITY aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t *timestamp);
/* Checks its handles and changes nothing: once its recorded work is done
 * (which ACL asks before a reset), a rill event already acts as reset. */
ACL_FUNC_VISIBILITY aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream);
/* timeout in ms, -1 for none: ACL_ERROR_RT_EVENT_SYNC_TIMEOUT when the
 * recorded work is not done by then. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout);
/* An event made with ACL_EVENT_IPC, shared with another process. */
ACL_FUNC_VISIBILITY aclError aclrtIpcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle *handle);
ACL_FUNC_VISIBILITY aclError aclrtIpcOpenEventHandle(aclrtIpcEventHandle handle, aclrtEvent *event);

/* ---- memory ---- */

/* Device memory of the current device from rill's caching pool (rill_malloc). */
ACL_FUNC_VISIBILITY aclError aclrtMalloc(void **devPtr, size_t size, aclrtMemMallocPolicy policy);
ACL_FUNC_VISIBILITY aclError aclrtFree(void *devPtr);
ACL_FUNC_VISIBILITY aclError aclrtMallocHost(void **hostPtr, size_t size);
ACL_FUNC_VISIBILITY aclError aclrtFreeHost(void *hostPtr);
/* Copies count bytes into dst, which has room for destMax. The kind must say
 * where dst and src are: device memory is memory from aclrtMalloc, host
 * memory everything else; ACL_MEMCPY_DEFAULT accepts any. aclrtMemcpy is
 * synchronous and, during a capture, an unsafe call (see
 * aclmdlRICaptureThreadExchangeMode). */
ACL_FUNC_VISIBILITY aclError aclrtMemcpy(void *dst, size_t destMax, const void *src, size_t count,
                                         aclrtMemcpyKind kind);
ACL_FUNC_VISIBILITY aclError aclrtMemcpyAsync(void *dst, size_t destMax, const void *src,
                                              size_t count, aclrtMemcpyKind kind,
                                              aclrtStream stream);
/* Sets count bytes of devPtr, which has room for maxCount, to value's low
 * byte. aclrtMemset is synchronous: on device memory it runs on the thread's
 * current stream and waits for it; on host memory it runs at once. It takes
 * only memory from aclrtMalloc or aclrtMallocHost not yet freed, and count
 * must stay inside that allocation: other pointers, freed memory among
 * them, are ACL_ERROR_INVALID_PARAM and nothing is written. */
ACL_FUNC_VISIBILITY aclError aclrtMemset(void *devPtr, size_t maxCount, int32_t value,
                                         size_t count);
ACL_FUNC_VISIBILITY aclError aclrtMemsetAsync(void *devPtr, size_t maxCount, int32_t value,
                                              size_t count, aclrtStream stream);
/* The current device's memory: total is what rill may take of it, free the
 * part that its pool has not reserved. */
ACL_FUNC_VISIBILITY aclError aclrtGetMemInfo(aclrtMemAttr attr, size_t *free, size_t *total);

/* ---- errors ---- */

/* The calling thread's last failure's code (ACL_SUCCESS if none since it
 * was last taken); aclrtGetLastError takes it, aclrtPeekAtLastError leaves it. */
ACL_FUNC_VISIBILITY aclError aclrtGetLastError(aclrtLastErrLevel level);
ACL_FUNC_VISIBILITY aclError aclrtPeekAtLastError(aclrtLastErrLevel level);
/* An NPU's fault details: ACL_ERROR_RT_FEATURE_NOT_SUPPORT. */
ACL_FUNC_VISIBILITY aclError aclrtGetErrorVerbose(int32_t deviceId, aclrtErrorInfo *errorInfo);
/* NULL (no callback) only: rill reports a failed task at its stream's next
 * query or synchronize, with its sentence in aclGetRecentErrMsg. */
ACL_FUNC_VISIBILITY aclError aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback callback);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACL_RT_H */
