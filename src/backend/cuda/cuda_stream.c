/* SPDX-License-Identifier: MIT */
/* Streams of the CUDA backend: submit, issue, and the pump that reports
 * completions (see cuda.h). Each stream's commands sit in a list in stream
 * order, from submission to completion; next_issue marks the first one not
 * handed to the driver yet. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_graph.h"
#include "util/alloc.h"
#include "util/status.h"

enum cmd_state {
    QUEUED = 0, /* not issued: held back by a command before it */
    ON_GPU,     /* issued; complete once the done word reaches its number */
    MET,        /* nothing left on the GPU: complete once the ones before it are */
    RUNNING     /* a host function or graph launch the pump is running */
};

struct cuda_cmd {
    cuda_cmd *next;
    rill__cmd c; /* kernel args point into args, the command's own copy */
    uint64_t seq;
    enum cmd_state state;
    CUresult error;     /* an issue that failed: the command fails the stream */
    char *why;          /* owned: a library's sentence for error, or NULL */
    CUevent ev;         /* a WAIT the GPU does: its event; a RECORD: the point's time */
    void *graph_run;    /* owned: a graph launch's, for its completion (cuda_graph.h) */
    bool waiting;       /* a WAIT or graph launch with its waiter registered */
    bool carried;       /* a WAIT that took on the awaited work's failure when issued */
    bool on_host;       /* a SET of host memory the GPU cannot write: a runner does it */
    _Atomic int met;    /* ... and the waiter was called */
    cuda_device *d;     /* for the waiter */
    cuda_stream *cs;    /* its stream, for a runner */
    cuda_cmd *job_next; /* on the device's list of jobs for the runners */
    rill__waiter waiter;
    alignas(16) unsigned char args[]; /* kernel args, aligned for any parameter */
};
_Static_assert(sizeof(struct cuda_cmd) <= CUDA_CMD_BYTES, "cuda_cmd: raise CUDA_CMD_BYTES");

/* ------------------------------------------------------------- the bell */

void rill__cuda_ring(cuda_device *d) {
    /* seq_cst: a Dekker pair with the pump's store of sleeping and load
     * of bell. */
    atomic_fetch_add(&d->bell, 1);
    if (atomic_load(&d->sleeping))
        rill__futex_wake(&d->bell, 1);
}

static void on_met(rill__waiter *w) {
    cuda_cmd *n = (cuda_cmd *)(void *)((char *)w - offsetof(cuda_cmd, waiter));
    cuda_device *d = n->d; /* n may be freed once met is seen */
    atomic_store_explicit(&n->met, 1, memory_order_release);
    rill__cuda_ring(d);
}

/* Registers n's waiter for t's seq; true when that is done already. Once
 * the waiter is registered only its call says so: rill__stream_complete
 * publishes done_seq before it takes the waiters out of t's list, and n,
 * freed once it completes, must not be freed while its waiter is still
 * there (a WAIT for a collective's proxy, completed by the communication
 * thread while this stream issued, was). */
static bool wait_for(cuda_cmd *n, rill__stream *t, uint64_t seq) {
    if (n->waiting)
        return atomic_load_explicit(&n->met, memory_order_acquire) != 0;
    if (atomic_load_explicit(&rill__queue_of(t)->done_seq, memory_order_acquire) >= seq)
        return true;
    n->waiter.seq = seq;
    n->waiter.fn = on_met;
    if (!rill__stream_add_waiter(t, &n->waiter))
        return true;
    n->waiting = true;
    return atomic_load_explicit(&n->met, memory_order_acquire) != 0;
}

/* ---------------------------------------------------------------- issue */

/* Runs a kernel call; a built-in op that a library runs goes there, and a
 * failure of the library's leaves its sentence in *why (owned). */
