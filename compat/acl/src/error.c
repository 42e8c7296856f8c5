/* SPDX-License-Identifier: MIT */
/*
 * The error side of librill_acl: one message per thread, set only by
 * rill__acl_fail (so one breakpoint catches every failure), and the table
 * that gives each rill status its ACL code. A rill failure passes through
 * with rill's sentence; the codes are ACL's runtime codes for the same
 * situation (docs/acl.md lists them).
 */
#include "error.h"

#include <assert.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "acl/acl_rt.h"

enum { MESSAGE_BYTES = 1280 }; /* a call's name and rill's 1023-byte sentence fit */

static _Thread_local char message[MESSAGE_BYTES];
static _Thread_local int has_message;
/* The message aclGetRecentErrMsg took last: its answer stays readable
 * until the thread's next aclGetRecentErrMsg, whatever fails meanwhile. */
static _Thread_local char taken[MESSAGE_BYTES];
static _Thread_local aclError last_code; /* for aclrtGetLastError */

/* Indexed by rill_status; one row per status, in the enum's order. */
static const aclError code_of_status[] = {
    [RILL_OK] = ACL_SUCCESS,
    [RILL_NOT_READY] = ACL_ERROR_RT_EVENT_NOT_COMPLETE,
    [RILL_ERROR_INVALID_ARGUMENT] = ACL_ERROR_RT_PARAM_INVALID,
    [RILL_ERROR_OUT_OF_MEMORY] = ACL_ERROR_RT_MEMORY_ALLOCATION,
    [RILL_ERROR_NO_DEVICE] = ACL_ERROR_RT_NO_DEVICE,
    [RILL_ERROR_DEVICE_MISMATCH] = ACL_ERROR_RT_STREAM_CONTEXT,
    [RILL_ERROR_NOT_SUPPORTED] = ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
    [RILL_ERROR_NOT_PERMITTED] = ACL_ERROR_RT_NO_PERMISSION,
    [RILL_ERROR_TIMING_DISABLED] = ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
    [RILL_ERROR_NOT_RECORDED] = ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID,
    [RILL_ERROR_KERNEL_FAILED] = ACL_ERROR_RT_AICORE_EXCEPTION,
    [RILL_ERROR_CAPTURE_UNSUPPORTED] = ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
    [RILL_ERROR_CAPTURE_INVALIDATED] = ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
    [RILL_ERROR_CAPTURE_UNJOINED] = ACL_ERROR_RT_STREAM_UNJOINED,
    [RILL_ERROR_CAPTURE_UNMATCHED] = ACL_ERROR_RT_STREAM_CAPTURE_UNMATCHED,
    [RILL_ERROR_CAPTURE_ISOLATION] = ACL_ERROR_STREAM_CAPTURE_CONFLICT,
    [RILL_ERROR_CAPTURE_WRONG_THREAD] = ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
    [RILL_ERROR_IPC] = ACL_ERROR_RT_IPC_ERROR,
    [RILL_ERROR_INTERNAL] = ACL_ERROR_RT_INTERNAL_ERROR,
    [RILL_ERROR_DEVICE_LOST] = ACL_ERROR_RT_NO_DEVICE,
};
static_assert(sizeof code_of_status / sizeof code_of_status[0] == RILL_ERROR_DEVICE_LOST + 1,
              "every rill_status needs its ACL code");

aclError rill__acl_code_of(rill_status status) {
    if ((unsigned)status >= sizeof code_of_status / sizeof code_of_status[0])
        return ACL_ERROR_RT_INTERNAL_ERROR;
    return code_of_status[status];
}

aclError rill__acl_fail(aclError code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    has_message = 1;
    last_code = code;
    return code;
}

static void fail_from_rill(rill_status status, const char *call) {
    /* RILL_NOT_READY is no failure to rill and leaves no sentence of its own. */
    const char *sentence = status == RILL_NOT_READY ? "" : rill_last_error();
    if (sentence[0] == '\0')
        sentence = rill_status_string(status);
    rill__acl_fail(rill__acl_code_of(status), "%s: %s", call, sentence);
}

aclError rill__acl_check(rill_status status, const char *call) {
    if (status == RILL_OK)
        return ACL_SUCCESS;
    fail_from_rill(status, call);
    return rill__acl_code_of(status);
}

aclnnStatus rill__aclnn_check(rill_status status, const char *call) {
    if (status == RILL_OK)
        return ACLNN_SUCCESS;
    fail_from_rill(status, call);
    return status == RILL_ERROR_INVALID_ARGUMENT ? ACLNN_ERR_PARAM_INVALID
                                                 : ACLNN_ERR_RUNTIME_ERROR;
}

const char *aclGetRecentErrMsg(void) {
    if (!has_message)
        return NULL;
    memcpy(taken, message, sizeof taken);
    has_message = 0;
    return taken;
}

/* ---- aclrtGetLastError and the calls ACL reports NPU faults with ---- */

static aclError last_error(const char *call, aclrtLastErrLevel level, bool take) {
    if (level != ACL_RT_THREAD_LEVEL)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: level %d is not ACL_RT_THREAD_LEVEL, the only level", call,
                              (int)level);
    aclError code = last_code;
    if (take)
        last_code = ACL_SUCCESS;
    return code;
}

aclError aclrtGetLastError(aclrtLastErrLevel level) {
    return last_error("aclrtGetLastError", level, true);
}

aclError aclrtPeekAtLastError(aclrtLastErrLevel level) {
    return last_error("aclrtPeekAtLastError", level, false);
}

aclError aclrtGetErrorVerbose(int32_t deviceId, aclrtErrorInfo *errorInfo) {
    if (!errorInfo)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclrtGetErrorVerbose: errorInfo is NULL");
    int count;
    aclError err = rill__acl_check(rill_device_count(&count), "aclrtGetErrorVerbose");
    if (err != ACL_SUCCESS)
        return err;
    if (deviceId < 0 || deviceId >= count)
        return rill__acl_fail(ACL_ERROR_RT_INVALID_DEVICEID,
                              "aclrtGetErrorVerbose: deviceId %d names no device; there are %d",
                              (int)deviceId, count);
    return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "aclrtGetErrorVerbose: the details of an NPU's memory, cache, AI "
                          "core or link faults do not exist on rill's devices; a failed task's "
                          "sentence is in aclGetRecentErrMsg after its stream's synchronize");
}

aclError aclrtSetExceptionInfoCallback(aclrtExceptionInfoCallback callback) {
    if (!callback)
        return ACL_SUCCESS;
    return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                          "aclrtSetExceptionInfoCallback: rill calls no function when a task "
                          "fails; it reports the failure at the stream's next query or "
                          "synchronize, with its sentence in aclGetRecentErrMsg");
}
