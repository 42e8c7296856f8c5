/* SPDX-License-Identifier: MIT */
/* Communicators' operations, from the callers' threads (comm.h): the
 * argument checks every operation passes before anything is issued, and
 * issuing: an operation becomes one WAIT command of its stream, for a
 * number of a proxy stream that the engine completes (engine.h), plus a
 * waiter on the stream's previous command that hands the operation to the
 * engine once the stream reaches it; on a capturing stream, an extern
 * node of the graph instead. Nothing is issued unless every check passed,
 * and a failed issue leaves nothing behind. */
#include "comm/comm.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/op_args.h"
#include "comm/comm_internal.h"
#include "comm/engine.h"
#include "comm/stage.h"
#include "core/calls.h"
#include "core/handle.h"
#include "core/kernel.h"
#include "core/stream.h"
#include "graph/graph.h"
#include "mem/memory.h"
#include "mem/pool.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/status.h"

/* ---------------------------------------------------------------- checks */

/* One buffer an operation reads or writes. */
typedef struct buffer {
    const void *ptr;
    size_t bytes;
    const char *name;  /* the argument: "recv" */
    const char *shape; /* where its size comes from: "count floats" */
} buffer;

/* The buffers of a, with their sizes; RILL_ERROR_INVALID_ARGUMENT when a
 * size does not fit in memory. */
static rill_status buffers_of(const rill__comm_channel *ch, const rill__comm_args *a, buffer *recv,
                              buffer *send) {
    const char *fn = a->fn;
    size_t n = a->count, ranks = (size_t)ch->size;
    *recv = (buffer){a->recv, 0, "recv", NULL};
    *send = (buffer){a->send, 0, "send", NULL};
    switch (a->kind) {
    case RILL__COMM_ALLREDUCE:
        /* n <= max_count: fits */
        recv->bytes = send->bytes = n * rill__comm_dtype_bytes(a->dtype);
        recv->shape = send->shape = a->dtype == RILL__DTYPE_F32 ? "count floats" : "count elements";
        break;
    case RILL__COMM_REDUCE_SCATTER:
        if (n > SIZE_MAX / sizeof(float) / ranks)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: count_per_rank is %zu, and %d ranks times that many floats "
                              "do not fit in memory",
                              fn, n, ch->size);
        recv->bytes = n * sizeof(float);
        send->bytes = n * sizeof(float) * ranks;
        recv->shape = "count_per_rank floats";
        send->shape = "size * count_per_rank floats";
        break;
    case RILL__COMM_ALLGATHER:
        if (n > SIZE_MAX / ranks)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: bytes_per_rank is %zu, and %d ranks times that many bytes do "
                              "not fit in memory",
                              fn, n, ch->size);
        recv->bytes = n * ranks;
        send->bytes = n;
        recv->shape = "size * bytes_per_rank";
        send->shape = "bytes_per_rank";
        break;
    default: /* broadcast, send, recv: one buffer */
        recv->bytes = n;
        recv->name = "buf";
        recv->shape = "bytes";
        send->ptr = NULL;
        break;
    }
    return RILL_OK;
}

static bool overlaps(const buffer *x, const buffer *y) {
    uintptr_t a = (uintptr_t)x->ptr, b = (uintptr_t)y->ptr;
    return x->bytes != 0 && y->bytes != 0 && a < b + y->bytes && b < a + x->bytes;
}

/* A buffer must be device memory of the stream's device, and the access
 * must stay inside its allocation. */
static rill_status check_buffer(const char *fn, const buffer *b, rill__stream *s) {
    if (b->bytes == 0)
        return RILL_OK; /* nothing is read or written: NULL is fine */
    if (b->ptr == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s is NULL; pass device memory of %zu bytes (%s)", fn, b->name,
                          b->bytes, b->shape);
    rill__device *dev;
    rill_status st = rill__mem_check_access(fn, b->name, b->shape, b->ptr, b->bytes, &dev);
    if (st != RILL_OK)
        return st;
    if (dev == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s (%p) is not device memory; pass memory from rill_malloc or "
                          "rill_malloc_async of the stream's device",
                          fn, b->name, b->ptr);
    if (dev != s->q.dev)
        return rill__fail(RILL_ERROR_DEVICE_MISMATCH,
                          "%s: %s (%p) is memory of device '%s', and the stream belongs to "
                          "device '%s'; pass memory of the stream's device",
                          fn, b->name, b->ptr, dev->base.info.name, s->q.dev->base.info.name);
    return RILL_OK;
}