static CUresult launch(cuda_device *d, CUstream stream, const rill__kernel_call *k, char **why) {
    const cuda_loaded *l = k->loaded;
    if (l->fn == NULL) {
        char text[320];
        if (rill__cuda_op_library(&d->libs, l->op, stream, k->args, text, sizeof text) == RILL_OK)
            return CUDA_SUCCESS;
        if (*why == NULL)
            *why = rill__strdup(text);
        return CUDA_ERROR_UNKNOWN;
    }
    size_t size = k->args_size;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, (void *)k->args, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &size, CU_LAUNCH_PARAM_END};
    return d->drv->cuLaunchKernel(l->fn, k->grid.x, k->grid.y, k->grid.z, k->block.x, k->block.y,
                                  k->block.z, 0, stream, NULL, size > 0 ? extra : NULL);
}

static CUresult copy(cuda_device *d, CUstream stream, const rill__copy_call *c) {
    return d->drv->cuMemcpyAsync((CUdeviceptr)(uintptr_t)c->dst, (CUdeviceptr)(uintptr_t)c->src,
                                 c->bytes, stream);
}

/* Whether the driver knows p as memory a GPU writes (device memory,
 * page-locked host memory), rather than pageable host memory. */
static bool gpu_writable(cuda_device *d, const void *p) {
    unsigned int type = 0;
    return d->drv->cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                         (CUdeviceptr)(uintptr_t)p) == CUDA_SUCCESS;
}

static CUresult set(cuda_device *d, CUstream stream, const rill__set_call *c) {
    return d->drv->cuMemsetD8Async((CUdeviceptr)(uintptr_t)c->dst, (unsigned char)c->value,
                                   c->bytes, stream);
}

/* Appends the write of n's number to the done word: n is on the GPU. */
static void mark_done_on_gpu(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    CUresult r =
        d->drv->cuStreamWriteValue64(cs->cu, cs->done_dev, n->seq, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r != CUDA_SUCCESS && n->error == CUDA_SUCCESS)
        n->error = r;
    /* Without the write, nothing would report n: it completes on the host
     * once the ones before it have. */
    n->state = r == CUDA_SUCCESS ? ON_GPU : MET;
}

/* A WAIT of cs for t's seq, where t is a stream of the same device whose
 * work up to seq is issued: an event recorded on t now and waited for by
 * cs's CUstream. The event covers what t had when the WAIT was submitted,
 * never work submitted later, so it closes no cycle. False when the GPU
 * cannot take the wait (the host waits instead). */
