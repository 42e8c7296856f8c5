/* SPDX-License-Identifier: MIT */
/*
 * ACL's event calls beyond those of runtime.c, each on rill's events: the
 * flag variants of create, record and wait take the default flag, and the
 * external ones cut a capture (model.c); a reset checks its handles and
 * changes nothing; the interprocess calls are rill's, byte for byte (both
 * handles are 64 bytes). A rill event records on streams of its device
 * only, but CANN's process that opens an interprocess event records it on
 * its own device's streams: such a record is relayed through a stream of
 * the event's device, made for the record and destroyed at once. rill
 * gives event times only relative to another event, so
 * aclrtEventGetTimestamp records a reference event at the call, on a
 * stream of its own, and places the event on the host's clock by its
 * elapsed time to that one. No state of its own.
 */
#include "event.h"

#include <string.h>
#include <time.h>

#include "error.h"
#include "model.h"
#include "report.h"
#include "reset.h"
#include "stream.h"

_Static_assert(sizeof(aclrtIpcEventHandle) == sizeof(rill_ipc_event_handle),
               "an ACL interprocess event handle carries rill's");

aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag) {
    return aclrtCreateEventWithFlag(event, flag);
}

aclError aclrtRecordEventWithFlag(aclrtEvent event, aclrtStream stream, uint32_t flag) {
    if (flag != ACL_EVENT_RECORD_DEFAULT && flag != ACL_EVENT_RECORD_EXTERNAL)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtRecordEventWithFlag: flag 0x%x is neither "
                              "ACL_EVENT_RECORD_DEFAULT nor ACL_EVENT_RECORD_EXTERNAL",
                              (unsigned)flag);
    if (!event)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtRecordEventWithFlag: event is NULL");
    if (flag == ACL_EVENT_RECORD_EXTERNAL)
        return rill__acl_capture_external("aclrtRecordEventWithFlag", (rill_stream *)stream,
                                          (rill_event *)event, true);
    return rill__acl_record_event("aclrtRecordEventWithFlag", (rill_event *)event,
                                  (rill_stream *)stream);
}

aclError aclrtStreamWaitEventWithFlag(aclrtStream stream, aclrtEvent event, uint32_t timeout,
                                      uint32_t flag) {
    const char *call = "aclrtStreamWaitEventWithFlag";
    if (flag != ACL_EVENT_WAIT_DEFAULT && flag != ACL_EVENT_WAIT_EXTERNAL)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: flag 0x%x is neither ACL_EVENT_WAIT_DEFAULT nor "
                              "ACL_EVENT_WAIT_EXTERNAL",
                              call, (unsigned)flag);
    if (timeout != 0)
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: timeout %u ms: a rill stream's wait has no time limit; pass 0",
                              call, (unsigned)timeout);
    if (!event)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: event is NULL", call);
    if (flag == ACL_EVENT_WAIT_EXTERNAL)
        return rill__acl_capture_external(call, (rill_stream *)stream, (rill_event *)event, false);
    return rill__acl_check(rill_stream_wait_event((rill_stream *)stream, (rill_event *)event),
                           call);
}

aclError aclrtResetEvent(aclrtEvent event, aclrtStream stream) {
    const char *call = "aclrtResetEvent";
    if (!event)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: event is NULL", call);
    rill_device *dev;
    int p;
    aclError err = rill__acl_check(rill_event_get_device((rill_event *)event, &dev), call);
    if (err == ACL_SUCCESS)
        err = rill__acl_check(rill_stream_get_priority((rill_stream *)stream, &p), call);
    return err;
}

aclError aclrtSynchronizeEventWithTimeout(aclrtEvent event, int32_t timeout) {
    const char *call = "aclrtSynchronizeEventWithTimeout";
    if (!event)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: event is NULL", call);
    uint64_t ns;
    aclError err = rill__acl_timeout_ns(call, timeout, &ns);
    if (err != ACL_SUCCESS)
        return err;
    rill_status st = rill__acl_wait(rill__acl_wait_event, event, ns);
    if (st == RILL_NOT_READY)
        return rill__acl_fail(ACL_ERROR_RT_EVENT_SYNC_TIMEOUT,
                              "%s: the event's recorded work was not done within %d ms; it runs "
                              "on",
                              call, (int)timeout);
    return rill__acl_check(st, call);
}

/* The host's CLOCK_MONOTONIC in nanoseconds. */
static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Records a timing event on a new stream of dev and waits for it: ref and
 * the host's clock right after it completed. */
static rill_status record_reference(rill_device *dev, rill_stream **stream, rill_event **ref,
                                    uint64_t *at_ns) {
    rill_status st = rill_stream_create(dev, 0, stream);
    if (st == RILL_OK)
        st = rill_event_create(RILL_EVENT_TIMING, ref);
    if (st == RILL_OK)
        st = rill_event_record(*ref, *stream);
    if (st == RILL_OK)
        st = rill_event_synchronize(*ref);
    *at_ns = now_ns();
    return st;
}

