/* SPDX-License-Identifier: MIT */
/*
 * ACL's capture on rill's: a capture is rill_stream_begin_capture and
 * rill_stream_end_capture, and the model that ends it is the graph
 * instantiated at once (the graph itself is then destroyed): an aclmdlRI
 * from aclmdlRICaptureEnd is a rill_graph_exec. ACL's capture modes and
 * statuses have rill's values.
 *
 * An external wait or record (ACL_EVENT_WAIT_EXTERNAL,
 * ACL_EVENT_RECORD_EXTERNAL) cuts the capture too: the segment before it
 * is instantiated, a graph of one event wait (record) node follows as a
 * segment of its own, and the capture begins again; the wait node waits,
 * at each execution, for the event as recorded when the execution is
 * submitted, and the record node records it at each execution's end.
 *
 * Task groups cut a capture into segments: aclmdlRICaptureTaskGrpBegin
 * and ...End end the capture (the segment before is instantiated) and
 * begin it again in its mode, so that the group is a segment of its own;
 * rill_graph_exec_update then replaces the group's parameters with those
 * of an update's capture (aclmdlRICaptureTaskUpdateBegin/End), as a whole
 * graph of the same shape. A capture with task groups ends as a model of
 * this layer's table whose execution launches its segments in order. Each
 * capture begun here is noted with its mode, for its task groups.
 *
 * Models of this layer (built by hand, build.c, or captured with task
 * groups) and task groups are handles of the model kind, told apart by
 * their type; aclmdlRIExecuteAsync, aclmdlRIExecute and aclmdlRIDestroy
 * take every kind of aclmdlRI.
 *
 * Each exec keeps the graph it was instantiated from (an update's graph
 * replaces its group's), for aclmdlRIDebugJsonPrint: rill describes a
 * graph (rill_graph_write_dot) but not an exec.
 *
 * State: the models and capture notes are on lists, and one lock guards
 * the lists and each model (not a hot path); rill's capture calls are made
 * with it held (none of them runs a host function).
 */
#include "model.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build.h"
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

/* A capture begun by aclmdlRICaptureBegin, noted for its task groups
 * (which end it and begin it again, with its mode), or the capture of an
 * update (aclmdlRICaptureTaskUpdateBegin: group set). */
struct capture {
    rill_stream *origin;
    rill_capture_mode mode;
    struct rill__acl_model *model; /* owned: made at the first task group; NULL before */
    bool in_group;
    void *group; /* an update's task group handle, else NULL */
    struct capture *next;
};

/* The graph an exec was instantiated from, kept to describe the model
 * (aclmdlRIDebugJsonPrint) until the exec is destroyed. */
struct kept_graph {
    rill_graph_exec *exec;
    rill_graph *graph; /* owned */
    struct kept_graph *next;
};

static pthread_mutex_t models_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rill__acl_model *models; /* guarded by models_lock */
static struct capture *captures;       /* guarded by models_lock */
static struct kept_graph *kept;        /* guarded by models_lock */

void rill__acl_models_lock(void) {
    if (pthread_mutex_lock(&models_lock) != 0)
        abort();
}

void rill__acl_models_unlock(void) {
    if (pthread_mutex_unlock(&models_lock) != 0)
        abort();
}

static void free_groups(struct rill__acl_model *m);

void rill__acl_model_keep_graph_locked(rill_graph_exec *exec, rill_graph *graph) {
    for (struct kept_graph *k = kept; k; k = k->next)
        if (k->exec == exec) {
            rill_graph_destroy(k->graph);
            k->graph = graph;
            return;
        }
    struct kept_graph *k = malloc(sizeof *k);
    if (!k) { /* the model then has no description */
        rill_graph_destroy(graph);
        return;
    }
    *k = (struct kept_graph){.exec = exec, .graph = graph, .next = kept};
    kept = k;
}

/* The graph kept for exec, or NULL (models_lock held). */
static rill_graph *graph_of_locked(const rill_graph_exec *exec) {
    for (struct kept_graph *k = kept; k; k = k->next)
        if (k->exec == exec)
            return k->graph;
    return NULL;
}