static bool wait_on_gpu(cuda_device *d, cuda_stream *cs, cuda_cmd *n, cuda_stream *ts) {
    const rill__cuda_driver *drv = d->drv;
    CUevent ev;
    if (drv->cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return false;
    if (drv->cuEventRecord(ev, ts->cu) != CUDA_SUCCESS ||
        drv->cuStreamWaitEvent(cs->cu, ev, 0) != CUDA_SUCCESS) {
        (void)drv->cuEventDestroy(ev);
        return false;
    }
    n->ev = ev;
    return true;
}

/* A WAIT being issued takes on the failure of the work it waits for, as
 * far as it is known now: a failure seen later (work still on the GPU) is
 * taken on when the WAIT completes (cs->lock held). A stream already
 * skipping skips its work anyway; an order-only wait never carries a
 * failure. */
static void carry(cuda_stream *cs, cuda_cmd *n) {
    if (cs->skipping || (n->c.flags & RILL__CMD_ORDER_ONLY))
        return;
    if (rill__stream_carry_failure(cs->self, n->seq, n->c.u.wait.stream, n->c.u.wait.seq)) {
        n->carried = true;
        cs->skipping = 1;
    }
}

/* Hands n to the GPU, or settles it on the host; false when n holds the
 * work after it back (cs->lock held). */
static bool issue_one(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    switch (n->c.kind) {
    case RILL__CMD_KERNEL:
    case RILL__CMD_COPY:
    case RILL__CMD_SET:
        if (cs->skipping) {
            n->state = MET;
            return true;
        }
        if (n->on_host)
            return false; /* a runner sets it once it is first (service) */
        n->error = n->c.kind == RILL__CMD_KERNEL ? launch(d, cs->cu, &n->c.u.kernel, &n->why)
                   : n->c.kind == RILL__CMD_COPY ? copy(d, cs->cu, &n->c.u.copy)
                                                 : set(d, cs->cu, &n->c.u.set);
        if (n->error != CUDA_SUCCESS) {
            n->state = MET;
            return true;
        }
        mark_done_on_gpu(d, cs, n);
        return true;
    case RILL__CMD_CLEAR:
        cs->skipping = 0;
        cs->clear_seq = n->seq;
        mark_done_on_gpu(d, cs, n);
        return true;
    case RILL__CMD_RECORD:
        /* The GPU's time of the point, for timing events (rill__cuda_stamp);
         * without it, the pump's time when it sees the point done. */
        if (d->drv->cuEventCreate(&n->ev, CU_EVENT_DEFAULT) != CUDA_SUCCESS)
            n->ev = NULL;
        else if (d->drv->cuEventRecord(n->ev, cs->cu) != CUDA_SUCCESS) {
            (void)d->drv->cuEventDestroy(n->ev);
            n->ev = NULL;
        }
        mark_done_on_gpu(d, cs, n);
        return true;
    case RILL__CMD_WAIT: {
        rill__stream *t = n->c.u.wait.stream;
        uint64_t seq = n->c.u.wait.seq;
        if (!n->waiting && rill__queue_of(t)->dev == rill__queue_of(cs->self)->dev &&
            atomic_load_explicit(&cuda_stream_of(t)->issued_seq, memory_order_acquire) >= seq &&
            wait_on_gpu(d, cs, n, cuda_stream_of(t))) {
            carry(cs, n);
            mark_done_on_gpu(d, cs, n);
            return true;
        }
        if (!wait_for(n, t, seq))
            return false;
        carry(cs, n);
        n->state = MET;
        return true;
    }
    case RILL__CMD_GRAPH: {
        /* One CUDA graph: issued as a kernel is, once the exec's previous
         * launch has ended; a launch with host nodes is a runner's. */
        const rill__graph_launch *l = n->c.u.graph.launch;
        if (!rill__cuda_graph_direct(l) ||
            (n->c.u.graph.after_stream != NULL &&
             !wait_for(n, n->c.u.graph.after_stream, n->c.u.graph.after_seq)))
            return false;
        if (cs->skipping) {
            n->state = MET;
            return true;
        }
        n->error = rill__cuda_graph_issue(d, cs->cu, l, &n->graph_run);
        if (n->error != CUDA_SUCCESS) {
            n->state = MET;
            return true;
        }
        mark_done_on_gpu(d, cs, n);
        return true;
    }
    case RILL__CMD_HOST:
        return false; /* a runner runs it once it is first (service) */
    }
    return false;
}

/* Issues what nothing holds back any more (cs->lock held). */
static void issue_ready(cuda_device *d, cuda_stream *cs) {
    cuda_cmd *n = cs->next_issue;
    while (n != NULL && issue_one(d, cs, n)) {
        atomic_store_explicit(&cs->issued_seq, n->seq, memory_order_release);
        n = n->next;
    }
    cs->next_issue = n;
}

/* Puts s on the device's active list (with a reference) unless it is. */
static rill_status activate(cuda_device *d, rill__stream *s) {
    rill__mutex_lock(&d->lock);
    if (d->num_active == d->cap_active) {
        size_t cap = d->cap_active > 0 ? 2 * d->cap_active : 16;
        rill__stream **a = rill__realloc(d->active, cap * sizeof *a);
        if (a == NULL) {
            rill__mutex_unlock(&d->lock);
            return RILL_ERROR_OUT_OF_MEMORY;
        }
        d->active = a;
        d->cap_active = cap;
    }
    rill__stream_ref(s);
    d->active[d->num_active++] = s;
    rill__mutex_unlock(&d->lock);
    return RILL_OK;
}

rill_status rill__cuda_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq) {
    rill__queue *q = rill__queue_of(s);
    cuda_device *d = cuda_device_of(q->dev);
    cuda_stream *cs = cuda_stream_of(s);
    size_t args = cmd->kind == RILL__CMD_KERNEL ? cmd->u.kernel.args_size : 0;
    cuda_cmd *n = rill__calloc(1, sizeof *n + args);
    if (n == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory queuing a command");
    n->c = *cmd;
    n->d = d;
    n->cs = cs;
    if (cmd->kind == RILL__CMD_KERNEL) {
        if (args > 0)
            memcpy(n->args, cmd->u.kernel.args, args);
        n->c.u.kernel.args = n->args;
        n->c.u.kernel.accesses = NULL; /* borrowed; the GPU needs none */
        n->c.u.kernel.num_accesses = 0;
    }
    CUcontext prev = rill__cuda_enter(d);
    /* The driver writes device memory and page-locked host memory only:
     * a memset of other host memory runs on the host, in stream order. */
    if (cmd->kind == RILL__CMD_SET)
        n->on_host = !gpu_writable(d, cmd->u.set.dst);
    rill__mutex_lock(&cs->lock);
    if (!cs->active && activate(d, s) != RILL_OK) {
        rill__mutex_unlock(&cs->lock);
        rill__cuda_leave(d, prev);
        rill__free(n);
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory queuing a command");
    }
    cs->active = true;
    n->seq = atomic_load_explicit(&q->sub_seq, memory_order_relaxed) + 1;
    if (cs->tail != NULL)
        cs->tail->next = n;
    else
        cs->head = n;
    cs->tail = n;
    if (cs->next_issue == NULL)
        cs->next_issue = n;
    if (cmd->flags & RILL__CMD_OPAQUE)
        atomic_store_explicit(&q->opaque_seq, n->seq, memory_order_relaxed);
    issue_ready(d, cs);
    /* release: whoever reads the number sees the command and opaque_seq. */
    atomic_store_explicit(&q->sub_seq, n->seq, memory_order_release);
    *seq = n->seq;
    rill__mutex_unlock(&cs->lock);
    rill__cuda_leave(d, prev);
    rill__cuda_ring(d);
    return RILL_OK;
}

/* ------------------------------------------------------------ completion */

/* Opens a failure window at seq: what failed on s, and why. */
static void fail_stream(cuda_stream *cs, uint64_t seq, const char *what, const char *detail) {
    char name[80], msg[RILL__CAUSE_BYTES];
    rill__stream_name(cs->self, name, sizeof name);
    snprintf(msg, sizeof msg, "%s on stream %s failed: %s", what, name,
             detail[0] != '\0' ? detail : "(no message)");
    rill__stream_fail(cs->self, seq, msg);
    cs->failing = 1;
    /* Work issued after a CLEAR past seq runs; what follows seq does not. */
    rill__mutex_lock(&cs->lock);
    if (cs->clear_seq < seq)
        cs->skipping = 1;
    rill__mutex_unlock(&cs->lock);
}

static const char *kind_name(const cuda_cmd *n) {
    switch (n->c.kind) {
    case RILL__CMD_COPY:
        return "memcpy";
    case RILL__CMD_SET:
        return "memset";
    case RILL__CMD_WAIT:
        return "wait";
    case RILL__CMD_HOST:
        return "host function";
    case RILL__CMD_GRAPH:
        return "graph launch";
    default:
        return "command";
    }
}

/* What a completed command does on the host, then its release and
 * completion (no lock held). */
/* Whether r leaves the context unusable: a fault on the GPU, which every
 * later call of the context reports too (docs/cuda.md, plan item 2). */
static bool ends_context(CUresult r) {
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_CONTAINED:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return true;
    default:
        return false;
    }
}

