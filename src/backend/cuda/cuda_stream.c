/* SPDX-License-Identifier: MIT */
/* Streams of the CUDA backend: submission and issue (see cuda.h). Each
 * stream's commands sit in a list in stream order, from submission to
 * completion; next_issue marks the first one not handed to the driver yet.
 * A launch, copy or memset is one driver call and nothing more: the done
 * word is written only where the host needs to know how far the GPU got
 * (flush), and a wait for another stream of the device uses that stream's
 * own event. Commands come from a free list of the stream's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cuda/cuda.h"
#include "backend/cuda/cuda_graph.h"
#include "util/alloc.h"
#include "util/status.h"

/* ---------------------------------------------------------------- issue */

CUresult rill__cuda_launch(cuda_device *d, CUstream stream, const rill__kernel_call *k,
                           char **why) {
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

/* The driver sets device memory only (not host memory, page-locked or
 * not): the rest is set on the host, in stream order. */
bool rill__cuda_gpu_settable(cuda_device *d, const void *p) {
    return rill__cuda_memory_type(d, p) == CU_MEMORYTYPE_DEVICE;
}

CUresult rill__cuda_set(cuda_device *d, CUstream stream, const rill__set_call *c) {
    return d->drv->cuMemsetD8Async((CUdeviceptr)(uintptr_t)c->dst, (unsigned char)c->value,
                                   c->bytes, stream);
}

/* Without the write, nothing would report the work on the GPU: it
 * completes on the host, in order, as if the GPU had reported it (what
 * failed is what the stream reports next). */
static void settle_unwritten(cuda_stream *cs, uint64_t upto, CUresult r) {
    /* Only issued commands are on the GPU (next_issue may not have moved
     * past those issued in the current batch yet). */
    for (cuda_cmd *n = cs->head; n != NULL && n->seq <= upto; n = n->next)
        if (n->state == CUDA_ON_GPU) {
            n->state = CUDA_MET;
            if (n->error == CUDA_SUCCESS && n->seq == upto)
                n->error = r;
        }
}

void rill__cuda_flush_locked(cuda_device *d, cuda_stream *cs) {
    if (cs->gpu_seq <= cs->written)
        return;
    uint64_t upto = atomic_load_explicit(&cs->issued_seq, memory_order_relaxed);
    /* The default write comes after a memory barrier: what the work before
     * it wrote is visible to the host once the word is. */
    CUresult r =
        d->drv->cuStreamWriteValue64(cs->cu, cs->done_dev, upto, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r != CUDA_SUCCESS)
        settle_unwritten(cs, upto, r);
    cs->written = upto;
    cs->unwritten = 0;
    atomic_store_explicit(&cs->want_flush, 0, memory_order_relaxed);
}

/* n is on the GPU: the done word reports it with the next write. */
static void on_gpu(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    n->state = CUDA_ON_GPU;
    cs->gpu_seq = n->seq;
    if (++cs->unwritten >= CUDA_FLUSH_EVERY) {
        atomic_store_explicit(&cs->issued_seq, n->seq, memory_order_release);
        rill__cuda_flush_locked(d, cs);
    }
}

/* A WAIT of cs for ts's seq, where ts is a stream of the same device
 * whose work up to seq is issued: the GPU waits for ts's mark, recorded
 * again only when its latest record comes before seq. A record covers
 * only work issued to the GPU, which waits for nothing the host holds
 * back, so it closes no cycle. False when the GPU cannot take the wait
 * (the host waits instead). */
static bool wait_on_gpu(cuda_device *d, cuda_stream *cs, cuda_stream *ts, uint64_t seq) {
    const rill__cuda_driver *drv = d->drv;
    bool ok = true;
    /* Lock order: cs->lock, then ts->mark_lock (a leaf). */
    rill__mutex_lock(&ts->mark_lock);
    if (ts->mark_seq < seq) {
        /* acquire: the issue of the commands counted is before the record. */
        uint64_t at = atomic_load_explicit(&ts->issued_seq, memory_order_acquire);
        ok = drv->cuEventRecord(ts->mark, ts->cu) == CUDA_SUCCESS;
        if (ok)
            ts->mark_seq = at;
    }
    ok = ok && drv->cuStreamWaitEvent(cs->cu, ts->mark, 0) == CUDA_SUCCESS;
    rill__mutex_unlock(&ts->mark_lock);
    return ok;
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

/* A RECORD: the event's CUevent where it has one (rill_event_native), at
 * this point; then, unless the command is only for that, the GPU's time
 * of the point, for timing events (rill__cuda_stamp), and a write of the
 * done word, so that the host stamps the event (and tells other
 * processes) as soon as the point is reached. Without a timing event, the
 * pump's time when it sees the point. */
static void record(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    if (n->c.u.record.native != NULL) {
        n->error = d->drv->cuEventRecord(n->c.u.record.native, cs->cu);
        if (n->error != CUDA_SUCCESS) {
            n->state = CUDA_MET; /* fails the stream when it completes */
            return;
        }
    }
    if (n->c.flags & RILL__CMD_NATIVE_ONLY) {
        on_gpu(d, cs, n);
        return;
    }
    n->ev = rill__cuda_timing_event(d);
    if (n->ev != NULL && d->drv->cuEventRecord(n->ev, cs->cu) != CUDA_SUCCESS) {
        rill__cuda_timing_event_put(d, n->ev);
        n->ev = NULL;
    }
    on_gpu(d, cs, n);
    atomic_store_explicit(&cs->issued_seq, n->seq, memory_order_release);
    rill__cuda_flush_locked(d, cs);
}

/* Hands n to the GPU, or settles it on the host; false when n holds the
 * work after it back (cs->lock held). */
static bool issue_one(cuda_device *d, cuda_stream *cs, cuda_cmd *n) {
    if (n->state == CUDA_RUNNING)
        return false; /* a runner has it, and lets the work after it through */
    switch (n->c.kind) {
    case RILL__CMD_KERNEL:
    case RILL__CMD_COPY:
    case RILL__CMD_SET:
        if (cs->skipping) {
            n->state = CUDA_MET;
            return true;
        }
        if (n->on_host)
            return false; /* a runner sets or copies it once it is first */
        rill__cuda_trace_begin(d, cs, n);
        if (n->c.kind == RILL__CMD_COPY && n->staged != CUDA_STAGED_NONE) {
            if (!rill__cuda_stage_issue_locked(d, cs, n)) {
                rill__cuda_trace_end(d, cs, n, false);
                n->on_host = true;
                return false;
            }
        } else {
            n->error = n->c.kind == RILL__CMD_KERNEL
                           ? rill__cuda_launch(d, cs->cu, &n->c.u.kernel, &n->why)
                       : n->c.kind == RILL__CMD_COPY ? rill__cuda_copy(d, cs->cu, &n->c.u.copy)
                                                     : rill__cuda_set(d, cs->cu, &n->c.u.set);
        }
        /* The driver sets device memory only, and says so at the call: a
         * memset of other memory is done on the host, in stream order. */
        if (n->c.kind == RILL__CMD_SET && n->error == CUDA_ERROR_INVALID_VALUE &&
            !rill__cuda_gpu_settable(d, n->c.u.set.dst)) {
            rill__cuda_trace_end(d, cs, n, false);
            n->error = CUDA_SUCCESS;
            n->on_host = true;
            return false; /* a runner sets it once it is first */
        }
        rill__cuda_trace_end(d, cs, n, n->error == CUDA_SUCCESS);
        if (n->error != CUDA_SUCCESS)
            n->state = CUDA_MET;
        else
            on_gpu(d, cs, n);
        return true;
    case RILL__CMD_CLEAR:
        cs->skipping = 0;
        cs->clear_seq = n->seq;
        n->state = CUDA_MET;
        return true;
    case RILL__CMD_RECORD:
        record(d, cs, n);
        return true;
    case RILL__CMD_WAIT: {
        rill__stream *t = n->c.u.wait.stream;
        uint64_t seq = n->c.u.wait.seq;
        if (!n->waiting && rill__queue_of(t)->dev == rill__queue_of(cs->self)->dev &&
            atomic_load_explicit(&cuda_stream_of(t)->issued_seq, memory_order_acquire) >= seq &&
            wait_on_gpu(d, cs, cuda_stream_of(t), seq)) {
            carry(cs, n);
            n->gpu_wait = true;
            on_gpu(d, cs, n);
            return true;
        }
        if (!rill__cuda_wait_for(n, t, seq)) {
            /* The awaited stream reports its completions when it writes
             * its done word: a stream of this device is asked to. */
            if (rill__queue_of(t)->dev == rill__queue_of(cs->self)->dev) {
                atomic_store_explicit(&cuda_stream_of(t)->want_flush, 1, memory_order_relaxed);
                rill__cuda_ring(d);
            }
            return false;
        }
        carry(cs, n);
        n->state = CUDA_MET;
        return true;
    }
    case RILL__CMD_GRAPH: {
        /* One CUDA graph: issued as a kernel is, once the exec's previous
         * launch has ended; a launch with host nodes is a runner's. */
        const rill__graph_launch *l = n->c.u.graph.launch;
        rill__stream *after = n->c.u.graph.after_stream;
        if (!rill__cuda_graph_direct(l))
            return false;
        if (after != NULL && !rill__cuda_wait_for(n, after, n->c.u.graph.after_seq)) {
            /* A stream of this device is asked to report it. */
            if (rill__queue_of(after)->dev == rill__queue_of(cs->self)->dev) {
                atomic_store_explicit(&cuda_stream_of(after)->want_flush, 1, memory_order_relaxed);
                rill__cuda_ring(d);
            }
            return false;
        }
        if (cs->skipping) {
            n->state = CUDA_MET;
            return true;
        }
        rill__cuda_trace_begin(d, cs, n);
        n->error = rill__cuda_graph_issue(d, cs->cu, l, &n->graph_run);
        rill__cuda_trace_end(d, cs, n, n->error == CUDA_SUCCESS);
        if (n->error != CUDA_SUCCESS) {
            n->state = CUDA_MET;
            return true;
        }
        on_gpu(d, cs, n);
        if (n->graph_run != NULL) {
            /* Timing record nodes: reported at once, as a RECORD is. */
            atomic_store_explicit(&cs->issued_seq, n->seq, memory_order_release);
            rill__cuda_flush_locked(d, cs);
        }
        return true;
    }
    case RILL__CMD_HOST:
        return false; /* a runner runs it once it is first (service) */
    }
    return false;
}

void rill__cuda_issue_ready(cuda_device *d, cuda_stream *cs, bool flush) {
    cuda_cmd *n = cs->next_issue;
    uint64_t issued = atomic_load_explicit(&cs->issued_seq, memory_order_relaxed);
    while (n != NULL && issue_one(d, cs, n)) {
        atomic_store_explicit(&cs->issued_seq, n->seq, memory_order_release);
        n = n->next;
    }
    cs->next_issue = n;
    if (atomic_load_explicit(&cs->issued_seq, memory_order_relaxed) != issued)
        cs->issued_ns = rill__now_ns();
    /* Work held back behind work on the GPU waits for the GPU to report. */
    if (flush || n != NULL)
        rill__cuda_flush_locked(d, cs);
}

/* ----------------------------------------------------------- commands */

/* A command with room for args bytes of arguments, from cs's free list
 * when they fit (cs->lock held); NULL when out of memory. */
static cuda_cmd *cmd_new_locked(cuda_stream *cs, size_t args) {
    cuda_cmd *n;
    bool pooled = args <= RILL__QUEUE_INLINE_BYTES;
    if (pooled && cs->free_cmds != NULL) {
        n = cs->free_cmds;
        cs->free_cmds = n->next;
        cs->num_free--;
    } else {
        n = rill__malloc(sizeof *n + (pooled ? RILL__QUEUE_INLINE_BYTES : args));
        if (n == NULL)
            return NULL;
    }
    memset(n, 0, sizeof *n);
    n->pooled = pooled;
    return n;
}

void rill__cuda_cmd_free(cuda_stream *cs, cuda_cmd *n) {
    if (n->pooled) {
        rill__mutex_lock(&cs->lock);
        if (cs->num_free < CUDA_FREE_CMDS) {
            n->next = cs->free_cmds;
            cs->free_cmds = n;
            cs->num_free++;
            n = NULL;
        }
        rill__mutex_unlock(&cs->lock);
    }
    rill__free(n);
}

void rill__cuda_cmds_fini(cuda_stream *cs) {
    while (cs->free_cmds != NULL) {
        cuda_cmd *n = cs->free_cmds;
        cs->free_cmds = n->next;
        rill__free(n);
    }
    cs->num_free = 0;
}

/* ------------------------------------------------------------- submit */

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

/* A kernel launch past what the GPU launches: RILL_ERROR_INVALID_ARGUMENT
 * with a sentence, before anything is queued (the driver would refuse it
 * at issue and fail the stream). */
static rill_status check_bounds(cuda_device *d, const rill__kernel_call *k) {
    const cuda_loaded *l = k->loaded;
    const char *name = rill__kernel_image_of(k->kernel)->name;
    if (l == NULL || l->fn == NULL)
        return RILL_OK; /* a library runs it, with its own grid */
    uint64_t threads = (uint64_t)k->block.x * k->block.y * k->block.z;
    if (k->block.x == 0 || k->block.y == 0 || k->block.z == 0 || k->block.x > d->max_block[0] ||
        k->block.y > d->max_block[1] || k->block.z > d->max_block[2] ||
        threads > d->max_block_threads)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "kernel '%s' launched with blocks of (%u, %u, %u) threads; the GPU takes "
                          "at most %u threads per block, at most (%u, %u, %u) in each dimension",
                          name, k->block.x, k->block.y, k->block.z, d->max_block_threads,
                          d->max_block[0], d->max_block[1], d->max_block[2]);
    if (k->grid.x > d->max_grid[0] || k->grid.y > d->max_grid[1] || k->grid.z > d->max_grid[2])
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "kernel '%s' launched with a grid of (%u, %u, %u) blocks; the GPU takes "
                          "at most (%u, %u, %u): put the large extent in x",
                          name, k->grid.x, k->grid.y, k->grid.z, d->max_grid[0], d->max_grid[1],
                          d->max_grid[2]);
    if (k->args_size > CUDA_MAX_PARAM_BYTES)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "kernel '%s' launched with %zu bytes of arguments; a CUDA kernel takes "
                          "at most %u: pass a pointer to the rest in device memory",
                          name, k->args_size, (unsigned)CUDA_MAX_PARAM_BYTES);
    return RILL_OK;
}

