/* SPDX-License-Identifier: MIT */
/* model.c: model running instances: capture (with task groups), execution
 * and destruction of every kind of aclmdlRI, and the models of this layer
 * that build.c builds by hand; ACL's functions are declared in
 * acl/acl_mdl.h, the others here. */
#ifndef RILL_ACL_MODEL_H
#define RILL_ACL_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "acl/acl_mdl.h"
#include "rill.h"

enum { RILL_ACL_MODEL_OBJECT = 1, RILL_ACL_TASK_GROUP_OBJECT = 2 };

struct rill__acl_task_group;

/* A model of this layer: built by hand (build.c), or captured with task
 * groups (model.c). Guarded by the models' lock. */
struct rill__acl_model {
    int type;              /* RILL_ACL_MODEL_OBJECT */
    void *handle;          /* its handle in the table */
    rill_graph_exec *exec; /* owned: NULL until aclmdlRIBuildEnd */
    rill_stream **streams; /* owned array of borrowed streams: the bound ones, [0] the origin */
    size_t num_streams, cap_streams;
    bool ended; /* aclmdlRIEndTask was called */
    /* A model captured with task groups: exec stays NULL. */
    bool captured;
    rill_graph_exec **segs; /* owned: the capture's segments, in order */
    size_t num_segs, cap_segs;
    bool complete;                       /* the capture has ended: segs are the whole model */
    struct rill__acl_task_group *groups; /* owned: its task groups */
    struct rill__acl_model *next;        /* on the list of models */
};

/* A task group: segment seg of a captured model, which
 * aclmdlRICaptureTaskUpdateBegin/End capture again. Its handle is of the
 * model kind, told apart by type. */
struct rill__acl_task_group {
    int type;                          /* RILL_ACL_TASK_GROUP_OBJECT */
    void *handle;                      /* its handle in the table */
    struct rill__acl_model *model;     /* borrowed: the model owns its groups */
    size_t seg;                        /* immutable */
    struct rill__acl_task_group *next; /* on the model's list */
};

/* The lock of every model and of the list of them: held briefly, with
 * rill's capture calls made under it (none of them runs a host function). */
void rill__acl_models_lock(void);
void rill__acl_models_unlock(void);
/* The model that modelRI names, or NULL with the message (a destroyed,
 * foreign or other-kind handle, or a task group) and *err set to
 * ACL_ERROR_INVALID_PARAM (models' lock held). */
struct rill__acl_model *rill__acl_model_get_locked(const char *call, aclmdlRI modelRI,
                                                   aclError *err);
/* Puts a new model on the list (models' lock held). */
void rill__acl_model_link_locked(struct rill__acl_model *m);
/* Whether s is bound to m, at *at when not NULL; the model s is bound to,
 * or NULL (models' lock held). */
bool rill__acl_model_is_bound_locked(const struct rill__acl_model *m, rill_stream *s, size_t *at);
struct rill__acl_model *rill__acl_model_bound_to_locked(rill_stream *s);
/* Frees a model whose handle is closed: a build still going is abandoned,
 * its execs destroyed and its task groups' handles closed (models' lock
 * held). */
void rill__acl_model_release_locked(struct rill__acl_model *m);
/* ACL_EVENT_WAIT_EXTERNAL (record false) or ACL_EVENT_RECORD_EXTERNAL on
 * stream, which must be the origin of a capture begun by
 * aclmdlRICaptureBegin: the capture is cut there, and a segment that waits
 * for (records) event at each execution is put between its parts. */
aclError rill__acl_capture_external(const char *call, rill_stream *stream, rill_event *event,
                                    bool record);
/* Keeps graph (owned from now) as the description of the model part that
 * exec runs, replacing one kept before; freed when the exec is destroyed
 * here (models' lock held). */
void rill__acl_model_keep_graph_locked(rill_graph_exec *exec, rill_graph *graph);
/* Frees every model and capture note (aclFinalize, after rill_shutdown has
 * released their rill objects). */
void rill__acl_models_forget_all(void);

#endif /* RILL_ACL_MODEL_H */
