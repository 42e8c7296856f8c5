/* SPDX-License-Identifier: MIT */
/*
 * ACL's event calls beyond those of runtime.c, each on rill's events: the
 * flag variants of create, record and wait take the default flag and
 * refuse ACL graphs' external events; a reset checks its handles and
 * changes nothing; the interprocess calls are rill's, byte for byte (both
 * handles are 64 bytes). No state of its own.
 */
#include "event.h"

#include <string.h>

#include "error.h"
#include "report.h"
#include "stream.h"

_Static_assert(sizeof(aclrtIpcEventHandle) == sizeof(rill_ipc_event_handle),
               "an ACL interprocess event handle carries rill's");

aclError aclrtCreateEventExWithFlag(aclrtEvent *event, uint32_t flag) {
    return aclrtCreateEventWithFlag(event, flag);
}

aclError aclrtRecordEventWithFlag(aclrtEvent event, aclrtStream stream, uint32_t flag) {
    if (flag == ACL_EVENT_RECORD_EXTERNAL)
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "aclrtRecordEventWithFlag: ACL_EVENT_RECORD_EXTERNAL records an "
                              "event for an NPU model's external wait, which rill has not; use "
                              "ACL_EVENT_RECORD_DEFAULT");
    if (flag != ACL_EVENT_RECORD_DEFAULT)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclrtRecordEventWithFlag: flag 0x%x is neither "
                              "ACL_EVENT_RECORD_DEFAULT nor ACL_EVENT_RECORD_EXTERNAL",
                              (unsigned)flag);
    if (!event)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtRecordEventWithFlag: event is NULL");
    return rill__acl_check(rill_event_record((rill_event *)event, (rill_stream *)stream),
                           "aclrtRecordEventWithFlag");
}

aclError aclrtStreamWaitEventWithFlag(aclrtStream stream, aclrtEvent event, uint32_t timeout,
                                      uint32_t flag) {
    const char *call = "aclrtStreamWaitEventWithFlag";
    if (flag == ACL_EVENT_WAIT_EXTERNAL)
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: ACL_EVENT_WAIT_EXTERNAL waits in an NPU model for an "
                              "external record, which rill has not; use ACL_EVENT_WAIT_DEFAULT",
                              call);
    if (flag != ACL_EVENT_WAIT_DEFAULT)
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
    *event = e;
    return err;
}
