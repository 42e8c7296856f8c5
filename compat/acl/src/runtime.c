/* SPDX-License-Identifier: MIT */
/*
 * ACL's runtime on rill's public API: aclInit and aclFinalize, devices
 * (ACL's device ids are rill's ordinals), streams and events, which are
 * rill's own handles passed as ACL's void pointers. The only state here is
 * whether ACL is started, for aclInit's and aclFinalize's codes; rill keeps
 * the rest, per thread and per object. The package versions are
 * librill_acl's, which is rill's version (CMake's project version).
 */
#include "runtime.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "event.h"
#include "memory.h"
#include "model.h"
#include "report.h"
#include "reset.h"
#include "stream.h"

enum { NEVER_STARTED, STARTED, FINALIZED };
static atomic_int acl_state = NEVER_STARTED;

/* ---- aclInit, aclFinalize ---- */

aclError aclInit(const char *configPath) {
    if (configPath) {
        FILE *f = fopen(configPath, "r");
        if (!f)
            return rill__acl_fail(ACL_ERROR_INVALID_FILE,
                                  "aclInit: configPath '%s' cannot be read; pass NULL for "
                                  "no configuration",
                                  configPath);
        fclose(f);
    }
    int count;
    aclError err = rill__acl_check(rill_device_count(&count), "aclInit");
    if (err != ACL_SUCCESS)
        return err;
    int state = atomic_load(&acl_state);
    do {
        if (state == STARTED)
            return rill__acl_fail(ACL_ERROR_REPEAT_INITIALIZE,
                                  "aclInit: ACL is already started; call aclFinalize first");
    } while (!atomic_compare_exchange_weak(&acl_state, &state, STARTED));
    return ACL_SUCCESS;
}

aclError aclFinalize(void) {
    int state = atomic_load(&acl_state);
    do {
        if (state == NEVER_STARTED)
            return rill__acl_fail(ACL_ERROR_UNINITIALIZE,
                                  "aclFinalize: ACL was never started; call aclInit first");
        if (state == FINALIZED)
            return rill__acl_fail(ACL_ERROR_REPEAT_FINALIZE,
                                  "aclFinalize: ACL is already finalized");
    } while (!atomic_compare_exchange_weak(&acl_state, &state, FINALIZED));
    /* Callbacks that no thread would process otherwise run now, so that
     * rill_shutdown's wait for all work ends. */
    rill__acl_reports_release_all();
    aclError err = rill__acl_check(rill_shutdown(), "aclFinalize");
    if (err != ACL_SUCCESS) {
        atomic_store(&acl_state, STARTED); /* nothing was released */
        return err;
    }
    rill__acl_memory_forget_all();
    rill__acl_streams_forget_all();
    rill__acl_reports_forget_all();
    rill__acl_models_forget_all();
    rill__acl_resets_forget_all();
    return ACL_SUCCESS;
}

/* ---- devices ---- */

static aclError device_by_id(const char *call, int32_t deviceId, rill_device **out) {
    int count;
    aclError err = rill__acl_check(rill_device_count(&count), call);
    if (err != ACL_SUCCESS)
        return err;
    if (deviceId < 0 || deviceId >= count)
        return rill__acl_fail(ACL_ERROR_RT_INVALID_DEVICEID,
                              "%s: deviceId %d names no device; there are %d (0 to %d)", call,
                              (int)deviceId, count, count - 1);
    return rill__acl_check(rill_device_get(deviceId, out), call);
}

aclError aclrtSetDevice(int32_t deviceId) {
    rill_device *dev;
    aclError err = device_by_id("aclrtSetDevice", deviceId, &dev);
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_set_device(dev), "aclrtSetDevice");
    if (err == ACL_SUCCESS && !rill__acl_device_set(deviceId))
        err = rill__acl_fail(ACL_ERROR_BAD_ALLOC, "aclrtSetDevice: no memory to count the call");
    return err;
}

aclError aclrtResetDevice(int32_t deviceId) {
    rill_device *dev;
    aclError err = device_by_id("aclrtResetDevice", deviceId, &dev);
    if (err != ACL_SUCCESS)
        return err;
    return rill__acl_device_reset("aclrtResetDevice", dev, deviceId, false);
}

aclError aclrtResetDeviceForce(int32_t deviceId) {
    rill_device *dev;
    aclError err = device_by_id("aclrtResetDeviceForce", deviceId, &dev);
    if (err != ACL_SUCCESS)
        return err;
    return rill__acl_device_reset("aclrtResetDeviceForce", dev, deviceId, true);
}

aclError aclrtGetDevice(int32_t *deviceId) {
    if (!deviceId)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is NULL");
    rill_device *dev;
    rill_device_info info;
    aclError err = rill__acl_check(rill_get_device(&dev), "aclrtGetDevice");
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_device_get_info(dev, &info), "aclrtGetDevice");
    if (err != ACL_SUCCESS)
        return err;
    *deviceId = info.ordinal;
    return ACL_SUCCESS;
}