static void drop_graph_locked(const rill_graph_exec *exec) {
    for (struct kept_graph **p = &kept; *p; p = &(*p)->next)
        if ((*p)->exec == exec) {
            struct kept_graph *k = *p;
            *p = k->next;
            rill_graph_destroy(k->graph);
            free(k);
            return;
        }
}

static void destroy_exec_locked(rill_graph_exec *exec) {
    drop_graph_locked(exec);
    rill_graph_exec_destroy(exec);
}

/* The object of the model kind that handle names, a model or a task
 * group, or NULL with the message (models_lock held). */
static void *object_get_locked(const char *call, const char *name, const void *handle) {
    rill__acl_handles_lock();
    void *obj = rill__acl_handle_get_locked(handle, RILL_ACL_MODEL);
    rill__acl_handles_unlock();
    if (!obj)
        rill__acl_handle_fail(call, name, handle, RILL_ACL_MODEL);
    return obj;
}

static bool mode_is_valid(aclmdlRICaptureMode mode) {
    return (unsigned)mode <= ACL_MODEL_RI_CAPTURE_MODE_RELAXED;
}

/* The note of the capture begun on origin (update: of an update's
 * capture), or NULL (models_lock held). */
static struct capture *capture_of_locked(rill_stream *origin, bool update) {
    for (struct capture *c = captures; c; c = c->next)
        if (c->origin == origin && (c->group != NULL) == update)
            return c;
    return NULL;
}

/* Unlinks and frees a note (models_lock held), with the model it owns:
 * the capture it noted is over. */
static void drop_capture_locked(struct capture *c) {
    for (struct capture **p = &captures; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    if (c->model) {
        rill__acl_handles_lock();
        rill__acl_handle_close_locked(c->model->handle);
        rill__acl_handles_unlock();
        for (size_t i = 0; i < c->model->num_segs; i++)
            destroy_exec_locked(c->model->segs[i]);
        free_groups(c->model);
        free(c->model->segs);
        free(c->model);
    }
    free(c);
}

/* Room for one more segment in m (models_lock held). */
static rill_status reserve_segment_locked(struct rill__acl_model *m) {
    if (m->num_segs == m->cap_segs) {
        size_t grown = m->cap_segs ? m->cap_segs * 2 : 4;
        rill_graph_exec **n = realloc(m->segs, grown * sizeof *n);
        if (!n)
            return RILL_ERROR_OUT_OF_MEMORY;
        m->segs = n;
        m->cap_segs = grown;
    }
    return RILL_OK;
}

/* Ends the capture of c's origin and appends its work to c's model as one
 * more segment (models_lock held); *ended: whether the capture ended (it
 * does unless there is no memory for the segment or another thread than
 * the one that began it tries). */
static rill_status end_segment_locked(struct capture *c, bool *ended) {
    struct rill__acl_model *m = c->model;
    *ended = false;
    if (reserve_segment_locked(m) != RILL_OK)
        return RILL_ERROR_OUT_OF_MEMORY;
    rill_graph *graph;
    rill_status st = rill_stream_end_capture(c->origin, &graph);
    *ended = st != RILL_ERROR_CAPTURE_WRONG_THREAD && st != RILL_ERROR_CAPTURE_UNMATCHED;
    if (st != RILL_OK)
        return st;
    st = rill_graph_instantiate(graph, &m->segs[m->num_segs]);
    if (st == RILL_OK) {
        rill__acl_model_keep_graph_locked(m->segs[m->num_segs], graph);
        m->num_segs++;
    } else {
        rill_graph_destroy(graph);
    }
    return st;
}

/* Ends the current segment of c's capture and begins the next (models_lock
 * held). A failure once the capture ended ends it for good: the note and
 * its model go. */
static aclError split_locked(const char *call, struct capture *c) {
    bool ended;
    rill_status st = end_segment_locked(c, &ended);
    if (!ended)
        return rill__acl_check(st, call);
    if (st == RILL_OK)
        st = rill_stream_begin_capture(c->origin, c->mode);
    aclError err = rill__acl_check(st, call);
    if (err != ACL_SUCCESS)
        drop_capture_locked(c);
    return err;
}

aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode) {
    if (!stream)
        return rill__acl_fail(ACL_ERROR_RT_STREAM_CAPTURE_IMPLICIT,
                              "aclmdlRICaptureBegin: the default stream (NULL) cannot be "
                              "captured; capture a stream from aclrtCreateStream");
    if (!mode_is_valid(mode))
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "aclmdlRICaptureBegin: mode %d is no aclmdlRICaptureMode", (int)mode);
    rill_stream *s = stream;
    aclError err = rill__acl_check(rill_stream_begin_capture(s, (rill_capture_mode)mode),
                                   "aclmdlRICaptureBegin");
    if (err != ACL_SUCCESS)
        return err;
    rill__acl_models_lock();
    /* A note left by a capture that ended otherwise (through rill, or by
     * destroying its stream) is stale now. */
    struct capture *old = capture_of_locked(s, false);
    if (old)
        drop_capture_locked(old);
    struct capture *c = calloc(1, sizeof *c);
    if (c) { /* without a note, task groups are refused on this capture */
        *c = (struct capture){.origin = s, .mode = (rill_capture_mode)mode, .next = captures};
        captures = c;
    }
    rill__acl_models_unlock();
    return ACL_SUCCESS;
}

aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI *modelRI) {
    const char *call = "aclmdlRICaptureEnd";
    if (!modelRI)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: modelRI is NULL", call);
    *modelRI = NULL;
    if (!stream)
        return rill__acl_fail(ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                              "%s: the default stream (NULL) is never captured", call);
    rill_stream *s = stream;
    aclError err = ACL_SUCCESS;
    rill__acl_models_lock();
    struct capture *c = capture_of_locked(s, false);
    if (c && c->model) { /* a capture with task groups: its last segment */
        if (c->in_group) {
            err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                                 "%s: a task group is open; end it with "
                                 "aclmdlRICaptureTaskGrpEnd first",
                                 call);
            goto out;
        }
        bool ended;
        err = rill__acl_check(end_segment_locked(c, &ended), call);
        if (!ended)
            goto out;
        if (err != ACL_SUCCESS) {
            drop_capture_locked(c);
            goto out;
        }
        struct rill__acl_model *m = c->model;
        c->model = NULL;
        m->complete = true;
        m->next = models;
        models = m;
        drop_capture_locked(c);
        *modelRI = m->handle;
        goto out;
    }
    rill_graph *graph;
    rill_status st = rill_stream_end_capture(s, &graph);
    if (c && st != RILL_ERROR_CAPTURE_WRONG_THREAD && st != RILL_ERROR_CAPTURE_UNMATCHED)
        drop_capture_locked(c);
    err = rill__acl_check(st, call);
    if (err != ACL_SUCCESS)
        goto out;
    rill_graph_exec *exec;
    err = rill__acl_check(rill_graph_instantiate(graph, &exec), call);
    if (err == ACL_SUCCESS) {
        *modelRI = exec;
        rill__acl_model_keep_graph_locked(exec, graph); /* its description */
    } else {
        rill_graph_destroy(graph);
    }
out:
    rill__acl_models_unlock();
    return err;
}

/* A zeroed object of size bytes with a handle of RILL_ACL_MODEL's kind in
 * *handle, or NULL (and a failure that says there is no memory for what). */
static void *new_object(const char *call, size_t size, const char *what, void **handle) {
    void *o = calloc(1, size);
    *handle = o ? rill__acl_handle_open(RILL_ACL_MODEL, o) : NULL;
    if (!*handle) {
        free(o);
        rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory for the %s", call, what);
        return NULL;
    }
    return o;
}

/* Gives c the model that its segments make, if it has none yet
 * (models_lock held). */