aclError aclrtEventGetTimestamp(aclrtEvent event, uint64_t *timestamp) {
    const char *call = "aclrtEventGetTimestamp";
    if (!event || !timestamp)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: %s is NULL", call,
                              event ? "timestamp" : "event");
    rill_event *e = (rill_event *)event;
    /* The event against itself: refused as elapsed time refuses it (no
     * timing, never recorded, pending, failed, destroyed). */
    float ms;
    rill_status st = rill_event_elapsed_ms(e, e, &ms);
    if (st == RILL_NOT_READY)
        return rill__acl_fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                              "%s: the event's recorded work is still pending; synchronize on "
                              "it first",
                              call);
    rill_device *dev = NULL;
    if (st == RILL_OK)
        st = rill_event_get_device(e, &dev);
    aclError err = rill__acl_check(st, call);
    if (err != ACL_SUCCESS)
        return err;
    rill_stream *s = NULL;
    rill_event *ref = NULL;
    uint64_t at_ns;
    st = record_reference(dev, &s, &ref, &at_ns);
    if (st == RILL_OK)
        st = rill_event_elapsed_ms(e, ref, &ms);
    err = rill__acl_check(st, call);
    if (ref)
        (void)rill_event_destroy(ref);
    if (s)
        (void)rill_stream_destroy(s);
    if (err != ACL_SUCCESS)
        return err;
    uint64_t before_ns = ms > 0 ? (uint64_t)((double)ms * 1e6) : 0;
    *timestamp = before_ns < at_ns ? at_ns - before_ns : 0;
    return ACL_SUCCESS;
}

/* ---- interprocess events ---- */

aclError aclrtIpcGetEventHandle(aclrtEvent event, aclrtIpcEventHandle *handle) {
    const char *call = "aclrtIpcGetEventHandle";
    if (!event || !handle)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: %s is NULL", call,
                              event ? "handle" : "event");
    rill_ipc_event_handle h;
    aclError err = rill__acl_check(rill_event_ipc_handle((rill_event *)event, &h), call);
    if (err == ACL_SUCCESS)
        memcpy(handle->reserved, h.bytes, sizeof h.bytes);
    return err;
}

aclError aclrtIpcOpenEventHandle(aclrtIpcEventHandle handle, aclrtEvent *event) {
    const char *call = "aclrtIpcOpenEventHandle";
    if (!event)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: event is NULL", call);
    *event = NULL;
    rill_ipc_event_handle h;
    memcpy(h.bytes, handle.reserved, sizeof h.bytes);
    rill_event *e = NULL;
    aclError err = rill__acl_check(rill_event_open_ipc_handle(&h, &e), call);
    if (err == ACL_SUCCESS && !rill__acl_note_event(e)) {
        (void)rill_event_destroy(e);
        e = NULL;
        err = rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory to note the event", call);
    }
    *event = e;
    return err;
}

/* The relay of rill__acl_record_event: event (bound to dev) records, on a
 * stream of dev made for it, the point that stream has reached now. */
static rill_status relay_record(rill_event *event, rill_device *dev, rill_stream *stream) {
    rill_event *hop = NULL;
    rill_stream *relay = NULL;
    rill_status st = rill_event_create(0, &hop);
    if (st == RILL_OK)
        st = rill_event_record(hop, stream);
    if (st == RILL_OK)
        st = rill_stream_create(dev, 0, &relay);
    if (st == RILL_OK)
        st = rill_stream_wait_event(relay, hop);
    if (st == RILL_OK)
        st = rill_event_record(event, relay);
    /* Both may go with work pending: rill releases them once it is done. */
    if (relay)
        rill_stream_destroy(relay);
    if (hop)
        rill_event_destroy(hop);
    return st;
}

aclError rill__acl_record_event(const char *call, rill_event *event, rill_stream *stream) {
    rill_status st = rill_event_record(event, stream);
    if (st != RILL_ERROR_DEVICE_MISMATCH)
        return rill__acl_check(st, call);
    /* Only an interprocess event is relayed (exporting a handle of a bound
     * event changes nothing), and not into a capture, which the relay's
     * stream would join and never leave. */
    rill_ipc_event_handle h;
    rill_device *dev = NULL;
    rill_capture_status cap = RILL_CAPTURE_NONE;
    if (rill_event_ipc_handle(event, &h) != RILL_OK ||
        rill_event_get_device(event, &dev) != RILL_OK ||
        rill_stream_get_capture_status(stream, &cap) != RILL_OK || cap != RILL_CAPTURE_NONE)
        return rill__acl_fail(ACL_ERROR_RT_STREAM_CONTEXT,
                              "%s: the event belongs to another device than the stream; record "
                              "it on a stream of its device (only an interprocess event is "
                              "recorded across devices, and not in a capture)",
                              call);
    return rill__acl_check(relay_record(event, dev, stream), call);
}
