/* SPDX-License-Identifier: MIT */
/*
 * ACL's capture on rill's: a capture is rill_stream_begin_capture and
 * rill_stream_end_capture, and the model that ends it is the graph
 * instantiated at once (the graph itself is then destroyed): an aclmdlRI
 * from aclmdlRICaptureEnd is a rill_graph_exec. ACL's capture modes and
 * statuses have rill's values.
 *
 * A model built by hand (aclmdlRIBuildBegin) is a capture too, begun when
 * its first stream is bound: that stream is the capture's origin, begun
 * RELAXED (so that aclmdlRIBuildEnd may come from any thread and the
 * program's unsafe calls elsewhere run), and every later bound stream is
 * forked from it by an event, so that the work submitted to any of them
 * until aclmdlRIBuildEnd is recorded. aclmdlRIBuildEnd joins them back to
 * the origin the same way, ends the capture and instantiates the graph.
 * Such a model has a handle of this layer's table (kind RILL_ACL_MODEL),
 * since it exists before its rill_graph_exec; aclmdlRIExecuteAsync,
 * aclmdlRIExecute and aclmdlRIDestroy take both kinds of aclmdlRI.
 *
 * State: every model built by hand is on one list, and models_lock guards
 * the list and each model (not a hot path); rill's capture calls are made
 * with it held (none of them runs a host function).
 */
#include "model.h"

#include <assert.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "error.h"
#include "handle.h"
#include "report.h"
#include "stream.h"

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

/* ---- models built by hand ---- */

struct model {
    void *handle;          /* its handle in the table */
    rill_graph_exec *exec; /* owned: NULL until aclmdlRIBuildEnd */
    rill_stream **streams; /* owned array of borrowed streams: the bound ones, [0] the origin */
    size_t num_streams, cap_streams;
    bool ended;         /* aclmdlRIEndTask was called */
    struct model *next; /* on the list of models */
};

static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;
static struct model *models; /* guarded by models_lock */

static void lock_models(void) {
    if (pthread_mutex_lock(&models_lock) != 0)
        abort();
}

static void unlock_models(void) {
    if (pthread_mutex_unlock(&models_lock) != 0)
        abort();
}

/* The model built by hand that modelRI names, or NULL with the message
 * and *err set (models_lock held). */
static struct model *model_get_locked(const char *call, aclmdlRI modelRI, aclError *err) {
    rill__acl_handles_lock();
    struct model *m = rill__acl_handle_get_locked(modelRI, RILL_ACL_MODEL);
    rill__acl_handles_unlock();
    if (!m) {
        rill__acl_handle_fail(call, "modelRI", modelRI, RILL_ACL_MODEL);
        *err = ACL_ERROR_INVALID_PARAM;
    }
    return m;
}

static bool is_bound_locked(const struct model *m, rill_stream *s, size_t *at) {
    for (size_t i = 0; i < m->num_streams; i++)
        if (m->streams[i] == s) {
            if (at)
                *at = i;
            return true;
        }
    return false;
}

static struct model *bound_to_locked(rill_stream *s) {
    for (struct model *m = models; m; m = m->next)
        if (is_bound_locked(m, s, NULL))
            return m;
    return NULL;
}

/* Makes `to` wait for everything submitted to `from` so far, through an
 * event of its own (destroyed at once: the wait holds it). */
static rill_status order_after(rill_stream *to, rill_stream *from) {
    rill_event *e;
    rill_status st = rill_event_create(0, &e);
    if (st != RILL_OK)
        return st;
    st = rill_event_record(e, from);
    if (st == RILL_OK)
        st = rill_stream_wait_event(to, e);
    rill_event_destroy(e);
    return st;
}

/* Ends a model's capture (models_lock held): joins every bound stream to
 * the origin and ends it; the graph, or NULL with the status of the end. */
static rill_status end_capture_locked(struct model *m, rill_graph **graph) {
    *graph = NULL;
    rill_status first = RILL_OK;
    for (size_t i = 1; i < m->num_streams; i++) {
        rill_status st = order_after(m->streams[0], m->streams[i]);
        if (first == RILL_OK)
            first = st;
    }
    rill_status st = rill_stream_end_capture(m->streams[0], graph);
    if (st == RILL_OK && first != RILL_OK) {
        rill_graph_destroy(*graph);
        *graph = NULL;
        st = first;
    }
    return st;
}

static void unlink_model_locked(struct model *m) {
    for (struct model **p = &models; *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            return;
        }
}

/* Frees a model whose handle is closed: its capture ended (if it is still
 * building) and its exec destroyed (models_lock held). */
static void release_locked(struct model *m) {
    unlink_model_locked(m);
    if (!m->exec && m->num_streams > 0) {
        rill_graph *graph;
        if (end_capture_locked(m, &graph) == RILL_OK)
            rill_graph_destroy(graph);
    }
    if (m->exec)
        rill_graph_exec_destroy(m->exec);
    free(m->streams);
    free(m);
}