static aclError model_of_capture_locked(const char *call, struct capture *c) {
    if (c->model)
        return ACL_SUCCESS;
    void *h;
    struct rill__acl_model *m = new_object(call, sizeof *m, "model", &h);
    if (!m)
        return ACL_ERROR_BAD_ALLOC;
    *m = (struct rill__acl_model){.type = RILL_ACL_MODEL_OBJECT, .handle = h, .captured = true};
    c->model = m;
    return ACL_SUCCESS;
}

/* ---- task groups ---- */

aclError aclmdlRICaptureTaskGrpBegin(aclrtStream stream) {
    const char *call = "aclmdlRICaptureTaskGrpBegin";
    aclError err = ACL_SUCCESS;
    rill__acl_models_lock();
    struct capture *c = stream ? capture_of_locked(stream, false) : NULL;
    if (!c) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: the stream (%p) did not begin a capture with "
                             "aclmdlRICaptureBegin; a task group begins on that stream",
                             call, stream);
        goto out;
    }
    if (c->in_group) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: a task group is open already; end it with "
                             "aclmdlRICaptureTaskGrpEnd first",
                             call);
        goto out;
    }
    err = model_of_capture_locked(call, c);
    if (err != ACL_SUCCESS)
        goto out;
    err = split_locked(call, c);
    if (err == ACL_SUCCESS)
        c->in_group = true;
out:
    rill__acl_models_unlock();
    return err;
}

aclError aclmdlRICaptureTaskGrpEnd(aclrtStream stream, aclrtTaskGrp *handle) {
    const char *call = "aclmdlRICaptureTaskGrpEnd";
    if (!handle)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: handle is NULL", call);
    *handle = NULL;
    aclError err = ACL_SUCCESS;
    rill__acl_models_lock();
    struct capture *c = stream ? capture_of_locked(stream, false) : NULL;
    if (!c || !c->in_group) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: no task group is open on the stream (%p); begin one with "
                             "aclmdlRICaptureTaskGrpBegin",
                             call, stream);
        goto out;
    }
    void *h;
    struct rill__acl_task_group *g = new_object(call, sizeof *g, "task group", &h);
    if (!g) {
        err = ACL_ERROR_BAD_ALLOC;
        goto out;
    }
    struct rill__acl_model *m = c->model;
    *g = (struct rill__acl_task_group){.type = RILL_ACL_TASK_GROUP_OBJECT,
                                       .handle = h,
                                       .model = m,
                                       .seg = m->num_segs,
                                       .next = m->groups};
    m->groups = g; /* freed with the model, should the split fail */
    err = split_locked(call, c);
    if (err == ACL_SUCCESS) {
        c->in_group = false;
        *handle = h;
    }
out:
    rill__acl_models_unlock();
    return err;
}

aclError aclmdlRICaptureTaskUpdateBegin(aclrtStream stream, aclrtTaskGrp handle) {
    const char *call = "aclmdlRICaptureTaskUpdateBegin";
    if (!stream)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: stream is NULL; capture the update on a stream from "
                              "aclrtCreateStream",
                              call);
    aclError err = ACL_SUCCESS;
    rill__acl_models_lock();
    struct rill__acl_task_group *g = object_get_locked(call, "handle", handle);
    if (g && g->type != RILL_ACL_TASK_GROUP_OBJECT) {
        rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                       "%s: handle (%p) is a model, no task group from "
                       "aclmdlRICaptureTaskGrpEnd",
                       call, handle);
        g = NULL;
    }
    if (!g) {
        err = ACL_ERROR_INVALID_PARAM;
        goto out;
    }
    if (!g->model->complete) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: the capture of the task group's model has not ended; call "
                             "aclmdlRICaptureEnd first",
                             call);
        goto out;
    }
    struct capture *c = calloc(1, sizeof *c);
    if (!c) {
        err = rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory to note the update", call);
        goto out;
    }
    err = rill__acl_check(rill_stream_begin_capture(stream, RILL_CAPTURE_RELAXED), call);
    if (err != ACL_SUCCESS) {
        free(c);
        goto out;
    }
    *c = (struct capture){
        .origin = stream, .mode = RILL_CAPTURE_RELAXED, .group = handle, .next = captures};
    captures = c;