static void finish(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    rill__stream *s = cs->self;
    if (n->error != CUDA_SUCCESS && ends_context(n->error)) {
        char why[200];
        rill__cuda_describe(d, n->error, "the GPU stopped", why, sizeof why);
        rill__device_lost(rill__queue_of(s)->dev, why);
    }
    if (n->error != CUDA_SUCCESS && !cs->failing) {
        char what[96], why[256];
        if (n->c.kind == RILL__CMD_KERNEL)
            snprintf(what, sizeof what, "kernel '%.60s'",
                     rill__kernel_image_of(n->c.u.kernel.kernel)->name);
        else
            snprintf(what, sizeof what, "%s", kind_name(n));
        if (n->why != NULL)
            snprintf(why, sizeof why, "%s", n->why);
        else
            rill__cuda_describe(d, n->error, "the CUDA driver refused it", why, sizeof why);
        fail_stream(cs, n->seq, what, why);
    }
    rill__free(n->why);
    switch (n->c.kind) {
    case RILL__CMD_WAIT:
        if (n->ev != NULL)
            (void)d->drv->cuEventDestroy(n->ev);
        if (n->carried)
            cs->failing = 1;
        else if (!cs->failing && !(n->c.flags & RILL__CMD_ORDER_ONLY) &&
                 rill__stream_carry_failure(s, n->seq, n->c.u.wait.stream, n->c.u.wait.seq)) {
            cs->failing = 1;
            rill__mutex_lock(&cs->lock);
            if (cs->clear_seq < n->seq)
                cs->skipping = 1;
            rill__mutex_unlock(&cs->lock);
        }
        break;
    case RILL__CMD_RECORD:
        /* rill__cuda_stamp takes the event. */
        rill__event_stamp(n->c.u.record.event, n->c.u.record.gen,
                          n->ev != NULL ? rill__cuda_stamp(d, n->ev) : rill__now_ns(), cs->failing);
        break;
    case RILL__CMD_CLEAR:
        cs->failing = 0;
        rill__stream_clear_failure(s, n->seq);
        break;
    case RILL__CMD_GRAPH:
        rill__cuda_graph_done(d, n->c.u.graph.launch, n->graph_run, cs->failing);
        break;
    default:
        break;
    }
    uint64_t seq = n->seq;
    rill__cmd_release(s, &n->c);
    rill__free(n);
    rill__stream_complete(s, seq);
}