aclError aclmdlRIBuildBegin(aclmdlRI *modelRI, uint32_t flag) {
    const char *call = "aclmdlRIBuildBegin";
    if (!modelRI)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: modelRI is NULL", call);
    *modelRI = NULL;
    if (flag != 0)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: flag %u is reserved and must be 0",
                              call, (unsigned)flag);
    struct model *m = calloc(1, sizeof *m);
    void *h = m ? rill__acl_handle_open(RILL_ACL_MODEL, m) : NULL;
    if (!h) {
        free(m);
        return rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory for a model", call);
    }
    m->handle = h;
    lock_models();
    m->next = models;
    models = m;
    unlock_models();
    *modelRI = h;
    return ACL_SUCCESS;
}

aclError aclmdlRIBindStream(aclmdlRI modelRI, aclrtStream stream, uint32_t flag) {
    const char *call = "aclmdlRIBindStream";
    if (flag == ACL_MODEL_STREAM_FLAG_DEFAULT)
        return rill__acl_fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                              "%s: ACL_MODEL_STREAM_FLAG_DEFAULT binds a stream that runs once "
                              "aclrtActiveStream activates it, which rill cannot do; bind it "
                              "with ACL_MODEL_STREAM_FLAG_HEAD and order it with events",
                              call);
    if (flag != ACL_MODEL_STREAM_FLAG_HEAD)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: flag %#x is neither ACL_MODEL_STREAM_FLAG_HEAD nor "
                              "ACL_MODEL_STREAM_FLAG_DEFAULT",
                              call, (unsigned)flag);
    if (!stream)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: stream is NULL; the default stream is never bound to a "
                              "model, bind a stream from aclrtCreateStream",
                              call);
    rill_stream *s = stream;
    rill_capture_status cs;
    aclError err = rill__acl_check(rill_stream_get_capture_status(s, &cs), call);
    if (err != ACL_SUCCESS)
        return err;
    lock_models();
    struct model *m = model_get_locked(call, modelRI, &err);
    if (!m)
        goto out;
    if (m->exec) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: the model is built (aclmdlRIBuildEnd); bind streams between "
                             "aclmdlRIBuildBegin and aclmdlRIBuildEnd",
                             call);
        goto out;
    }
    struct model *owner = bound_to_locked(s);
    if (owner || cs != RILL_CAPTURE_NONE) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: the stream is %s; a stream belongs to one model or capture "
                             "at a time (aclmdlRIUnbindStream or aclmdlRIDestroy first)",
                             call,
                             owner == m ? "already bound to this model"
                             : owner    ? "bound to another model"
                                        : "being captured");
        goto out;
    }
    if (m->num_streams == m->cap_streams) {
        size_t grown = m->cap_streams ? m->cap_streams * 2 : 4;
        rill_stream **n = realloc(m->streams, grown * sizeof *n);
        if (!n) {
            err = rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory to bind a stream", call);
            goto out;
        }
        m->streams = n;
        m->cap_streams = grown;
    }
    rill_status st = m->num_streams == 0 ? rill_stream_begin_capture(s, RILL_CAPTURE_RELAXED)
                                         : order_after(s, m->streams[0]);
    err = rill__acl_check(st, call);
    if (err == ACL_SUCCESS)
        m->streams[m->num_streams++] = s;
out:
    unlock_models();
    return err;
}

/* The model building, with stream bound to it (models_lock held); NULL
 * with the message and *err set otherwise. */
static struct model *building_with_locked(const char *call, aclmdlRI modelRI, aclrtStream stream,
                                          aclError *err) {
    struct model *m = model_get_locked(call, modelRI, err);
    if (!m)
        return NULL;
    if (m->exec) {
        *err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: the model is already built (aclmdlRIBuildEnd)", call);
        return NULL;
    }
    if (!stream || !is_bound_locked(m, stream, NULL)) {
        *err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: the stream (%p) is not bound to the model; bind it with "
                              "aclmdlRIBindStream first",
                              call, stream);
        return NULL;
    }
    return m;
}

aclError aclmdlRIEndTask(aclmdlRI modelRI, aclrtStream stream) {
    const char *call = "aclmdlRIEndTask";
    aclError err = ACL_SUCCESS;
    lock_models();
    struct model *m = building_with_locked(call, modelRI, stream, &err);
    if (m && m->ended)
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: the model has its end task already; a model has one", call);
    else if (m)
        m->ended = true;
    unlock_models();
    return err;
}

