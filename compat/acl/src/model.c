/* SPDX-License-Identifier: MIT */
/*
 * ACL's capture on rill's: a capture is rill_stream_begin_capture and
 * rill_stream_end_capture, and the model that ends it is the graph
 * instantiated at once (the graph itself is then destroyed): an aclmdlRI is
 * a rill_graph_exec. ACL's capture modes and statuses have rill's values.
 */
#include "model.h"

#include <assert.h>
#include <stdbool.h>

#include "error.h"

static_assert((int)ACL_MODEL_RI_CAPTURE_MODE_GLOBAL == (int)RILL_CAPTURE_GLOBAL &&
                  (int)ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL == (int)RILL_CAPTURE_THREAD_LOCAL &&
                  (int)ACL_MODEL_RI_CAPTURE_MODE_RELAXED == (int)RILL_CAPTURE_RELAXED,
              "ACL's capture modes are rill's");
static_assert((int)ACL_MODEL_RI_CAPTURE_STATUS_NONE == (int)RILL_CAPTURE_NONE &&
                  (int)ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE == (int)RILL_CAPTURE_ACTIVE &&
                  (int)ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED == (int)RILL_CAPTURE_INVALIDATED,
              "ACL's capture statuses are rill's");

static bool mode_is_valid(aclmdlRICaptureMode mode) {
    return (unsigned)mode <= ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
}

aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode) {
    if (!stream)
        return rill__acl_fail(ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
                              "aclmdlRICaptureBegin: the default stream (NULL) cannot be "
                              "captured; capture a stream from aclrtCreateStream");
    if (!mode_is_valid(mode))
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclmdlRICaptureBegin: mode %d is no aclmdlRICaptureMode", (int)mode);
    return rill__acl_check(
        rill_stream_begin_capture((rill_stream *)stream, (rill_capture_mode)mode),
        "aclmdlRICaptureBegin");
}

aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI) {
    if (!modelRI)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureEnd: modelRI is NULL");
    *modelRI = NULL;
    if (!stream)
        return rill__acl_fail(ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                              "aclmdlRICaptureEnd: the default stream (NULL) is never captured");
    rill_graph *graph;
    aclError err = rill__acl_check(rill_stream_end_capture((rill_stream *)stream, &graph),
                                   "aclmdlRICaptureEnd");
    if (err != ACL_SUCCESS)
        return err;
    rill_graph_exec *exec;
    err = rill__acl_check(rill_graph_instantiate(graph, &exec), "aclmdlRICaptureEnd");
    /* The exec holds what it needs; the graph is no longer wanted either way. */
    rill_graph_destroy(graph);
    if (err != ACL_SUCCESS)
        return err;
    *modelRI = exec;
    return ACL_SUCCESS;
}

aclError aclmdlRICaptureGetInfo(aclrtStream stream, aclmdlRICaptureStatus *status,
                                aclmdlRI *modelRI) {
    if (!status)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureGetInfo: status is NULL");
    if (modelRI)
        *modelRI = NULL;
    rill_capture_status st;
    aclError err = rill__acl_check(rill_stream_get_capture_status((rill_stream *)stream, &st),
                                   "aclmdlRICaptureGetInfo");
    if (err == ACL_SUCCESS)
        *status = (aclmdlRICaptureStatus)st;
    return err;
}

aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode *mode) {
    if (!mode)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclmdlRICaptureThreadExchangeMode: mode is NULL");
    if (!mode_is_valid(*mode))
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclmdlRICaptureThreadExchangeMode: *mode %d is no "
                              "aclmdlRICaptureMode",
                              (int)*mode);
    rill_capture_mode m = (rill_capture_mode)*mode;
    aclError err =
        rill__acl_check(rill_thread_exchange_capture_mode(&m), "aclmdlRICaptureThreadExchangeMode");
    if (err == ACL_SUCCESS)
        *mode = (aclmdlRICaptureMode)m;
    return err;
}

aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
    if (!modelRI)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclmdlRIExecuteAsync: modelRI is NULL");
    return rill__acl_check(rill_graph_launch((rill_graph_exec *)modelRI, (rill_stream *)stream),
                           "aclmdlRIExecuteAsync");
}

aclError aclmdlRIDestroy(aclmdlRI modelRI) {
    if (!modelRI)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "aclmdlRIDestroy: modelRI is NULL");
    return rill__acl_check(rill_graph_exec_destroy((rill_graph_exec *)modelRI), "aclmdlRIDestroy");
}
