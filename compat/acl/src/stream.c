/* SPDX-License-Identifier: MIT */
/*
 * ACL's stream calls beyond create, destroy and synchronize (runtime.c),
 * each one rill call or two: waits with a time limit
 * (rill_*_synchronize_for), queries, priorities, failure mode. rill keeps
 * no ACL_STREAM_* flags, so this file notes them: a table of (stream,
 * flags) for the streams created with flags, under one mutex, dropped at
 * destruction and at aclFinalize. A note of a stream destroyed through
 * rill itself stays, harmless: rill never hands out that handle again.
 */
#include "stream.h"

#include <pthread.h>
#include <stdlib.h>

#include "error.h"
#include "report.h"
#include "reset.h"

struct note {
    aclrtStream stream;
    uint32_t flags;
};

static pthread_mutex_t notes_lock = PTHREAD_MUTEX_INITIALIZER;
/* guarded by notes_lock: notes[0..count) */
static struct note *notes; /* owned */
static size_t count, capacity;

static void lock(void) {
    if (pthread_mutex_lock(&notes_lock) != 0)
        abort();
}

static void unlock(void) {
    if (pthread_mutex_unlock(&notes_lock) != 0)
        abort();
}

aclError rill__acl_stream_note_flags(const char *call, aclrtStream stream, uint32_t flags) {
    if (flags == 0)
        return ACL_SUCCESS;
    lock();
    if (count == capacity) {
        size_t grown = capacity ? capacity * 2 : 16;
        struct note *n = realloc(notes, grown * sizeof *n);
        if (!n) {
            unlock();
            return rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory to note the stream's flags",
                                  call);
        }
        notes = n;
        capacity = grown;
    }
    notes[count++] = (struct note){.stream = stream, .flags = flags};
    unlock();
    return ACL_SUCCESS;
}

void rill__acl_stream_forget(aclrtStream stream) {
    lock();
    for (size_t i = 0; i < count; i++)
        if (notes[i].stream == stream) {
            notes[i] = notes[--count];
            break;
        }
    unlock();
}

void rill__acl_streams_forget_all(void) {
    lock();
    free(notes);
    notes = NULL;
    count = capacity = 0;
    unlock();
}

aclError rill__acl_timeout_ns(const char *call, int32_t timeout, uint64_t *ns) {
    if (timeout < -1)
        return rill__acl_fail(ACL_ERROR_RT_PARAM_INVALID,
                              "%s: timeout %d ms is below -1; pass -1 to wait without a limit",
                              call, (int)timeout);
    *ns = timeout == -1 ? UINT64_MAX : (uint64_t)timeout * 1000000u;
    return ACL_SUCCESS;
}

rill_status rill__acl_wait_stream(void *stream, uint64_t timeout_ns) {
    return timeout_ns == UINT64_MAX ? rill_stream_synchronize(stream)
                                    : rill_stream_synchronize_for(stream, timeout_ns);
}

rill_status rill__acl_wait_event(void *event, uint64_t timeout_ns) {
    return timeout_ns == UINT64_MAX ? rill_event_synchronize(event)
                                    : rill_event_synchronize_for(event, timeout_ns);
}

rill_status rill__acl_wait_device(void *device, uint64_t timeout_ns) {
    return timeout_ns == UINT64_MAX ? rill_device_synchronize(device)
                                    : rill_device_synchronize_for(device, timeout_ns);
}

/* ---- force and time limits ---- */

aclError aclrtDestroyStreamForce(aclrtStream stream) {
    if (!stream)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtDestroyStreamForce: stream is NULL; the default stream is "
                              "not destroyed");
    aclError err =
        rill__acl_check(rill_stream_destroy((rill_stream *)stream), "aclrtDestroyStreamForce");
    if (err == ACL_SUCCESS) {
        rill__acl_stream_forget(stream);
        rill__acl_forget_stream(stream);
    }
    return err;
}

aclError aclrtSynchronizeStreamWithTimeout(aclrtStream stream, int32_t timeout) {
    const char *call = "aclrtSynchronizeStreamWithTimeout";
    uint64_t ns;
    aclError err = rill__acl_timeout_ns(call, timeout, &ns);
    if (err != ACL_SUCCESS)
        return err;
    rill_status st = rill__acl_wait(rill__acl_wait_stream, stream, ns);
    if (st == RILL_NOT_READY)
        return rill__acl_fail(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                              "%s: the stream's work was not done within %d ms; it runs on", call,
                              (int)timeout);
    return rill__acl_check(st, call);
}