/* Every check of an operation, before anything is issued. */
static rill_status check_args(const rill__comm_channel *ch, rill__stream *s,
                              const rill__comm_args *a, buffer *recv, buffer *send) {
    const char *fn = a->fn;
    const char *count_name = rill__comm_count_name(a->kind);
    if (a->count > ch->t->max_count)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s is %zu, more than %s takes in one call (%zu); split the "
                          "transfer into several calls",
                          fn, count_name, a->count, ch->t->name, ch->t->max_count);
    bool reduces = a->kind == RILL__COMM_ALLREDUCE || a->kind == RILL__COMM_REDUCE_SCATTER;
    if (reduces && (a->reduce < RILL__REDUCE_SUM || a->reduce >= RILL__NUM_REDUCE))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: op %d is not a reduction; pass RILL_REDUCE_SUM, RILL_REDUCE_MAX, "
                          "RILL_REDUCE_MIN, RILL_REDUCE_AVG or RILL_REDUCE_PROD",
                          fn, a->reduce);
    if (a->dtype < RILL__DTYPE_F32 || a->dtype >= RILL__NUM_DTYPE)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: dtype %d is not an element type; pass RILL_DTYPE_F32, "
                          "RILL_DTYPE_F64, RILL_DTYPE_I32 or RILL_DTYPE_I64",
                          fn, a->dtype);
    bool integer = a->dtype == RILL__DTYPE_I32 || a->dtype == RILL__DTYPE_I64;
    if (integer && a->reduce == RILL__REDUCE_AVG)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: RILL_REDUCE_AVG of %s has no exact result; reduce with "
                          "RILL_REDUCE_SUM and divide as the program needs",
                          fn, rill__comm_dtype_name(a->dtype));
    bool ranked =
        a->kind == RILL__COMM_BROADCAST || a->kind == RILL__COMM_SEND || a->kind == RILL__COMM_RECV;
    if (ranked && (a->peer < 0 || a->peer >= ch->size))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %s %d is not a rank of the communicator, whose ranks are 0 to %d",
                          fn, a->kind == RILL__COMM_BROADCAST ? "root" : "peer", a->peer,
                          ch->size - 1);
    rill_status st = buffers_of(ch, a, recv, send);
    if (st != RILL_OK)
        return st;
    if ((st = check_buffer(fn, recv, s)) != RILL_OK || (st = check_buffer(fn, send, s)) != RILL_OK)
        return st;
    bool in_place = a->kind == RILL__COMM_ALLREDUCE && recv->ptr == send->ptr;
    if (!in_place && overlaps(recv, send))
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: recv and send overlap%s; pass buffers that do not overlap", fn,
                          a->kind == RILL__COMM_ALLREDUCE
                              ? " without being equal (recv == send reduces in place)"
                              : "");
    return RILL_OK;
}

/* --------------------------------------------------------------- issuing */

/* The stream has completed the command before the operation's WAIT: the
 * operation may start (in its communicator's issue order). Runs on the
 * thread that completed it, with no lock held, or on the issuing thread. */
static void stream_reached(rill__waiter *w) {
    rill__comm_task *t = (rill__comm_task *)((char *)w - offsetof(rill__comm_task, waiter));
    char msg[RILL__ERROR_BYTES];
    /* When the work before it failed, the stream skips the WAIT's wait for
     * nothing: the operation is skipped, as the stream's kernels are. */
    if (!t->refused && rill__stream_failed_at(t->stream, w->seq, msg, sizeof msg)) {
        t->skipped = true;
        rill__fit(t->skip_why, sizeof t->skip_why, msg);
    }
    /* release: pairs with the acquire load in the engine's startable. */
    atomic_store_explicit(&t->ready, 1, memory_order_release);
    rill__comm_engine_kick();
}

/* ----------------------------------------------------------------- tasks */