out:
    rill__acl_models_unlock();
    return err;
}

aclError aclmdlRICaptureTaskUpdateEnd(aclrtStream stream) {
    const char *call = "aclmdlRICaptureTaskUpdateEnd";
    aclError err = ACL_SUCCESS;
    rill__acl_models_lock();
    struct capture *c = stream ? capture_of_locked(stream, true) : NULL;
    if (!c) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: no update was begun on the stream (%p); call "
                             "aclmdlRICaptureTaskUpdateBegin first",
                             call, stream);
        goto out;
    }
    void *handle = c->group;
    drop_capture_locked(c);
    rill_graph *graph;
    err = rill__acl_check(rill_stream_end_capture(stream, &graph), call);
    if (err != ACL_SUCCESS)
        goto out;
    rill__acl_handles_lock();
    struct rill__acl_task_group *g = rill__acl_handle_get_locked(handle, RILL_ACL_MODEL);
    rill__acl_handles_unlock();
    if (!g)
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: the task group was destroyed with its model meanwhile; the "
                             "update is dropped",
                             call);
    else
        err = rill__acl_check(rill_graph_exec_update(g->model->segs[g->seg], graph), call);
    if (err == ACL_SUCCESS) /* the group's description is the update's now */
        rill__acl_model_keep_graph_locked(g->model->segs[g->seg], graph);
    else
        rill_graph_destroy(graph);
out:
    rill__acl_models_unlock();
    return err;
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

struct rill__acl_model *rill__acl_model_get_locked(const char *call, aclmdlRI modelRI,
                                                   aclError *err) {
    struct rill__acl_model *m = object_get_locked(call, "modelRI", modelRI);
    if (m && m->type != RILL_ACL_MODEL_OBJECT) {
        rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                       "%s: modelRI (%p) is a task group from aclmdlRICaptureTaskGrpEnd, no model",
                       call, modelRI);
        m = NULL;
    }
    if (!m)
        *err = ACL_ERROR_INVALID_PARAM;
    return m;
}

bool rill__acl_model_is_bound_locked(const struct rill__acl_model *m, rill_stream *s, size_t *at) {
    for (size_t i = 0; i < m->num_streams; i++)
        if (m->streams[i] == s) {
            if (at)
                *at = i;
            return true;
        }
    return false;
}

struct rill__acl_model *rill__acl_model_bound_to_locked(rill_stream *s) {
    for (struct rill__acl_model *m = models; m; m = m->next)
        if (rill__acl_model_is_bound_locked(m, s, NULL))
            return m;
    return NULL;
}

void rill__acl_model_link_locked(struct rill__acl_model *m) {
    m->next = models;
    models = m;
}

/* Closes the handles of m's task groups and frees them (models_lock
 * held). */
static void free_groups(struct rill__acl_model *m) {
    rill__acl_handles_lock();
    for (struct rill__acl_task_group *g = m->groups; g; g = g->next)
        rill__acl_handle_close_locked(g->handle);
    rill__acl_handles_unlock();
    while (m->groups) {
        struct rill__acl_task_group *g = m->groups;
        m->groups = g->next;
        free(g);
    }
}

static void unlink_model_locked(struct rill__acl_model *m) {
    for (struct rill__acl_model **p = &models; *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            return;
        }
}

/* Frees a model whose handle is closed: its capture ended (if it is still
 * building) and its exec destroyed (models_lock held). */
void rill__acl_model_release_locked(struct rill__acl_model *m) {
    unlink_model_locked(m);
    if (!m->exec && m->num_streams > 0)
        rill__acl_build_abandon_locked(m);
    if (m->exec)
        destroy_exec_locked(m->exec);
    for (size_t i = 0; i < m->num_segs; i++)
        destroy_exec_locked(m->segs[i]);
    free_groups(m);
    free(m->streams);
    free(m->segs);
    free(m);
}