aclError aclmdlRIBuildEnd(aclmdlRI modelRI, void *reserve) {
    const char *call = "aclmdlRIBuildEnd";
    if (reserve)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: reserve is reserved and must be NULL",
                              call);
    aclError err = ACL_SUCCESS;
    lock_models();
    struct model *m = model_get_locked(call, modelRI, &err);
    if (!m)
        goto out;
    if (m->exec) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: the model is already built", call);
        goto out;
    }
    if (m->num_streams == 0 || !m->ended) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: the model has %s; bind a stream with aclmdlRIBindStream, "
                             "submit its work and mark its end with aclmdlRIEndTask first",
                             call, m->num_streams == 0 ? "no stream" : "no end task");
        goto out;
    }
    rill_graph *graph;
    err = rill__acl_check(end_capture_locked(m, &graph), call);
    if (err == ACL_SUCCESS) {
        err = rill__acl_check(rill_graph_instantiate(graph, &m->exec), call);
        rill_graph_destroy(graph);
    }
    if (err != ACL_SUCCESS) {
        /* The capture has ended either way: the model is spent. */
        rill__acl_handles_lock();
        rill__acl_handle_close_locked(m->handle);
        rill__acl_handles_unlock();
        m->num_streams = 0;
        release_locked(m);
    }
out:
    unlock_models();
    return err;
}

aclError aclmdlRIUnbindStream(aclmdlRI modelRI, aclrtStream stream) {
    const char *call = "aclmdlRIUnbindStream";
    aclError err = ACL_SUCCESS;
    size_t at;
    lock_models();
    struct model *m = model_get_locked(call, modelRI, &err);
    if (!m)
        goto out;
    if (!stream || !is_bound_locked(m, stream, &at)) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: the stream (%p) is not bound to the model", call, stream);
        goto out;
    }
    if (!m->exec) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: the model is still being built; unbind its streams after "
                             "aclmdlRIBuildEnd (or destroy it)",
                             call);
        goto out;
    }
    m->streams[at] = m->streams[--m->num_streams];
out:
    unlock_models();
    return err;
}

void rill__acl_models_forget_all(void) {
    lock_models();
    while (models) {
        struct model *m = models;
        models = m->next;
        (void)rill__acl_handle_take(m->handle, RILL_ACL_MODEL);
        free(m->streams);
        free(m);
    }
    unlock_models();
}

/* The rill_graph_exec that modelRI names (a captured model is one; a
 * model built by hand must be built), or NULL with the message and *err. */
static rill_graph_exec *exec_of(const char *call, aclmdlRI modelRI, aclError *err) {
    if (!modelRI) {
        *err = rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: modelRI is NULL", call);
        return NULL;
    }
    if (!rill__acl_handle_is_ours(modelRI))
        return modelRI; /* rill checks it */
    lock_models();
    struct model *m = model_get_locked(call, modelRI, err);
    rill_graph_exec *exec = m ? m->exec : NULL;
    unlock_models();
    if (m && !exec)
        *err =
            rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                           "%s: the model is still being built; call aclmdlRIBuildEnd first", call);
    return exec;
}

aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
    const char *call = "aclmdlRIExecuteAsync";
    aclError err = ACL_SUCCESS;
    rill_graph_exec *exec = exec_of(call, modelRI, &err);
    if (!exec)
        return err;
    return rill__acl_check(rill_graph_launch(exec, (rill_stream *)stream), call);
}

aclError aclmdlRIExecute(aclmdlRI modelRI, int32_t timeout) {
    const char *call = "aclmdlRIExecute";
    uint64_t ns;
    aclError err = rill__acl_timeout_ns(call, timeout, &ns);
    if (err != ACL_SUCCESS)
        return err;
    rill_graph_exec *exec = exec_of(call, modelRI, &err);
    if (!exec)
        return err;
    rill_stream *s = rill_current_stream(NULL);
    rill_event *done;
    err = rill__acl_check(rill_event_create(0, &done), call);
    if (err != ACL_SUCCESS)
        return err;
    rill_status st = rill_graph_launch(exec, s);
    if (st == RILL_OK)
        st = rill_event_record(done, s);
    if (st == RILL_OK)
        st = rill__acl_wait(rill__acl_wait_event, done, ns);
    rill_event_destroy(done);
    if (st == RILL_NOT_READY)
        return rill__acl_fail(ACL_ERROR_RT_STREAM_SYNC_TIMEOUT,
                              "%s: the model did not finish within %d ms; it runs on", call,
                              (int)timeout);
    return rill__acl_check(st, call);
}

aclError aclmdlRIDestroy(aclmdlRI modelRI) {
    const char *call = "aclmdlRIDestroy";
    if (!modelRI)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: modelRI is NULL", call);
    if (!rill__acl_handle_is_ours(modelRI))
        return rill__acl_check(rill_graph_exec_destroy((rill_graph_exec *)modelRI), call);
    aclError err = ACL_SUCCESS;
    lock_models();
    struct model *m = model_get_locked(call, modelRI, &err);
    if (m) {
        rill__acl_handles_lock();
        rill__acl_handle_close_locked(m->handle);
        rill__acl_handles_unlock();
        release_locked(m);
    }
    unlock_models();
    return err;
}