/* The task of operation a (checked, buffers recv and send) for stream s
 * on ch: a proxy of its own, whose number k ends the operation and k + 1
 * frees its buffers (engine.h says where the pool's points for them are:
 * the caller notes them), queued on ch in issue order, not ready.
 * RILL_ERROR_INVALID_ARGUMENT, with no sentence, when ch is closing; other
 * failures with a sentence naming a->fn. Nothing is left behind on
 * failure. */
static rill_status task_new(rill__comm_channel *ch, rill__stream *s, const rill__comm_args *a,
                            const buffer *recv, const buffer *send, rill__comm_task **out) {
    rill__comm_task *t = rill__calloc(1, sizeof *t);
    if (t == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", a->fn);
    rill__stream *p;
    rill_status st = rill__comm_engine_take_proxy(s->q.dev, &p);
    if (st != RILL_OK) {
        rill__free(t);
        return rill__fail_from(st, a->fn);
    }
    t->op.a = *a;
    t->op.check = ch->check && a->kind != RILL__COMM_SEND && a->kind != RILL__COMM_RECV;
    t->ch = ch;
    t->stream = s;
    t->proxy = p;
    t->buf[0] = recv->ptr;
    t->bytes[0] = recv->bytes;
    if (send->ptr != recv->ptr) {
        t->buf[1] = send->ptr;
        t->bytes[1] = send->bytes;
    }
    /* The proxy is this task's alone. release: pairs with acquire loads
     * of sub_seq. */
    t->number = atomic_load_explicit(&p->q.sub_seq, memory_order_relaxed) + 1;
    atomic_store_explicit(&p->q.sub_seq, t->number + 1, memory_order_release);
    rill__stream_ref(s);
    if (!rill__comm_engine_queue(ch, t)) {
        rill__stream_unref(s);
        rill__stream_complete(p, t->number + 1);
        rill__comm_engine_give_proxy(p);
        rill__free(t);
        return RILL_ERROR_INVALID_ARGUMENT;
    }
    *out = t;
    return RILL_OK;
}

/* Takes back a task that task_new queued and nothing made ready. */
static void task_undo(rill__comm_task *t) {
    rill__comm_engine_unqueue(t->ch, t);
    rill__stream_unref(t->stream);
    rill__stream_complete(t->proxy, t->number + 1);
    rill__comm_engine_give_proxy(t->proxy);
    rill__free(t);
}

/* ------------------------------------------------------------ in graphs
 *
 * A collective issued on a capturing stream becomes an extern node of the
 * graph (backend.h) that names the communicator by its handle, so that a
 * graph outliving its communicator fails at launch instead of reaching a
 * freed channel. Each launch issues the node's operation as rill__comm_issue
 * would (a proxy number and the channel's queue, in the order of the
 * launching calls, graph node order within a launch), and the backend
 * starts it when the run reaches the node: the operation becomes ready and
 * a waiter on its proxy number completes the node. */

/* The accesses of a's buffers (checked), into acc; returns how many. The
 * one buffer of send is read; broadcast's is read on the root and written
 * on the others; an allreduce in place reads what it writes. */
static size_t accesses_of(const rill__comm_args *a, const buffer *recv, const buffer *send,
                          rill_access acc[2]) {
    rill_access_mode mode = RILL_WRITE;
    if (a->kind == RILL__COMM_SEND)
        mode = RILL_READ;
    else if (a->kind == RILL__COMM_BROADCAST || recv->ptr == send->ptr)
        mode = RILL_READ_WRITE;
    size_t k = 0;
    if (recv->bytes != 0)
        acc[k++] = (rill_access){recv->ptr, recv->bytes, mode};
    if (send->bytes != 0 && send->ptr != recv->ptr)
        acc[k++] = (rill_access){send->ptr, send->bytes, RILL_READ};
    return k;
}

typedef struct comm_node {
    _Atomic int refs;
    rill_comm *comm; /* the handle: resolved at each launch */
    rill__comm_args a;
    bool device_memory; /* rill__comm_op.device_memory */
    buffer recv, send;
    rill_access acc[2];
    size_t num_acc;
} comm_node;

static void node_ref(void *obj) {
    comm_node *n = obj;
    atomic_fetch_add_explicit(&n->refs, 1, memory_order_relaxed);
}

static void node_unref(void *obj) {
    comm_node *n = obj;
    if (atomic_fetch_sub_explicit(&n->refs, 1, memory_order_acq_rel) == 1)
        rill__free(n);
}

static void node_describe(void *obj, char *buf, size_t size) {
    rill__comm_describe(&((comm_node *)obj)->a, buf, size);
}

/* The proxy number k of t was reached: the operation completed, failed or
 * was skipped. Runs on the communication thread, with no lock held. */
static void node_reached(rill__waiter *w) {
    rill__comm_task *t = (rill__comm_task *)((char *)w - offsetof(rill__comm_task, waiter));
    char msg[RILL__ERROR_BYTES];
    bool failed = rill__stream_failed_at(t->proxy, t->number, msg, sizeof msg);
    t->node_done(t->node_arg, failed ? msg : NULL);
}

static rill_status node_issue(void *obj, rill__stream *s, void **token) {
    comm_node *n = obj;
    const char *fn = n->a.fn;
    rill__comm_channel *ch = NULL;
    rill_status st = rill__comm_resolve(n->comm, fn, &ch);
    if (st != RILL_OK)
        return rill__fail(st,
                          "%s, captured in the graph, names a communicator that was destroyed; "
                          "capture the graph again with a live communicator",
                          fn);
    /* k completes the node, k + 1 frees the buffers. */
    rill__comm_task *t;
    st = task_new(ch, s, &n->a, &n->recv, &n->send, &t);
    rill__comm_engine_leave(ch); /* t is queued: the channel outlives it */
    if (st == RILL_ERROR_INVALID_ARGUMENT)
        return rill__fail(st,
                          "%s, captured in the graph, names a communicator that is being "
                          "destroyed; launch the graph before rill_comm_destroy",
                          fn);
    if (st == RILL_OK) {
        t->op.device_memory = n->device_memory;
        /* No WAIT holds the buffers: the proxy's k + 1 does. */
        rill__comm_task_hold_buffers(t);
        *token = t;
    }
    return st;
}

/* Makes t ready, skipped with why when why is not NULL. */
static void node_ready(rill__comm_task *t, const char *why) {
    if (why != NULL) {
        t->skipped = true;
        rill__fit(t->skip_why, sizeof t->skip_why, why);
    }
    /* release: pairs with the acquire load in the engine's startable. */
    atomic_store_explicit(&t->ready, 1, memory_order_release);
    rill__comm_engine_kick();
}

static void node_start(void *token, bool skip, rill__extern_done done, void *arg) {
    rill__comm_task *t = token;
    t->node_done = done;
    t->node_arg = arg;
    t->waiter.seq = t->number;
    t->waiter.fn = node_reached;
    /* Not ready yet: the proxy cannot have reached k. */
    bool added = rill__stream_add_waiter(t->proxy, &t->waiter);
    RILL_ASSERT(added);
    node_ready(t, skip ? "an earlier node of its graph launch failed" : NULL);
}

static void node_drop(void *token) {
    node_ready(token, "the stream's earlier work failed, and its graph launch was skipped");
}

static size_t node_accesses(void *obj, const rill_access **acc) {
    comm_node *n = obj;
    *acc = n->acc;
    return n->num_acc;
}

static void node_withdraw(void *token) {
    task_undo(token);
}

static const rill__extern_ops node_ops = {
    .ref = node_ref,
    .unref = node_unref,
    .describe = node_describe,
    .issue = node_issue,
    .start = node_start,
    .drop = node_drop,
    .withdraw = node_withdraw,
    .accesses = node_accesses,
};

/* a, checked, on capturing stream s: a node of the capture's graph. */
static rill_status capture(rill_comm *comm, rill__stream *s, const rill__comm_args *a,
                           const buffer *recv, const buffer *send, bool device_memory) {
    comm_node *n = rill__calloc(1, sizeof *n);
    if (n == NULL)
        return rill__fail(RILL_ERROR_OUT_OF_MEMORY, "%s: out of memory", a->fn);
    atomic_init(&n->refs, 1);
    n->comm = comm;
    n->a = *a;
    n->device_memory = device_memory;
    n->recv = *recv;
    n->send = *send;
    n->num_acc = accesses_of(a, recv, send, n->acc);
    rill__extern_call call = {.ops = &node_ops, .obj = n};
    rill_status st = rill__capture_extern(s, &call, n->acc, n->num_acc, a->fn);
    node_unref(n); /* the graph holds its own */
    return st;
}

/* ------------------------------------------------------- issuing, eagerly */

/* How an operation's bytes reach its transport. */
typedef enum route {
    ROUTE_HOST,   /* host memory (RILL__MEMCAP_HOST: the CPU device's) */
    ROUTE_DIRECT, /* CUDA device memory, to a CUDA-aware transport as it is */
    ROUTE_STAGED  /* CUDA device memory, through page-locked host memory */
} route;

/* The route by what the memory of s's device is (its backend's mem_caps),
 * never by its kind: memory that is neither host memory nor CUDA device
 * memory reaches no transport, and is refused. */
static rill_status route_of(const rill__comm_channel *ch, rill__stream *s, const char *fn,
                            route *out) {
    rill__device *dev = s->q.dev;
    unsigned caps = dev->ops->mem_caps;
    if (caps & RILL__MEMCAP_HOST) {
        *out = ROUTE_HOST;
    } else if (caps & RILL__MEMCAP_CUDA) {
        *out = ch->cuda_aware ? ROUTE_DIRECT : ROUTE_STAGED;
    } else {
        char name[64];
        rill__stream_name(s, name, sizeof name);
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: %s is on device %d (%s), whose memory is neither host memory nor "
                          "CUDA device memory, and no transport reaches it; issue the "
                          "collective on a stream of a CPU or CUDA device",
                          fn, name, dev->base.info.ordinal, dev->base.info.name);
    }
    return RILL_OK;
}