void rill__acl_models_forget_all(void) {
    rill__acl_models_lock();
    while (kept) { /* rill_shutdown released the graphs */
        struct kept_graph *k = kept;
        kept = k->next;
        free(k);
    }
    while (captures) {
        struct capture *c = captures;
        captures = c->next;
        if (c->model) { /* not on the list of models yet */
            c->model->next = models;
            models = c->model;
        }
        free(c);
    }
    while (models) {
        struct rill__acl_model *m = models;
        models = m->next;
        (void)rill__acl_handle_take(m->handle, RILL_ACL_MODEL);
        free_groups(m);
        free(m->streams);
        free(m->segs);
        free(m);
    }
    rill__acl_models_unlock();
}

/* Launches the model that modelRI names on stream: a captured model is
 * one rill_graph_exec (rill checks it), a model built by hand its exec
 * once built, a model captured with task groups its segments in order. */
static aclError launch(const char *call, aclmdlRI modelRI, rill_stream *stream) {
    if (!modelRI)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: modelRI is NULL", call);
    if (!rill__acl_handle_is_ours(modelRI))
        return rill__acl_check(rill_graph_launch((rill_graph_exec *)modelRI, stream), call);
    aclError err = ACL_SUCCESS;
    rill_graph_exec *one = NULL, **execs = NULL;
    size_t n = 0;
    rill__acl_models_lock();
    struct rill__acl_model *m = rill__acl_model_get_locked(call, modelRI, &err);
    if (m && m->captured) {
        n = m->num_segs;
        execs = malloc(n * sizeof *execs);
        if (execs)
            for (size_t i = 0; i < n; i++)
                execs[i] = m->segs[i];
        else
            err = rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory to launch the model", call);
    } else if (m && m->exec) {
        one = m->exec;
        execs = &one;
        n = 1;
    } else if (m) {
        err =
            rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                           "%s: the model is still being built; call aclmdlRIBuildEnd first", call);
    }
    rill__acl_models_unlock();
    /* Launched without the lock: a launch may run host functions here. A
     * model destroyed meanwhile is rill's refusal of its execs. */
    for (size_t i = 0; i < n && err == ACL_SUCCESS; i++)
        err = rill__acl_check(rill_graph_launch(execs[i], stream), call);
    if (execs != &one)
        free(execs);
    return err;
}

aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
    return launch("aclmdlRIExecuteAsync", modelRI, (rill_stream *)stream);
}

aclError aclmdlRIExecute(aclmdlRI modelRI, int32_t timeout) {
    const char *call = "aclmdlRIExecute";
    uint64_t ns;
    aclError err = rill__acl_timeout_ns(call, timeout, &ns);
    if (err != ACL_SUCCESS)
        return err;
    rill_stream *s = rill_current_stream(NULL);
    rill_event *done;
    err = rill__acl_check(rill_event_create(0, &done), call);
    if (err != ACL_SUCCESS)
        return err;
    err = launch(call, modelRI, s);
    rill_status st = RILL_OK;
    if (err == ACL_SUCCESS)
        st = rill_event_record(done, s);
    if (err == ACL_SUCCESS && st == RILL_OK)
        st = rill__acl_wait(rill__acl_wait_event, done, ns);
    rill_event_destroy(done);
    if (err != ACL_SUCCESS)
        return err;
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
    aclError err = ACL_SUCCESS;
    rill__acl_models_lock();
    if (!rill__acl_handle_is_ours(modelRI)) {
        err = rill__acl_check(rill_graph_exec_destroy((rill_graph_exec *)modelRI), call);
        if (err == ACL_SUCCESS)
            drop_graph_locked(modelRI);
        rill__acl_models_unlock();
        return err;
    }
    struct rill__acl_model *m = rill__acl_model_get_locked(call, modelRI, &err);
    if (m) {
        rill__acl_handles_lock();
        rill__acl_handle_close_locked(m->handle);
        rill__acl_handles_unlock();
        rill__acl_model_release_locked(m);
    }
    rill__acl_models_unlock();
    return err;
}

/* ---- aclmdlRIDebugJsonPrint ---- */