/* --------------------------------------------------- host functions, graphs */

static void run_host(cuda_stream *cs, cuda_cmd *n) {
    if (cs->failing)
        return;
    if (rill__host_run(n->c.u.host.fn, n->c.u.host.user_data, &cs->ls))
        fail_stream(cs, n->seq, "host function", cs->ls.message);
}

/* A memset of host memory the GPU cannot write, first in its stream. */
static void run_set(cuda_stream *cs, cuda_cmd *n) {
    if (!cs->failing)
        memset(n->c.u.set.dst, n->c.u.set.value, n->c.u.set.bytes);
}

/* --------------------------------------------------------------- runners */

/* Runs a host function or graph launch that is first in its stream, then
 * lets the stream's later work through (a runner thread, no lock held). */
static void run_job(cuda_device *d, cuda_cmd *n) {
    cuda_stream *cs = n->cs;
    bool settled = true;
    if (n->c.kind == RILL__CMD_HOST) {
        run_host(cs, n);
    } else if (n->c.kind == RILL__CMD_SET) {
        run_set(cs, n);
    } else if (!cs->failing) {
        char what[96], why[RILL__CAUSE_BYTES];
        settled = rill__cuda_graph_run(d, cs, n->c.u.graph.launch, n->c.u.graph.ext, &n->graph_run,
                                       what, sizeof what, why, sizeof why);
        if (what[0] != '\0')
            fail_stream(cs, n->seq, what, why);
    }
    if (atomic_load(&d->exiting))
        return; /* the process exits: the driver may be gone */
    /* A host function may have made another context current (through
     * the CUDA runtime, PyTorch): this thread is rill's own. */
    (void)rill__cuda_enter(d);
    rill__mutex_lock(&cs->lock);
    if (settled)
        n->state = MET;
    else
        mark_done_on_gpu(d, cs, n);
    cs->next_issue = n->next;
    atomic_store_explicit(&cs->issued_seq, n->seq, memory_order_release);
    rill__mutex_unlock(&cs->lock);
    rill__cuda_ring(d);
}