/* A copy between device memory and a staging buffer. */
typedef struct copy {
    void *dst;
    const void *src;
    size_t bytes; /* 0: none */
} copy;

/* The staged form of an operation: the operation on page-locked host
 * memory, the copy of its input there before it and of its result back
 * after it. */
typedef struct staging {
    rill__comm_stage *stage;
    rill__comm_args a;
    copy in, out;
} staging;

/* Staging buffers hold the parts of an operation this far apart. */
#define STAGE_ALIGN ((size_t)256)

/* Plans the staging of a (checked, buffers recv and send) on ch: the
 * bytes of page-locked memory it needs (0: the operation moves nothing,
 * and needs none), and, given that memory h, the operation and copies. An
 * allreduce reduces in place in one buffer; reduce-scatter and allgather
 * use one part for what is sent and one for what is received; a broadcast
 * copies in on the root and out elsewhere. */
static size_t plan_staging(const rill__comm_channel *ch, const rill__comm_args *a,
                           const buffer *recv, const buffer *send, unsigned char *h, staging *out) {
    size_t rb = recv->bytes, sb = send->bytes;
    size_t off = (sb + STAGE_ALIGN - 1) / STAGE_ALIGN * STAGE_ALIGN; /* the received part */
    void *buf = a->recv;                                             /* one-buffer kinds */
    out->a = *a;
    out->in = out->out = (copy){NULL, NULL, 0};
    switch (a->kind) {
    case RILL__COMM_ALLREDUCE:
        out->a.recv = h;
        out->a.send = h;
        out->in = (copy){h, a->send, sb};
        out->out = (copy){a->recv, h, rb};
        return rb;
    case RILL__COMM_REDUCE_SCATTER:
    case RILL__COMM_ALLGATHER:
        if (rb == 0 || sb == 0)
            return 0;
        out->a.send = h;
        out->a.recv = h != NULL ? h + off : NULL;
        out->in = (copy){h, a->send, sb};
        out->out = (copy){a->recv, out->a.recv, rb};
        return off + rb;
    case RILL__COMM_BROADCAST:
        out->a.recv = h;
        if (ch->rank == a->peer)
            out->in = (copy){h, buf, rb};
        else
            out->out = (copy){buf, h, rb};
        return rb;
    case RILL__COMM_SEND:
        out->a.recv = h;
        out->in = (copy){h, buf, rb};
        return rb;
    default: /* receive */
        out->a.recv = h;
        out->out = (copy){buf, h, rb};
        return rb;
    }
}