aclError aclrtSynchronizeDeviceWithTimeout(int32_t timeout) {
    const char *call = "aclrtSynchronizeDeviceWithTimeout";
    uint64_t ns;
    aclError err = rill__acl_timeout_ns(call, timeout, &ns);
    if (err != ACL_SUCCESS)
        return err;
    rill_status st = rill__acl_wait(rill__acl_wait_device, NULL, ns);
    if (st == RILL_NOT_READY)
        return rill__acl_fail(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                              "%s: the device's work was not done within %d ms; it runs on", call,
                              (int)timeout);
    return rill__acl_check(st, call);
}

/* ---- queries ---- */

aclError aclrtStreamQuery(aclrtStream stream, aclrtStreamStatus *status) {
    if (!status)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtStreamQuery: status is NULL");
    rill_status st = rill_stream_query((rill_stream *)stream);
    if (st == RILL_NOT_READY) {
        *status = ACL_STREAM_STATUS_NOT_READY;
        return ACL_SUCCESS;
    }
    aclError err = rill__acl_check(st, "aclrtStreamQuery");
    if (err == ACL_SUCCESS)
        *status = ACL_STREAM_STATUS_COMPLETE;
    return err;
}

/* The device info of stream's device (the current device for NULL). */
static aclError stream_device_info(const char *call, aclrtStream stream, rill_device_info *info) {
    rill_device *dev;
    aclError err = rill__acl_check(rill_stream_get_device((rill_stream *)stream, &dev), call);
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_device_get_info(dev, info), call);
    return err;
}

aclError aclrtStreamGetPriority(aclrtStream stream, uint32_t *priority) {
    const char *call = "aclrtStreamGetPriority";
    if (!priority)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: priority is NULL", call);
    rill_device_info info;
    int p;
    aclError err = stream_device_info(call, stream, &info);
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_stream_get_priority((rill_stream *)stream, &p), call);
    if (err != ACL_SUCCESS)
        return err;
    /* aclrtCreateStreamWithConfig's mapping, backwards: ACL's 0 is rill's
     * greatest_priority. */
    *priority = (uint32_t)(p - info.greatest_priority);
    return ACL_SUCCESS;
}

aclError aclrtStreamGetFlags(aclrtStream stream, uint32_t *flags) {
    const char *call = "aclrtStreamGetFlags";
    if (!flags)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: flags is NULL", call);
    int p;
    aclError err = rill__acl_check(rill_stream_get_priority((rill_stream *)stream, &p), call);
    if (err != ACL_SUCCESS)
        return err;
    uint32_t f = 0;
    lock();
    for (size_t i = 0; i < count; i++)
        if (stream && notes[i].stream == stream)
            f = notes[i].flags;
    unlock();
    *flags = f;
    return ACL_SUCCESS;
}

aclError aclrtDeviceGetStreamPriorityRange(int32_t *leastPriority, int32_t *greatestPriority) {
    const char *call = "aclrtDeviceGetStreamPriorityRange";
    if (!leastPriority || !greatestPriority)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: %s is NULL", call,
                              leastPriority ? "greatestPriority" : "leastPriority");
    rill_device_info info;
    aclError err = stream_device_info(call, NULL, &info);
    if (err != ACL_SUCCESS)
        return err;
    *leastPriority = info.least_priority - info.greatest_priority;
    *greatestPriority = 0;
    return ACL_SUCCESS;
}

/* ---- failure mode ---- */

aclError aclrtSetStreamFailureMode(aclrtStream stream, uint64_t mode) {
    const char *call = "aclrtSetStreamFailureMode";
    if (mode != ACL_CONTINUE_ON_FAILURE && mode != ACL_STOP_ON_FAILURE)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: mode %llu is neither ACL_CONTINUE_ON_FAILURE (0) nor "
                              "ACL_STOP_ON_FAILURE (1)",
                              call, (unsigned long long)mode);
    int p;
    aclError err = rill__acl_check(rill_stream_get_priority((rill_stream *)stream, &p), call);
    if (err != ACL_SUCCESS)
        return err;
    if (mode == ACL_CONTINUE_ON_FAILURE)
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: ACL_CONTINUE_ON_FAILURE cannot be had: a rill stream skips "
                              "all its work after a failed task (ACL_STOP_ON_FAILURE), which "
                              "its next query or synchronize reports",
                              call);
    return ACL_SUCCESS;
}