rill_status rill__cuda_submit(rill__stream *s, const rill__cmd *cmd, uint64_t *seq) {
    rill__queue *q = rill__queue_of(s);
    cuda_device *d = cuda_device_of(q->dev);
    cuda_stream *cs = cuda_stream_of(s);
    size_t args = cmd->kind == RILL__CMD_KERNEL ? cmd->u.kernel.args_size : 0;
    if (cmd->kind == RILL__CMD_KERNEL) {
        rill_status st = check_bounds(d, &cmd->u.kernel);
        if (st != RILL_OK)
            return st;
    }
    CUcontext prev = rill__cuda_enter(d);
    enum cuda_staged staged =
        cmd->kind == RILL__CMD_COPY ? rill__cuda_stage_kind(d, &cmd->u.copy) : CUDA_STAGED_NONE;
    rill__mutex_lock(&cs->lock);
    cuda_cmd *n = cmd_new_locked(cs, args);
    if (n != NULL) {
        n->c = *cmd;
        n->staged = (unsigned char)staged;
    }
    /* A small copy from pageable memory reads it now: the caller may
     * reuse it on return. */
    if (n == NULL ||
        (staged == CUDA_STAGED_H2D && cmd->u.copy.bytes <= CUDA_STAGE_EAGER_BYTES &&
         !rill__cuda_stage_submit_locked(d, cs, n)) ||
        (!cs->active && activate(d, s) != RILL_OK)) {
        rill__mutex_unlock(&cs->lock);
        rill__cuda_leave(d, prev);
        if (n != NULL) {
            rill__cuda_stage_release(d, n);
            rill__cuda_cmd_free(cs, n);
        }
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "out of host memory queuing a command");
    }
    cs->active = true;
    n->d = d;
    n->cs = cs;
    if (cmd->kind == RILL__CMD_KERNEL) {
        if (args > 0)
            memcpy(n->args, cmd->u.kernel.args, args);
        n->c.u.kernel.args = n->args;
        n->c.u.kernel.accesses = NULL; /* borrowed; the GPU needs none */
        n->c.u.kernel.num_accesses = 0;
    }
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
    rill__cuda_issue_ready(d, cs, false);
    /* A host function first in an idle stream goes to a runner from here:
     * one hand-off, as the driver's own host functions take. */
    cuda_cmd *job = rill__cuda_take_job_locked(cs);
    /* release: whoever reads the number sees the command and opaque_seq. */
    atomic_store_explicit(&q->sub_seq, n->seq, memory_order_release);
    *seq = n->seq;
    /* The pump watches a stream with something to report or run. */
    bool ring = cs->next_issue != NULL || cs->head == n;
    rill__mutex_unlock(&cs->lock);
    rill__cuda_leave(d, prev);
    if (job != NULL)
        rill__cuda_hand_over(d, job);
    else if (ring)
        rill__cuda_ring(d);
    return RILL_OK;
}