/* Submits c, a copy of staged operation a between device memory of s's
 * device and a staging buffer (in: to the buffer), as a command of s;
 * the pool and the sanitizer see its device side only (the staging buffer
 * is reused by whichever stream next takes it, ordered by its holds, which
 * the sanitizer does not know). */
static rill_status submit_copy(rill__stream *s, const rill__comm_args *a, const copy *c, bool in) {
    rill__cmd cmd = {.kind = RILL__CMD_COPY};
    cmd.u.copy.dst = c->dst;
    cmd.u.copy.src = c->src;
    cmd.u.copy.bytes = c->bytes;
    cmd.u.copy.src_dev = in ? s->q.dev : NULL;
    cmd.u.copy.dst_dev = in ? NULL : s->q.dev;
    uint64_t seq;
    rill_status st = rill__stream_submit_now(s, &cmd, &seq);
    if (st != RILL_OK)
        return st;
    const void *dev_side = in ? c->src : c->dst;
    rill__pool_note_use(s, seq, dev_side, c->bytes);
    if (rill__san_active()) {
        rill_access acc = {dev_side, c->bytes, in ? RILL_READ : RILL_WRITE};
        char what[224], desc[160];
        rill__comm_describe(a, desc, sizeof desc);
        snprintf(what, sizeof what, "%s: the copy %s page-locked host memory", desc,
                 in ? "into" : "back from");
        rill__san()->touches(s, seq, &acc, 1, what);
    }
    return RILL_OK;
}

