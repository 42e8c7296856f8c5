/* SPDX-License-Identifier: MIT */
/*
 * acl/acl_mdl.h: ACL's model running instances built by capture or by
 * hand, on rill's graphs. aclmdlRICaptureBegin/End are
 * rill_stream_begin_capture and rill_stream_end_capture (with the graph
 * instantiated), and the aclmdlRI they give is a rill graph exec.
 * aclmdlRIBuildBegin to aclmdlRIBuildEnd capture the work of the streams
 * bound to the model, and its aclmdlRI is a handle of this layer.
 * aclmdlRIExecuteAsync launches either kind.
 */
#ifndef RILL_ACL_ACL_MDL_H
#define RILL_ACL_ACL_MDL_H

#include "acl_rt.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef void *aclmdlRI;
/* A task group of a captured model (aclmdlRICaptureTaskGrpEnd). */
typedef void *aclrtTaskGrp;

/* aclmdlRIBindStream's flags: a stream that runs from the model's start,
 * or one that aclrtActiveStream activates (refused: rill cannot). */
#define ACL_MODEL_STREAM_FLAG_HEAD    0x00000000U
#define ACL_MODEL_STREAM_FLAG_DEFAULT 0x7FFFFFFFU

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
/* Runs the model on the calling thread's current stream and waits for it,
 * timeout ms at most (-1: no limit): ACL_ERROR_RT_STREAM_SYNC_TIMEOUT
 * when it is not done by then (it runs on). */
ACL_FUNC_VISIBILITY aclError aclmdlRIExecute(aclmdlRI modelRI, int32_t timeout);
/* Destroys the model; executions already submitted still run. A model
 * still being built is abandoned: its capture ends, nothing of it runs. */
ACL_FUNC_VISIBILITY aclError aclmdlRIDestroy(aclmdlRI modelRI);

/* aclmdlRIDebugJsonPrint's flags; both write the same description. */
#define ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY 0x0UL
#define ACL_MDLRI_DEBUG_JSON_PRINT_VERBOSE 0x1UL
/* Writes a description of the model to the file path as JSON: its kind
 * and, for each rill graph it runs (one, or one per segment of a capture
 * cut by task groups or external events), the graph's node count and its
 * Graphviz DOT (rill_graph_write_dot), as a string. rill has no NPU tasks, stream or
 * task ids to list, as CANN's file does. */
ACL_FUNC_VISIBILITY aclError aclmdlRIDebugJsonPrint(aclmdlRI modelRI, const char *path,
                                                    uint32_t flags);

/* Task groups: the work captured on stream (the stream that began the
 * capture) between aclmdlRICaptureTaskGrpBegin and aclmdlRICaptureTaskGrpEnd
 * is a group of the model, *handle, whose work an update may replace. The
 * capture is ended and begun again around the group (in its mode), so no
 * other stream may be forked into it then (rill's end refuses unjoined
 * streams and the capture ends). An external wait or record
 * (aclrtStreamWaitEventWithFlag, aclrtRecordEventWithFlag with the
 * ..._EXTERNAL flags) on that stream cuts the capture the same way, around
 * a graph of one event wait (record) node. A model captured with task
 * groups or external events is a handle of this layer, not a
 * rill_graph_exec. */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureTaskGrpBegin(aclrtStream stream);
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureTaskGrpEnd(aclrtStream stream, aclrtTaskGrp *handle);
/* Captures on stream, until aclmdlRICaptureTaskUpdateEnd, the work that
 * replaces handle's group, once the model's capture has ended: the same
 * kinds of tasks in the same order (rill_graph_exec_update), with new
 * parameters. Executions submitted after the end run with them; those
 * submitted before run as they were submitted. */
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureTaskUpdateBegin(aclrtStream stream,
                                                            aclrtTaskGrp handle);
ACL_FUNC_VISIBILITY aclError aclmdlRICaptureTaskUpdateEnd(aclrtStream stream);

/* A model built by hand: *modelRI receives a new model (flag must be 0). */
ACL_FUNC_VISIBILITY aclError aclmdlRIBuildBegin(aclmdlRI *modelRI, uint32_t flag);
/* Binds stream to the model being built (ACL_MODEL_STREAM_FLAG_HEAD):
 * the work submitted to it from now until aclmdlRIBuildEnd is recorded
 * into the model instead of running. The first bound stream is where the
 * model starts; each later one starts after the work submitted to the
 * first before it was bound. A stream is bound to one model at a time and
 * is not being captured. */
ACL_FUNC_VISIBILITY aclError aclmdlRIBindStream(aclmdlRI modelRI, aclrtStream stream,
                                                uint32_t flag);
/* Marks the end of the model's work, on one of its bound streams; a model
 * has one. */
ACL_FUNC_VISIBILITY aclError aclmdlRIEndTask(aclmdlRI modelRI, aclrtStream stream);
/* Ends the recording (the bound streams run their later work again) and
 * makes the model ready to execute; reserve must be NULL. A failure
 * destroys the model. */
ACL_FUNC_VISIBILITY aclError aclmdlRIBuildEnd(aclmdlRI modelRI, void *reserve);
/* Unbinds a stream from a built model. */
ACL_FUNC_VISIBILITY aclError aclmdlRIUnbindStream(aclmdlRI modelRI, aclrtStream stream);

#ifdef __cplusplus
}
#endif

#endif /* RILL_ACL_ACL_MDL_H */