/* Writes s to f as a JSON string, quotes included. */
static void json_string(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

/* Writes one graph's description to out: its node count and rill's DOT of
 * it, written first to a file beside path (models_lock held). */
static aclError describe_graph_locked(const char *call, FILE *out, const char *path,
                                      rill_graph *graph, size_t index) {
    size_t nodes = 0;
    aclError err = rill__acl_check(rill_graph_node_count(graph, &nodes), call);
    if (err != ACL_SUCCESS)
        return err;
    size_t len = strlen(path) + sizeof ".dot.XXXXXX";
    char *tmp = malloc(len);
    if (!tmp)
        return rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory for the description", call);
    snprintf(tmp, len, "%s.dot.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: cannot write beside path '%s' (%s); pass a path in a "
                             "writable folder",
                             call, path, strerror(errno));
        free(tmp);
        return err;
    }
    close(fd);
    char *dot = NULL;
    size_t dot_len = 0;
    err = rill__acl_check(rill_graph_write_dot(graph, tmp), call);
    FILE *in = err == ACL_SUCCESS ? fopen(tmp, "r") : NULL;
    if (in) {
        char buf[4096];
        size_t got;
        while ((got = fread(buf, 1, sizeof buf, in)) > 0) {
            char *grown = realloc(dot, dot_len + got);
            if (!grown) {
                err =
                    rill__acl_fail(ACL_ERROR_BAD_ALLOC, "%s: no memory for the description", call);
                break;
            }
            dot = grown;
            memcpy(dot + dot_len, buf, got);
            dot_len += got;
        }
        fclose(in);
    } else if (err == ACL_SUCCESS) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: cannot read back '%s' (%s)", call, tmp,
                             strerror(errno));
    }
    unlink(tmp);
    free(tmp);
    if (err == ACL_SUCCESS) {
        fprintf(out, "%s\n    {\"index\": %zu, \"nodes\": %zu, \"dot\": ", index ? "," : "", index,
                nodes);
        json_string(out, dot ? dot : "", dot_len);
        fputc('}', out);
    }
    free(dot);
    return err;
}

aclError aclmdlRIDebugJsonPrint(aclmdlRI modelRI, const char *path, uint32_t flags) {
    const char *call = "aclmdlRIDebugJsonPrint";
    if (!modelRI)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: modelRI is NULL", call);
    if (!path || !*path)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: path is %s; pass the file to write the description to", call,
                              path ? "empty" : "NULL");
    if (flags != ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY && flags != ACL_MDLRI_DEBUG_JSON_PRINT_VERBOSE)
        return rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                              "%s: flags %u is neither ACL_MDLRI_DEBUG_JSON_PRINT_SUMMARY (0) nor "
                              "..._VERBOSE (1)",
                              call, (unsigned)flags);
    aclError err = ACL_SUCCESS;
    rill__acl_models_lock();
    rill_graph_exec *one = NULL, *const *execs = NULL;
    size_t n = 0;
    const char *kind = "captured";
    if (!rill__acl_handle_is_ours(modelRI)) {
        one = modelRI;
        execs = &one;
        n = 1;
    } else {
        struct rill__acl_model *m = rill__acl_model_get_locked(call, modelRI, &err);
        if (m && m->captured) {
            execs = m->segs;
            n = m->num_segs;
            kind = "captured in segments";
        } else if (m && m->exec) {
            one = m->exec;
            execs = &one;
            n = 1;
            kind = "built by hand";
        } else if (m) {
            err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                                 "%s: the model is still being built; call aclmdlRIBuildEnd "
                                 "first",
                                 call);
        }
    }
    for (size_t i = 0; i < n && err == ACL_SUCCESS; i++)
        if (!graph_of_locked(execs[i]))
            err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                                 "%s: modelRI (%p) is no model of this library's "
                                 "aclmdlRICaptureEnd or aclmdlRIBuildEnd, or it was destroyed",
                                 call, modelRI);
    FILE *out = NULL;
    if (err == ACL_SUCCESS && !(out = fopen(path, "w")))
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: cannot write path '%s' (%s); pass a file in a writable folder",
                             call, path, strerror(errno));
    if (out) {
        fprintf(out, "{\n  \"modelRI\": \"%p\",\n  \"kind\": \"%s\",\n  \"graphs\": [", modelRI,
                kind);
        for (size_t i = 0; i < n && err == ACL_SUCCESS; i++)
            err = describe_graph_locked(call, out, path, graph_of_locked(execs[i]), i);
        fputs("\n  ]\n}\n", out);
        if (fclose(out) != 0 && err == ACL_SUCCESS)
            err = rill__acl_fail(ACL_ERROR_INVALID_PARAM, "%s: writing '%s' failed (%s)", call,
                                 path, strerror(errno));
    }
    rill__acl_models_unlock();
    return err;
}