/* The number of s's last command (a command submitted by another thread
 * meanwhile only makes it later). */
static uint64_t last_seq(rill__stream *s) {
    return atomic_load_explicit(&s->q.sub_seq, memory_order_acquire);
}

/* Queues the task of operation a (checked; recv and send: the device
 * memory the transport works on, none when staged) on ch and its WAIT on
 * s: a stream operation, not ready yet (arm makes it so). On failure
 * nothing is left. */
static rill_status submit_wait(rill__comm_channel *ch, rill__stream *s, const rill__comm_args *a,
                               const buffer *recv, const buffer *send, bool device_memory,
                               rill__comm_task **out) {
    const char *fn = a->fn;
    /* k ends the stream's wait, k + 1 frees the buffers. */
    rill__comm_task *t;
    rill_status st = task_new(ch, s, a, recv, send, &t);
    if (st == RILL_ERROR_INVALID_ARGUMENT)
        return rill__fail(st,
                          "%s: the communicator is being destroyed; issue collectives before "
                          "rill_comm_destroy",
                          fn);
    if (st != RILL_OK)
        return st;
    t->op.device_memory = device_memory;
    /* The stream's command: it waits for k, parked, holding no worker. A
     * collective may wait for anything (other processes): OPAQUE. Queued
     * at once even if a capture began meanwhile (a race of the caller's). */
    rill__cmd cmd = {.kind = RILL__CMD_WAIT, .flags = RILL__CMD_OPAQUE};
    cmd.u.wait.stream = t->proxy;
    cmd.u.wait.seq = t->number;
    rill__stream_ref(t->proxy);
    uint64_t seq;
    st = rill__stream_submit_now(s, &cmd, &seq);
    if (st != RILL_OK) {
        rill__stream_unref(t->proxy);
        task_undo(t);
        return rill__fail_from(st, fn);
    }
    /* Declared accesses: the pool hands the buffers out again only after
     * the WAIT, which ends when the operation does (engine.h). No note in
     * the stream's clock (as rill_stream_wait_* make): the proxy's numbers
     * order nothing the pool tracks, and a note per operation would push
     * out those of real streams. */
    if (recv->bytes != 0)
        rill__pool_note_use(s, seq, recv->ptr, recv->bytes);
    if (send->bytes != 0 && send->ptr != recv->ptr)
        rill__pool_note_use(s, seq, send->ptr, send->bytes);
    rill_access acc[2];
    size_t n = accesses_of(a, recv, send, acc);
    if (n != 0 && rill__san_active()) {
        char what[160];
        rill__comm_describe(a, what, sizeof what);
        rill__san()->touches(s, seq, acc, n, what);
    }
    t->wait_seq = seq;
    *out = t;
    return RILL_OK;
}

/* Makes t ready once its stream has completed the command before its
 * WAIT. Last: once t is chained or its waiter registered, the engine may
 * start, finish and free t at any moment. */