static void runner_main(void *arg) {
    cuda_device *d = arg;
    (void)rill__cuda_enter(d);
    rill__thread_set_worker(1);
    rill__mutex_lock(&d->run_lock);
    for (;;) {
        while (d->jobs == NULL && !atomic_load(&d->stop)) {
            uint32_t bell = atomic_load(&d->run_bell);
            d->idle_runners++;
            rill__mutex_unlock(&d->run_lock);
            rill__futex_wait(&d->run_bell, bell);
            rill__mutex_lock(&d->run_lock);
            d->idle_runners--;
        }
        cuda_cmd *n = d->jobs;
        if (n == NULL || atomic_load(&d->exiting))
            break; /* stopping, and nothing is left, or the process exits */
        d->jobs = n->job_next;
        if (d->jobs == NULL)
            d->jobs_tail = NULL;
        rill__mutex_unlock(&d->run_lock);
        run_job(d, n);
        rill__mutex_lock(&d->run_lock);
    }
    rill__mutex_unlock(&d->run_lock);
}

/* Gives n to a runner: an idle one, or a new one while there are fewer
 * than RILL__CUDA_MAX_RUNNERS (beyond that, n waits for one to finish). */
static void hand_over(cuda_device *d, cuda_cmd *n) {
    rill__mutex_lock(&d->run_lock);
    n->job_next = NULL;
    if (d->jobs_tail != NULL)
        d->jobs_tail->job_next = n;
    else
        d->jobs = n;
    d->jobs_tail = n;
    if (d->idle_runners == 0 && d->num_runners < RILL__CUDA_MAX_RUNNERS) {
        rill__thread_start(&d->runners[d->num_runners], "rill-cuda-run", runner_main, d);
        d->num_runners++;
    }
    rill__mutex_unlock(&d->run_lock);
    atomic_fetch_add(&d->run_bell, 1);
    rill__futex_wake(&d->run_bell, 1);
}

void rill__cuda_runners_wake(cuda_device *d) {
    atomic_store(&d->stop, 1);
    atomic_fetch_add(&d->run_bell, 1);
    rill__futex_wake(&d->run_bell, INT32_MAX);
}

void rill__cuda_runners_stop(cuda_device *d) {
    rill__mutex_lock(&d->run_lock);
    int n = d->num_runners;
    rill__mutex_unlock(&d->run_lock);
    rill__cuda_runners_wake(d);
    for (int i = 0; i < n; i++)
        rill__thread_join(&d->runners[i]);
}

/* ------------------------------------------------------------------ pump */

/* Completes what is done on s, runs the host function or graph launch
 * that comes first, and issues what that lets through. Returns whether
 * anything moved; *gpu is set when work is left on the GPU. */
/* Completes, in order, the commands of cs that are done: on the GPU (the
 * done word passed them) or settled on the host. A wait that the GPU did
 * for another stream of the device completes only after that stream's
 * awaited work is reported complete, so that what a host thread sees done
 * keeps the order the GPU ran it in (an event that a finished stream
 * waited for is complete too); that stream is completed first when it can
 * be. One thread at a time completes a stream (the pump, or a host thread
 * waiting for it: host_help); false, doing nothing, when another one is at
 * it. Returns whether it completed any; no lock held. */