aclError aclrtGetDeviceCount(uint32_t *count) {
    if (!count)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetDeviceCount: count is NULL");
    int n;
    aclError err = rill__acl_check(rill_device_count(&n), "aclrtGetDeviceCount");
    if (err != ACL_SUCCESS)
        return err;
    *count = (uint32_t)n;
    return ACL_SUCCESS;
}

aclError aclrtSynchronizeDevice(void) {
    return rill__acl_check(rill__acl_wait(rill__acl_wait_device, NULL, UINT64_MAX),
                           "aclrtSynchronizeDevice");
}

/* ---- streams ---- */

aclError aclrtCreateStream(aclrtStream *stream) {
    if (!stream)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is NULL");
    rill_stream *s = NULL;
    aclError err = rill__acl_check(rill_stream_create(NULL, 0, &s), "aclrtCreateStream");
    if (err == ACL_SUCCESS && !rill__acl_note_stream(s)) {
        (void)rill_stream_destroy(s);
        s = NULL;
        err =
            rill__acl_fail(ACL_ERROR_BAD_ALLOC, "aclrtCreateStream: no memory to note the stream");
    }
    *stream = s;
    return err;
}

enum {
    STREAM_FLAGS =
        ACL_STREAM_FAST_LAUNCH | ACL_STREAM_FAST_SYNC | ACL_STREAM_PERSISTENT | ACL_STREAM_HUGE
};

aclError aclrtCreateStreamWithConfig(aclrtStream *stream, uint32_t priority, uint32_t flag) {
    if (!stream)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtCreateStreamWithConfig: stream is NULL");
    *stream = NULL;
    if (flag & ~(uint32_t)STREAM_FLAGS)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtCreateStreamWithConfig: flag 0x%x has bits that are no "
                              "ACL_STREAM_* flag",
                              (unsigned)flag);
    rill_device *dev;
    rill_device_info info;
    aclError err = rill__acl_check(rill_get_device(&dev), "aclrtCreateStreamWithConfig");
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_device_get_info(dev, &info), "aclrtCreateStreamWithConfig");
    if (err != ACL_SUCCESS)
        return err;
    /* ACL's 0 is the highest priority, as rill's greatest_priority is; each
     * step down is one step toward rill's least_priority, where it stops. */
    int span = info.least_priority - info.greatest_priority;
    int steps = priority > (uint32_t)span ? span : (int)priority;
    rill_stream *s = NULL;
    err = rill__acl_check(rill_stream_create(dev, info.greatest_priority + steps, &s),
                          "aclrtCreateStreamWithConfig");
    if (err == ACL_SUCCESS)
        err = rill__acl_stream_note_flags("aclrtCreateStreamWithConfig", s, flag);
    if (err == ACL_SUCCESS && !rill__acl_note_stream(s)) {
        rill__acl_stream_forget(s);
        err = rill__acl_fail(ACL_ERROR_BAD_ALLOC,
                             "aclrtCreateStreamWithConfig: no memory to note the stream");
    }
    if (err != ACL_SUCCESS && s) {
        (void)rill_stream_destroy(s);
        s = NULL;
    }
    *stream = s;
    return err;
}

aclError aclrtDestroyStream(aclrtStream stream) {
    if (!stream)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtDestroyStream: stream is NULL; the default stream is not "
                              "destroyed");
    aclError err =
        rill__acl_check(rill_stream_destroy((rill_stream *)stream), "aclrtDestroyStream");
    if (err == ACL_SUCCESS) {
        rill__acl_stream_forget(stream);
        rill__acl_forget_stream(stream);
    }
    return err;
}

aclError aclrtSynchronizeStream(aclrtStream stream) {
    return rill__acl_check(rill__acl_wait(rill__acl_wait_stream, stream, UINT64_MAX),
                           "aclrtSynchronizeStream");
}

aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
    if (!event)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamWaitEvent: event is NULL");
    return rill__acl_check(rill_stream_wait_event((rill_stream *)stream, (rill_event *)event),
                           "aclrtStreamWaitEvent");
}

/* ---- events ---- */

aclError aclrtCreateEvent(aclrtEvent *event) {
    return aclrtCreateEventWithFlag(event, ACL_EVENT_SYNC | ACL_EVENT_TIME_LINE);
}

enum {
    EVENT_FLAGS =
        ACL_EVENT_SYNC | ACL_EVENT_CAPTURE_STREAM_PROGRESS | ACL_EVENT_TIME_LINE | ACL_EVENT_IPC
};