static void arm(rill__comm_channel *ch, rill__stream *s, rill__comm_task *t) {
    t->waiter.seq = t->wait_seq - 1;
    t->waiter.fn = stream_reached;
    if (rill__comm_engine_chain(ch, t))
        return;
    if (t->wait_seq == 1 || !rill__stream_add_waiter(s, &t->waiter))
        stream_reached(&t->waiter);
}

/* s could not take the command of t's operation that follows its WAIT
 * (st; what it is): t fails without starting, its stream with it, and the
 * communicator breaks, since the other ranks start their part. */
static rill_status refuse(rill__comm_channel *ch, rill__stream *s, rill__comm_task *t,
                          rill_status st, const char *what) {
    char why[RILL__COMM_WHY_BYTES];
    const char *fn = t->op.a.fn; /* static storage: t may be freed once armed */
    snprintf(why, sizeof why, "%s could not be queued on its stream (%s)", what, rill_last_error());
    t->refused = true;
    t->skipped = true;
    rill__fit(t->skip_why, sizeof t->skip_why, why);
    arm(ch, s, t);
    return rill__fail(st,
                      "%s: %s; the collective fails on its stream without starting, and the "
                      "communicator can no longer be used",
                      fn, why);
}

/* Divides recv (count floats) by the communicator's size on s, on the
 * device: an average that a CUDA-aware transport left a sum. */
static rill_status divide_on_device(rill__comm_channel *ch, rill__stream *s,
                                    const rill__comm_args *a) {
    size_t n = a->count;
    if (n == 0)
        return RILL_OK;
    rill_kernel *k = atomic_load_explicit(&rill__comm_divide_kernel, memory_order_acquire);
    if (k == NULL) {
        rill_kernel *mine;
        rill_status st = rill__kernel_create_op(RILL__OP_MAP_F32, "map_f32", &mine);
        if (st != RILL_OK)
            return st;
        rill_kernel *expected = NULL;
        /* acq_rel: publishes the kernel's fields with the pointer. */
        if (atomic_compare_exchange_strong_explicit(&rill__comm_divide_kernel, &expected, mine,
                                                    memory_order_acq_rel, memory_order_acquire)) {
            k = mine;
        } else {
            rill_kernel_destroy(mine);
            k = expected;
        }
    }
    rill__op_map_args args = {a->recv, a->recv, (float)ch->size, RILL_MAP_DIV, n};
    rill_access acc = {a->recv, n * sizeof(float), RILL_READ_WRITE};
    /* A grid-stride loop on the GPU: any grid computes every element. */
    size_t blocks = (n + 4095) / 4096;
    rill_launch l = {.grid = {blocks < 4096 ? (uint32_t)blocks : 4096u, 1, 1},
                     .block = {RILL__OP_BLOCK_THREADS, 1, 1},
                     .args = &args,
                     .args_size = sizeof args,
                     .accesses = &acc,
                     .num_accesses = 1};
    return rill_launch_kernel(s->handle, k, &l);
}

/* An operation on a CUDA device's memory, staged: the copies in, the
 * operation on the staging buffer, the copies out, all on s. */
