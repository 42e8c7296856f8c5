/* SPDX-License-Identifier: MIT */
/* What the files of src/comm share beyond engine.h, grouped by defining
 * file. Calls go one way: comm_issue.c calls comm.c, engine_calls.c calls
 * engine.c. */
#ifndef RILL_COMM_COMM_INTERNAL_H
#define RILL_COMM_COMM_INTERNAL_H

#include <stdatomic.h>

#include "comm/engine.h"

/* ---- comm.c ---- */

/* The channel comm names, in use by the caller until it calls
 * rill__comm_engine_leave (a destroy on another thread waits for that);
 * RILL_ERROR_INVALID_ARGUMENT, with a sentence naming fn, when comm is
 * NULL, not a communicator, being destroyed or the parent's (fork). */
rill_status rill__comm_resolve(rill_comm *comm, const char *fn, rill__comm_channel **out);
/* The kernel that divides an average on a CUDA device (a CUDA-aware
 * transport leaves it a sum): made at first use (comm_issue.c), destroyed
 * by rill_shutdown (comm.c). */
extern _Atomic(rill_kernel *) rill__comm_divide_kernel;

/* ---- engine.c ---- */

/* The engine's state: one per process (rill__comm_engine). */
typedef struct rill__comm_engine_state {
    /* a spin lock: a fork's child resets it; never held across a call into
     * the transport or a wait */
    rill__spinlock lock;
    /* guarded by lock */
    bool started, stop;
    rill__thread thread;
    rill__comm_channel *channels;
    rill__stream **proxies; /* owned: free proxy streams */
    size_t num_proxies, cap_proxies;
    /* atomic */
    _Atomic uint32_t kick;     /* futex word: bumped when there is something to start */
    _Atomic uint32_t sleeping; /* the thread is about to sleep on kick */
    _Atomic uint32_t finished; /* futex word: bumped when a control task is done */
    /* communication thread only */
    rill__comm_task *active; /* started tasks, abandoned ones included */
    int live;                /* started tasks that are not abandoned */
} rill__comm_engine_state;
extern rill__comm_engine_state rill__comm_engine;
/* The communication thread's body (started by rill__comm_engine_add). */
void rill__comm_engine_main(void *arg);
/* Lets go of a proxy stream for good (rill__comm_engine_shutdown, or no
 * memory to keep it free). */
void rill__comm_engine_release_proxy(rill__stream *p);

#endif
