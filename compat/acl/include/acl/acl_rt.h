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

/* aclrtCreateEventWithFlag's flags (a bit set). */
#define ACL_EVENT_SYNC                    0x00000001U
#define ACL_EVENT_CAPTURE_STREAM_PROGRESS 0x00000002U
#define ACL_EVENT_TIME_LINE               0x00000008U

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

typedef enum aclrtEventRecordedStatus {
    ACL_EVENT_RECORDED_STATUS_NOT_READY = 0,
    ACL_EVENT_RECORDED_STATUS_COMPLETE = 1
} aclrtEventRecordedStatus;

/* ---- devices: ACL device ids are rill's device ordinals ---- */

/* Makes device deviceId current for the calling thread (rill_set_device). */
ACL_FUNC_VISIBILITY aclError aclrtSetDevice(int32_t deviceId);
/* Waits for the work of device deviceId's streams; its streams, events and
 * memory stay until destroyed or aclFinalize. */
ACL_FUNC_VISIBILITY aclError aclrtResetDevice(int32_t deviceId);
/* The calling thread's current device (rill's default until set). */
ACL_FUNC_VISIBILITY aclError aclrtGetDevice(int32_t *deviceId);
ACL_FUNC_VISIBILITY aclError aclrtGetDeviceCount(uint32_t *count);
/* Waits for the work of the current device's streams. */
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeDevice(void);

/* ---- streams ---- */

ACL_FUNC_VISIBILITY aclError aclrtCreateStream(aclrtStream *stream);
/* priority: lower is higher, 0 the highest, as in ACL; rill clamps it into
 * the device's range. flag: ACL_STREAM_* bits, accepted and without effect. */
ACL_FUNC_VISIBILITY aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority,
                                                         uint32_t flag);
ACL_FUNC_VISIBILITY aclError aclrtDestroyStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtSynchronizeStream(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event);

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

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACL_RT_H */