static rill_status issue_staged(rill__comm_channel *ch, rill__stream *s, const rill__comm_args *a,
                                const buffer *recv, const buffer *send) {
    const char *fn = a->fn;
    staging plan;
    size_t bytes = plan_staging(ch, a, recv, send, NULL, &plan);
    static const buffer none = {NULL, 0, "", NULL};
    rill__comm_task *t;
    rill_status st;
    if (bytes == 0) { /* nothing moves: nothing to stage */
        if ((st = submit_wait(ch, s, a, &none, &none, false, &t)) == RILL_OK)
            arm(ch, s, t);
        return st;
    }
    rill__comm_stage *stage;
    if ((st = rill__comm_stage_take(s->q.dev, bytes, &stage)) != RILL_OK) {
        char desc[160];
        rill__comm_describe(a, desc, sizeof desc);
        return rill__fail(st,
                          "%s: no %zu bytes of page-locked host memory to stage %s through (%s); "
                          "free memory, or use a CUDA-aware MPI (see RILL_MPI_CUDA_AWARE)",
                          fn, bytes, desc, rill_last_error());
    }
    plan_staging(ch, a, recv, send, rill__comm_stage_host(stage), &plan);
    if (plan.in.bytes != 0 && (st = submit_copy(s, a, &plan.in, true)) != RILL_OK) {
        rill__comm_stage_release_after(stage, s, 0);
        rill__comm_stage_release(stage);
        return rill__fail(st, "%s: could not queue the copy into page-locked host memory (%s)", fn,
                          rill_last_error());
    }
    if ((st = submit_wait(ch, s, &plan.a, &none, &none, false, &t)) != RILL_OK) {
        /* The copy in, if any, may still write the buffer. */
        rill__comm_stage_release_after(stage, s, last_seq(s));
        rill__comm_stage_release(stage);
        return st;
    }
    t->stage = stage; /* the engine lets go of the transport's hold */
    if (plan.out.bytes != 0 && (st = submit_copy(s, a, &plan.out, false)) != RILL_OK) {
        rill__comm_stage_release_after(stage, s, last_seq(s));
        return refuse(ch, s, t, st, "the copy of its result back to device memory");
    }
    rill__comm_stage_release_after(stage, s, last_seq(s));
    arm(ch, s, t);
    return RILL_OK;
}

/* rill__comm_issue on ch, which the caller holds (rill__comm_resolve). */
static rill_status issue_on(rill__comm_channel *ch, rill_stream *stream, rill_comm *comm,
                            const rill__comm_args *a) {
    const char *fn = a->fn;
    rill__stream *s;
    buffer recv, send;
    rill_status st = rill__stream_resolve(stream, fn, &s);
    if (st == RILL_OK)
        st = check_args(ch, s, a, &recv, &send);
    route r = ROUTE_HOST;
    if (st == RILL_OK)
        st = route_of(ch, s, fn, &r);
    if (st != RILL_OK)
        return st;
    bool divide = r == ROUTE_DIRECT && a->reduce == RILL__REDUCE_AVG &&
                  (a->kind == RILL__COMM_ALLREDUCE || a->kind == RILL__COMM_REDUCE_SCATTER);
    if (divide && a->dtype != RILL__DTYPE_F32)
        return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                          "%s: RILL_REDUCE_AVG of %s on a CUDA device's memory, through a "
                          "CUDA-aware MPI, is not built (the division on the device is of "
                          "float32); reduce with RILL_REDUCE_SUM and divide, or set "
                          "RILL_MPI_CUDA_AWARE=0 before creating the communicator",
                          fn, rill__comm_dtype_name(a->dtype));
    if (rill__stream_capturing(s)) {
        if (r == ROUTE_STAGED)
            return rill__fail(RILL_ERROR_NOT_SUPPORTED,
                              "%s: the stream is capturing a graph, and this communicator "
                              "stages collectives on a CUDA device's memory through page-locked "
                              "host memory, which a graph cannot replay in this version; issue "
                              "the collective outside the capture, or use a CUDA-aware MPI "
                              "(RILL_MPI_CUDA_AWARE=1 when yours is one)",
                              fn);
        st = capture(comm, s, a, &recv, &send, r == ROUTE_DIRECT);
        if (st == RILL_OK && divide)
            st = divide_on_device(ch, s, a); /* a node after the collective's */
        return st;
    }
    if (r == ROUTE_STAGED)
        return issue_staged(ch, s, a, &recv, &send);
    rill__comm_task *t;
    if ((st = submit_wait(ch, s, a, &recv, &send, r == ROUTE_DIRECT, &t)) != RILL_OK)
        return st;
    if (divide && (st = divide_on_device(ch, s, a)) != RILL_OK)
        return refuse(ch, s, t, st, "the division of its average on the device");
    arm(ch, s, t);
    return RILL_OK;
}

rill_status rill__comm_issue(rill_stream *stream, rill_comm *comm, const rill__comm_args *a) {
    RILL_CALL_SCOPE(); /* the public collectives of librill_mpi come here */
    rill__comm_channel *ch = NULL;
    rill_status st = rill__comm_resolve(comm, a->fn, &ch);
    if (st != RILL_OK)
        return st;
    st = issue_on(ch, stream, comm, a);
    rill__comm_engine_leave(ch);
    return st;
}
