/* SPDX-License-Identifier: MIT */
/*
 * acl/acl_mdl.h: ACL's model running instances built by capture, on rill's
 * graphs. aclmdlRICaptureBegin/End are rill_stream_begin_capture and
 * rill_stream_end_capture (with the graph instantiated); an aclmdlRI is a
 * rill graph exec, and aclmdlRIExecuteAsync launches it.
 */
#ifndef RILL_ACL_ACL_MDL_H
#define RILL_ACL_ACL_MDL_H

#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void *aclmdlRI;

/* The same values and rules as rill_capture_mode. */
typedef enum {
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL = 0,
    ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
    ACL_MODEL_RI_CAPTURE_MODE_RELAXED
} aclmdlRICaptureMode;

typedef enum {
    ACL_MODEL_RI_CAPTURE_STATUS_NONE = 0,
    ACL_MODEL_RI_CAPTURE_STATUS_ACTIVE,
    ACL_MODEL_RI_CAPTURE_STATUS_INVALIDATED
} aclmdlRICaptureStatus;

/* Begins capturing stream's work (not the default stream: NULL is
 * ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT). Other streams join the capture by
 * waiting on events recorded in it, and must join back before the end. */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode);
/* Ends the capture begun on stream and makes its work a model to execute;
 * a failed end leaves *modelRI NULL. */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI);
/* The capture status of stream; modelRI, when not NULL, receives NULL: the
 * model exists only once the capture ends. */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureGetInfo(aclrtStream stream,
                                                    aclmdlRICaptureStatus *status,
                                                    aclmdlRI *modelRI);
/* Swaps the calling thread's capture mode with *mode. */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureThreadExchangeMode(aclmdlRICaptureMode *mode);
/* Runs the whole model as one command of stream; returns at once. */
ACL_FUNC_VISIBILITY aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream);
/* Destroys the model; executions already submitted still run. */
ACL_FUNC_VISIBILITY aclError aclmdlRIDestroy(aclmdlRI modelRI);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACL_MDL_H */