/* ---- external waits and records ---- */

/* Appends to m a segment that waits for event (or records it): a graph of
 * that one node (models_lock held). */
static rill_status event_segment_locked(struct rill__acl_model *m, rill_event *event, bool record) {
    rill_status st = reserve_segment_locked(m);
    if (st != RILL_OK)
        return st;
    rill_graph *graph;
    st = rill_graph_create(&graph);
    if (st != RILL_OK)
        return st;
    rill_graph_node *node;
    st = record ? rill_graph_add_event_record_node(graph, NULL, 0, event, &node)
                : rill_graph_add_event_wait_node(graph, NULL, 0, event, &node);
    if (st == RILL_OK)
        st = rill_graph_instantiate(graph, &m->segs[m->num_segs]);
    if (st == RILL_OK) {
        rill__acl_model_keep_graph_locked(m->segs[m->num_segs], graph);
        m->num_segs++;
    } else {
        rill_graph_destroy(graph);
    }
    return st;
}

aclError rill__acl_capture_external(const char *call, rill_stream *stream, rill_event *event,
                                    bool record) {
    const char *what = record ? "an external record (ACL_EVENT_RECORD_EXTERNAL)"
                              : "an external wait (ACL_EVENT_WAIT_EXTERNAL)";
    rill_capture_status status;
    aclError err = rill__acl_check(rill_stream_get_capture_status(stream, &status), call);
    if (err != ACL_SUCCESS)
        return err;
    if (status != RILL_CAPTURE_ACTIVE)
        return rill__acl_fail(ACL_ERROR_RT_STREAM_NOT_CAPTURED,
                              "%s: the stream (%p) is not capturing; %s belongs in a capture "
                              "(aclmdlRICaptureBegin); use the default flag outside one",
                              call, (void *)stream, what);
    rill_device *dev;
    err = rill__acl_check(rill_event_get_device(event, &dev), call); /* a live event */
    if (err != ACL_SUCCESS)
        return err;
    rill__acl_models_lock();
    struct capture *c = capture_of_locked(stream, false);
    if (!c) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: %s is made on the stream that began the capture with "
                             "aclmdlRICaptureBegin, and the stream (%p) did not",
                             call, what, (void *)stream);
        goto out;
    }
    if (c->in_group) {
        err = rill__acl_fail(ACL_ERROR_INVALID_PARAM,
                             "%s: a task group is open; make %s before "
                             "aclmdlRICaptureTaskGrpBegin or after aclmdlRICaptureTaskGrpEnd",
                             call, what);
        goto out;
    }
    err = model_of_capture_locked(call, c);
    if (err != ACL_SUCCESS)
        goto out;
    bool ended;
    rill_status st = end_segment_locked(c, &ended);
    if (!ended) {
        err = rill__acl_check(st, call);
        goto out;
    }
    if (st == RILL_OK)
        st = event_segment_locked(c->model, event, record);
    if (st == RILL_OK)
        st = rill_stream_begin_capture(c->origin, c->mode);
    err = rill__acl_check(st, call);
    if (err != ACL_SUCCESS)
        drop_capture_locked(c); /* the capture has ended: it and its model go */
out:
    rill__acl_models_unlock();
    return err;
}
