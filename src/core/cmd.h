/* SPDX-License-Identifier: MIT */
/* A command as the core hands it to a backend's submit op. The core takes
 * a reference on every handle a command names before submitting it; the
 * backend releases them (rill__cmd_release) once the command has run or
 * been skipped. Pointers to caller memory (args, accesses) are borrowed
 * only for the duration of submit: the backend copies them. */
#ifndef RILL_CORE_CMD_H
#define RILL_CORE_CMD_H

#include "core/handle.h"
#include "rill.h"

typedef enum rill__cmd_kind {
    RILL__CMD_KERNEL = 1, /* a grid of blocks */
    RILL__CMD_HOST,       /* rill_launch_host_func */
    RILL__CMD_WAIT,       /* wait until u.wait.stream completes u.wait.seq */
    RILL__CMD_RECORD,     /* timestamp a timing event; publish an interprocess record */
    RILL__CMD_COPY,       /* memcpy */
    RILL__CMD_SET,        /* memset */
    RILL__CMD_CLEAR,      /* rill_stream_clear_error: later work runs again */
    RILL__CMD_GRAPH       /* rill_graph_launch: every node of an exec */
} rill__cmd_kind;

enum rill__cmd_flags {
    /* The command may wait for something the library cannot see: a host
     * function, a wait for another process, or a wait for a stream with
     * such work pending. Work queued behind it may come to wait for any
     * later work of any stream, so the memory pool never makes another
     * stream wait behind it (see rill__stream_opaque_pending). */
    RILL__CMD_OPAQUE = 1u << 0,
    /* A WAIT that orders memory only (the pool's internal waits): it ends
     * when the awaited work completes or is skipped after a failure, and
     * never carries that failure to the waiting stream. */
    RILL__CMD_ORDER_ONLY = 1u << 1
};

typedef struct rill__cmd {
    rill__cmd_kind kind;
    unsigned flags; /* enum rill__cmd_flags */
    union {
        struct {
            rill__kernel *kernel; /* borrowed: a destroyed kernel outlives its launches */
            rill_dim3 grid;
            rill_dim3 block;
            const void *args; /* borrowed during submit */
            size_t args_size;
            const rill_access *accesses; /* borrowed during submit */
            size_t num_accesses;
        } kernel;
        struct {
            rill_host_fn fn;
            void *user_data;
        } host;
        struct {
            rill__stream *stream; /* ref */
            uint64_t seq;
        } wait;
        struct {
            rill__event *event; /* ref */
            uint64_t gen;
        } record;
        struct {
            void *dst;
            const void *src;
            size_t bytes;
        } copy;
        struct {
            void *dst;
            int value;
            size_t bytes;
        } set;
        struct {
            struct rill__xparams *params; /* ref: the exec's parameters for this launch */
            /* drops the reference on params (src/graph owns them): the
             * core calls it and knows nothing of execs */
            void (*release)(struct rill__xparams *params);
            /* the exec's previous launch, on another stream, or NULL: the
             * launch runs (or is skipped) only once after_stream completed
             * after_seq, whether that work ran, failed or was skipped, so
             * launches of one exec never overlap and a failure of one does
             * not fail the next */
            rill__stream *after_stream; /* ref */
            uint64_t after_seq;
        } graph;
    } u;
} rill__cmd;

/* Releases the references a command holds (see above). */
void rill__cmd_release(rill__cmd *cmd);

#endif
