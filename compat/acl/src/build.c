/* SPDX-License-Identifier: MIT */
/*
 * Models built by hand (aclmdlRIBuildBegin) are captures: the first stream
 * bound begins one, RELAXED (so that aclmdlRIBuildEnd may come from any
 * thread and the program's unsafe calls elsewhere run), and is its origin;
 * every later bound stream is forked from it by an event, so that the work
 * submitted to any of them until aclmdlRIBuildEnd is recorded.
 * aclmdlRIBuildEnd joins them back to the origin the same way, ends the
 * capture and instantiates the graph. Such a model has a handle of this
 * layer's table (model.h), since it exists before its rill_graph_exec.
 */
#include "build.h"

#include <stdlib.h>

#include "error.h"
#include "handle.h"
#include "model.h"

/* The model from aclmdlRIBuildBegin that modelRI names, or NULL with the
 * message and *err set (models' lock held). */
static struct rill__acl_model *by_hand_get_locked(const char *call, aclmdlRI modelRI,
                                                  aclError *err) {
    struct rill__acl_model *m = rill__acl_model_get_locked(call, modelRI, err);
    if (m && m->captured) {
        *err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: the model was made by capture (aclmdlRICaptureEnd); only a "
                              "model from aclmdlRIBuildBegin binds streams",
                              call);
        m = NULL;
    }
    return m;
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

/* Ends a model's capture (models' lock held): joins every bound stream to
 * the origin and ends it; the graph, or NULL with the status of the end. */
static rill_status end_capture_locked(struct rill__acl_model *m, rill_graph **graph) {
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

aclError aclmdlRIBuildBegin(aclmdlRI *modelRI, uint32_t flag) {
    const char *call = "aclmdlRIBuildBegin";
    if (!modelRI)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: modelRI is NULL", call);
    *modelRI = NULL;
    if (flag != 0)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: flag %u is reserved and must be 0",
                              call, (unsigned)flag);
    struct rill__acl_model *m = calloc(1, sizeof *m);
    void *h = m ? rill__acl_handle_open(RILL_ACL_MODEL, m) : NULL;
    if (!h) {
        free(m);
        return rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory for a model", call);
    }
    m->type = RILL_ACL_MODEL_OBJECT;
    m->handle = h;
    rill__acl_models_lock();
    rill__acl_model_link_locked(m);
    rill__acl_models_unlock();
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
    rill__acl_models_lock();
    struct rill__acl_model *m = by_hand_get_locked(call, modelRI, &err);
    if (!m)
        goto out;
    if (m->exec) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: the model is built (aclmdlRIBuildEnd); bind streams between "
                             "aclmdlRIBuildBegin and aclmdlRIBuildEnd",
                             call);
        goto out;
    }
    struct rill__acl_model *owner = rill__acl_model_bound_to_locked(s);
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
    rill__acl_models_unlock();
    return err;
}

/* The model building, with stream bound to it (models' lock held); NULL
 * with the message and *err set otherwise. */
static struct rill__acl_model *building_with_locked(const char *call, aclmdlRI modelRI,
                                                    aclrtStream stream, aclError *err) {
    struct rill__acl_model *m = by_hand_get_locked(call, modelRI, err);
    if (!m)
        return NULL;
    if (m->exec) {
        *err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: the model is already built (aclmdlRIBuildEnd)", call);
        return NULL;
    }
    if (!stream || !rill__acl_model_is_bound_locked(m, stream, NULL)) {
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
    rill__acl_models_lock();
    struct rill__acl_model *m = building_with_locked(call, modelRI, stream, &err);
    if (m && m->ended)
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: the model has its end task already; a model has one", call);
    else if (m)
        m->ended = true;
    rill__acl_models_unlock();
    return err;
}

aclError aclmdlRIBuildEnd(aclmdlRI modelRI, void *reserve) {
    const char *call = "aclmdlRIBuildEnd";
    if (reserve)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: reserve is reserved and must be NULL",
                              call);
    aclError err = ACL_SUCCESS;
    rill__acl_models_lock();
    struct rill__acl_model *m = by_hand_get_locked(call, modelRI, &err);
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
        if (err == ACL_SUCCESS)
            rill__acl_model_keep_graph_locked(m->exec, graph); /* its description */
        else
            rill_graph_destroy(graph);
    }
    if (err != ACL_SUCCESS) {
        /* The capture has ended either way: the model is spent. */
        rill__acl_handles_lock();
        rill__acl_handle_close_locked(m->handle);
        rill__acl_handles_unlock();
        m->num_streams = 0;
        rill__acl_model_release_locked(m);
    }
out:
    rill__acl_models_unlock();
    return err;
}

aclError aclmdlRIUnbindStream(aclmdlRI modelRI, aclrtStream stream) {
    const char *call = "aclmdlRIUnbindStream";
    aclError err = ACL_SUCCESS;
    size_t at;
    rill__acl_models_lock();
    struct rill__acl_model *m = by_hand_get_locked(call, modelRI, &err);
    if (!m)
        goto out;
    if (!stream || !rill__acl_model_is_bound_locked(m, stream, &at)) {
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
    rill__acl_models_unlock();
    return err;
}

void rill__acl_build_abandon_locked(struct rill__acl_model *m) {
    rill_graph *graph;
    if (end_capture_locked(m, &graph) == RILL_OK)
        rill_graph_destroy(graph);
}