aclError aclrtCreateEventWithFlag(aclrtEvent *event, uint32_t flag) {
    if (!event)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: event is NULL");
    *event = NULL;
    if (flag & ~(uint32_t)EVENT_FLAGS)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtCreateEventWithFlag: flag 0x%x has bits other than "
                              "ACL_EVENT_SYNC, ACL_EVENT_CAPTURE_STREAM_PROGRESS, "
                              "ACL_EVENT_TIME_LINE and ACL_EVENT_IPC",
                              (unsigned)flag);
    unsigned flags = (flag & ACL_EVENT_TIME_LINE ? RILL_EVENT_TIMING : RILL_EVENT_DEFAULT) |
                     (flag & ACL_EVENT_IPC ? RILL_EVENT_INTERPROCESS : RILL_EVENT_DEFAULT);
    rill_event *e = NULL;
    aclError err = rill__acl_check(rill_event_create(flags, &e), "aclrtCreateEvent");
    if (err == ACL_SUCCESS && !rill__acl_note_event(e)) {
        (void)rill_event_destroy(e);
        e = NULL;
        err = rill__acl_fail(ACL_ERROR_BAD_ALLOC, "aclrtCreateEvent: no memory to note the event");
    }
    *event = e;
    return err;
}

aclError aclrtDestroyEvent(aclrtEvent event) {
    if (!event)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtDestroyEvent: event is NULL");
    aclError err = rill__acl_check(rill_event_destroy((rill_event *)event), "aclrtDestroyEvent");
    if (err == ACL_SUCCESS)
        rill__acl_forget_event(event);
    return err;
}

aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
    if (!event)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtRecordEvent: event is NULL");
    return rill__acl_record_event("aclrtRecordEvent", (rill_event *)event, (rill_stream *)stream);
}

aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus *status) {
    if (!event || !status)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: %s is NULL",
                              event ? "status" : "event");
    rill_status st = rill_event_query((rill_event *)event);
    if (st == RILL_NOT_READY) {
        *status = ACL_EVENT_RECORDED_STATUS_NOT_READY;
        return ACL_SUCCESS;
    }
    aclError err = rill__acl_check(st, "aclrtQueryEventStatus");
    if (err == ACL_SUCCESS)
        *status = ACL_EVENT_RECORDED_STATUS_COMPLETE;
    return err;
}

aclError aclrtSynchronizeEvent(aclrtEvent event) {
    if (!event)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtSynchronizeEvent: event is NULL");
    return rill__acl_check(rill__acl_wait(rill__acl_wait_event, event, UINT64_MAX),
                           "aclrtSynchronizeEvent");
}

aclError aclrtEventElapsedTime(float *ms, aclrtEvent startEvent, aclrtEvent endEvent) {
    if (!ms || !startEvent || !endEvent)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: %s is NULL",
                              !ms           ? "ms"
                              : !startEvent ? "startEvent"
                                            : "endEvent");
    rill_status st = rill_event_elapsed_ms((rill_event *)startEvent, (rill_event *)endEvent, ms);
    if (st == RILL_NOT_READY)
        return rill__acl_fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                              "aclrtEventElapsedTime: an event's recorded work is still pending; "
                              "synchronize on endEvent first");
    return rill__acl_check(st, "aclrtEventElapsedTime");
}

/* ---- aclsysGetVersionStr, aclsysGetVersionNum ---- */

#define RILL_ACL_STR2(x) #x
#define RILL_ACL_STR(x)  RILL_ACL_STR2(x)

/* Whether pkgName names the one package there is, "runtime" (librill_acl),
 * else the message. */
static bool package_is_ours(const char *call, const char *pkgName) {
    if (!pkgName) {
        rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: pkgName is NULL", call);
        return false;
    }
    if (strcmp(pkgName, "runtime") != 0) {
        rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                       "%s: no package '%s' is installed: librill_acl runs on rill with no CANN "
                       "packages, and only \"runtime\" (librill_acl itself) has a version",
                       call, pkgName);
        return false;
    }
    return true;
}

aclError aclsysGetVersionStr(char *pkgName, char *versionStr) {
    const char *call = "aclsysGetVersionStr";
    if (!package_is_ours(call, pkgName))
        return ACL_ERROR_INVALID_PARAM;
    if (!versionStr)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: versionStr is NULL", call);
    snprintf(versionStr, ACL_PKG_VERSION_MAX_SIZE, "%s",
             RILL_ACL_STR(RILL_ACL_VERSION_MAJOR) "." RILL_ACL_STR(
                 RILL_ACL_VERSION_MINOR) "." RILL_ACL_STR(RILL_ACL_VERSION_PATCH));
    return ACL_SUCCESS;
}

aclError aclsysGetVersionNum(char *pkgName, int32_t *versionNum) {
    const char *call = "aclsysGetVersionNum";
    if (!package_is_ours(call, pkgName))
        return ACL_ERROR_INVALID_PARAM;
    if (!versionNum)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: versionNum is NULL", call);
    *versionNum = RILL_ACL_VERSION_MAJOR * 1000000 + RILL_ACL_VERSION_MINOR * 10000 +
                  RILL_ACL_VERSION_PATCH * 100;
    return ACL_SUCCESS;
}