static bool complete_done(cuda_device *d, cuda_stream *cs) {
    int idle = 0;
    if (!atomic_compare_exchange_strong_explicit(&cs->completing, &idle, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return false;
    bool moved = false;
    for (;;) {
        cuda_cmd *done = NULL, **done_tail = &done, *h;
        rill__stream *behind = NULL; /* the awaited stream that holds the next wait back */
        rill__mutex_lock(&cs->lock);
        /* acquire: the GPU's write follows the command's work. */
        uint64_t word = atomic_load_explicit(cs->done_word, memory_order_acquire);
        while ((h = cs->head) != NULL && h != cs->next_issue &&
               (h->state == MET || (h->state == ON_GPU && h->seq <= word))) {
            if (h->c.kind == RILL__CMD_WAIT && h->ev != NULL &&
                atomic_load_explicit(&rill__queue_of(h->c.u.wait.stream)->done_seq,
                                     memory_order_acquire) < h->c.u.wait.seq) {
                behind = h->c.u.wait.stream;
                break;
            }
            cs->head = h->next;
            if (cs->head == NULL)
                cs->tail = NULL;
            h->next = NULL;
            *done_tail = h;
            done_tail = &h->next;
        }
        rill__mutex_unlock(&cs->lock);
        moved |= done != NULL;
        while (done != NULL) {
            cuda_cmd *next = done->next;
            finish(d, cs, done);
            done = next;
        }
        /* The awaited stream's completer may be another thread (then the
         * next look goes on) or this one, further up: no waiting here. */
        if (behind == NULL || !complete_done(d, cuda_stream_of(behind)))
            break;
    }
    /* release: the next completer sees what this one did (failing). */
    atomic_store_explicit(&cs->completing, 0, memory_order_release);
    return moved;
}

static bool service(cuda_device *d, rill__stream *s, bool *gpu, bool *idle) {
    cuda_stream *cs = cuda_stream_of(s);
    cuda_cmd *run = NULL;
    bool moved = complete_done(d, cs);
    rill__mutex_lock(&cs->lock);
    cuda_cmd *h = cs->head;
    /* next_issue stays on a command a runner runs, so that nothing after
     * it is issued before it is done. */
    if (!moved && h != NULL && h == cs->next_issue && h->state == QUEUED &&
        (h->c.kind == RILL__CMD_HOST ||
         (h->c.kind == RILL__CMD_GRAPH && !rill__cuda_graph_direct(h->c.u.graph.launch)) ||
         (h->c.kind == RILL__CMD_SET && h->on_host))) {
        rill__stream *after = h->c.kind == RILL__CMD_GRAPH ? h->c.u.graph.after_stream : NULL;
        /* A launch waits for the exec's previous one, even when skipped. */
        if (after == NULL || wait_for(h, after, h->c.u.graph.after_seq)) {
            h->state = RUNNING;
            run = h;
        }
    }
    rill__mutex_unlock(&cs->lock);
    if (run != NULL) {
        hand_over(d, run);
        moved = true;
    }
    rill__mutex_lock(&cs->lock);
    uint64_t issued = atomic_load_explicit(&cs->issued_seq, memory_order_relaxed);
    issue_ready(d, cs);
    moved |= atomic_load_explicit(&cs->issued_seq, memory_order_relaxed) != issued;
    /* Issued and not completed: the done word is to be watched. */
    *gpu = *gpu || (cs->head != NULL && cs->head != cs->next_issue);
    *idle = cs->head == NULL;
    if (*idle)
        cs->active = false;
    rill__mutex_unlock(&cs->lock);
    return moved;
}

bool rill__cuda_host_help(rill__stream *s, uint64_t seq) {
    cuda_stream *cs = cuda_stream_of(s);
    (void)seq;
    /* Nothing the GPU finished that is not completed yet: the pump sees to
     * the rest (host-settled commands, runners' work). acquire: pairs with
     * the GPU's write, as in complete_done. */
    if (atomic_load_explicit(cs->done_word, memory_order_acquire) <=
        atomic_load_explicit(&rill__queue_of(s)->done_seq, memory_order_acquire))
        return false;
    cuda_device *d = cuda_device_of(rill__queue_of(s)->dev);
    rill__thread_enter_worker();
    CUcontext prev = rill__cuda_enter(d); /* completing destroys events */
    bool moved = complete_done(d, cs);
    rill__cuda_leave(d, prev);
    rill__thread_leave_worker();
    if (moved)
        rill__cuda_ring(d); /* the pump issues what the completions let through */
    return moved;
}

/* A stream whose CUstream reports an error: the context failed (an illegal
 * address, a trap). Everything issued is lost; the stream fails, and so
 * does every later command. */
static void check_context(cuda_device *d, rill__stream *s) {
    cuda_stream *cs = cuda_stream_of(s);
    CUresult r = d->drv->cuStreamQuery(cs->cu);
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY)
        return;
    int idle = 0;
    if (!atomic_compare_exchange_strong_explicit(&cs->completing, &idle, 1, memory_order_acquire,
                                                 memory_order_relaxed))
        return; /* a completer is at work: the next round sees the failure */
    rill__mutex_lock(&cs->lock);
    cuda_cmd *h = cs->head;
    uint64_t seq = h != NULL ? h->seq : 0;
    for (cuda_cmd *n = h; n != NULL && n != cs->next_issue; n = n->next)
        if (n->state == ON_GPU)
            n->state = MET;
    cs->skipping = 1;
    cs->clear_seq = 0;
    rill__mutex_unlock(&cs->lock);
    /* A context error ends the device as a whole (CUDA cannot recover the
     * context): every stream of it fails, each as the pump finds it. */
    char why[200];
    rill__cuda_describe(d, r, "the GPU stopped", why, sizeof why);
    rill__device_lost(rill__queue_of(s)->dev, why);
    if (seq != 0)
        fail_stream(cs, seq, "the device", why);
    atomic_store_explicit(&cs->completing, 0, memory_order_release);
}

/* Removes one entry of s from the active list and drops its reference. */
static void deactivate(cuda_device *d, rill__stream *s) {
    rill__mutex_lock(&d->lock);
    for (size_t i = 0; i < d->num_active; i++) {
        if (d->active[i] == s) {
            d->active[i] = d->active[--d->num_active];
            break;
        }
    }
    rill__mutex_unlock(&d->lock);
    rill__stream_unref(s);
}

#define POLL_SPINS   64
#define POLL_WAIT_NS 20000u   /* the longest nap while work is on the GPU */
#define CHECK_NS     1000000u /* how often a stream with no progress is queried */

void rill__cuda_pump(void *arg) {
    cuda_device *d = arg;
    rill__thread_set_worker(1);
    rill__stream **snap = NULL;
    size_t cap = 0;
    unsigned idle_rounds = 0;
    uint64_t last_move = rill__now_ns();
    for (;;) {
        if (atomic_load(&d->exiting))
            break;
        /* The completions it reports may run code that changes the current
         * context; one look costs a read of the driver's thread state. */
        (void)rill__cuda_enter(d);
        uint32_t bell = atomic_load(&d->bell);
        rill__mutex_lock(&d->lock);
        size_t n = d->num_active;
        if (n > cap) {
            rill__stream **grown = rill__realloc(snap, n * sizeof *grown);
            if (grown != NULL) {
                snap = grown;
                cap = n;
            }
        }
        n = n < cap ? n : cap;
        for (size_t i = 0; i < n; i++) {
            snap[i] = d->active[i];
            rill__stream_ref(snap[i]);
        }
        rill__mutex_unlock(&d->lock);

        bool moved = false, gpu = false;
        for (size_t i = 0; i < n; i++) {
            bool idle = false;
            moved |= service(d, snap[i], &gpu, &idle);
            if (idle) {
                deactivate(d, snap[i]);
                moved = true; /* the list changed: look again before sleeping */
            }
        }
        uint64_t now = rill__now_ns();
        if (moved)
            last_move = now;
        else if (gpu && now - last_move > CHECK_NS) {
            for (size_t i = 0; i < n; i++)
                check_context(d, snap[i]);
            last_move = now;
        }
        for (size_t i = 0; i < n; i++)
            rill__stream_unref(snap[i]);
        if (moved) {
            idle_rounds = 0;
            continue;
        }
        if (atomic_load(&d->stop) && n == 0)
            break;
        if (gpu && ++idle_rounds < POLL_SPINS) {
            rill__cpu_relax();
            continue;
        }
        /* seq_cst: the other half of the Dekker pair in rill__cuda_ring. */
        atomic_store(&d->sleeping, 1);
        if (atomic_load(&d->bell) == bell) {
            if (gpu)
                rill__futex_wait_for(&d->bell, bell, POLL_WAIT_NS);
            else
                rill__futex_wait(&d->bell, bell);
        }
        atomic_store(&d->sleeping, 0);
    }
    rill__free(snap);
}
