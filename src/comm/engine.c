/* SPDX-License-Identifier: MIT */
/* The communication engine (see engine.h): one thread per process makes
 * every call into the transport, starts each channel's tasks in issue order
 * once their streams reach them, tests started ones until they complete or
 * miss their deadline, and completes their proxies' numbers; it never
 * blocks in the transport. This file holds the engine's state, the proxy
 * streams and the thread's work; what other threads call is in
 * engine_calls.c. How it polls: docs/mpi.md, "The communication thread".
 * Invariants: a channel's queue holds its issued, unstarted tasks in issue
 * order; ch->active counts its started, unfinished, unabandoned tasks;
 * rill__comm_engine.live = the sum of ch->active; ch->gate, when set, is an
 * active task of ch with op.starting set, and nothing of ch starts while it
 * is; a proxy in the free list has done_seq == sub_seq; ch->last, when set,
 * is the unfinished task whose WAIT is (last_stream_id, last_wait_seq), and
 * a task's chained successor is queued behind it, not ready. */
#include "comm/engine.h"

#include <stdio.h>
#include <string.h>

#include "comm/comm_internal.h"
#include "comm/stage.h"
#include "core/handle.h"
#include "mem/pool.h"
#include "trace/trace.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/status.h"

#define SPIN_NS  5000000u
#define SLEEP_NS 200000u
/* How long the thread stays awake, yielding, with nothing under way. */
#define IDLE_YIELD_NS 30000u
/* How often operations that timed out are tested, while nothing else is
 * under way. */
#define ABANDONED_NS 1000000u

rill__comm_engine_state rill__comm_engine;

/* ----------------------------------------------------------------- proxies */

void rill__comm_task_hold_buffers(rill__comm_task *t) {
    if (t->stage != NULL)
        return; /* the transport holds the staging buffer alone (stage.h) */
    for (int i = 0; i < 2; i++)
        if (t->bytes[i] != 0)
            rill__pool_note_use(t->proxy, t->number + 1, t->buf[i], t->bytes[i]);
}

void rill__comm_engine_release_proxy(rill__stream *p) {
    atomic_store(&p->owner_released, 1);
    rill__stream_unref(p);
}

rill_status rill__comm_engine_take_proxy(rill__device *dev, rill__stream **out) {
    if (dev->base.info.kind != RILL_DEVICE_CPU) {
        dev = rill__device_of_kind(RILL_DEVICE_CPU);
        if (dev == NULL)
            return rill__fail(RILL_ERROR_NO_DEVICE,
                              "the CPU device, whose streams number the collectives, is not "
                              "available");
    }
    rill__spinlock_lock(&rill__comm_engine.lock);
    for (size_t i = 0; i < rill__comm_engine.num_proxies; i++) {
        if (rill__comm_engine.proxies[i]->q.dev == dev) {
            *out = rill__comm_engine.proxies[i];
            rill__comm_engine.proxies[i] =
                rill__comm_engine.proxies[--rill__comm_engine.num_proxies];
            rill__spinlock_unlock(&rill__comm_engine.lock);
            return RILL_OK;
        }
    }
    rill__spinlock_unlock(&rill__comm_engine.lock);
    rill__stream *p;
    rill_status st = rill__stream_new(dev, 0, RILL__STREAM_PROXY, &p);
    if (st != RILL_OK)
        return st;
    /* Its numbers complete when other processes take part: work behind
     * them may wait for anything (see rill__stream_opaque_pending), so the
     * memory pool never makes a stream wait for them. Not yet visible: no
     * lock needed. */
    atomic_store(&p->q.opaque_seq, UINT64_MAX);
    snprintf(p->name, sizeof p->name, "rill:communication");
    *out = p;
    return RILL_OK;
}

void rill__comm_engine_give_proxy(rill__stream *p) {
    RILL_ASSERT(atomic_load(&p->q.done_seq) == atomic_load(&p->q.sub_seq));
    rill__spinlock_lock(&rill__comm_engine.lock);
    if (rill__comm_engine.num_proxies == rill__comm_engine.cap_proxies) {
        size_t cap = rill__comm_engine.cap_proxies != 0 ? 2 * rill__comm_engine.cap_proxies : 8;
        rill__stream **grown = rill__realloc(rill__comm_engine.proxies, cap * sizeof *grown);
        if (grown == NULL) {
            rill__spinlock_unlock(&rill__comm_engine.lock);
            rill__comm_engine_release_proxy(p); /* out of memory: the next operation makes one */
            return;
        }
        rill__comm_engine.proxies = grown;
        rill__comm_engine.cap_proxies = cap;
    }
    rill__comm_engine.proxies[rill__comm_engine.num_proxies++] = p;
    rill__spinlock_unlock(&rill__comm_engine.lock);
}

/* ------------------------------------------------------------ sentences */

void rill__comm_describe(const rill__comm_args *a, char *buf, size_t size) {
    char what[96];
    switch (a->kind) {
    case RILL__COMM_ALLREDUCE:
        if (a->dtype == RILL__DTYPE_F32)
            snprintf(what, sizeof what, "%s of %zu floats", rill__comm_reduce_name(a->reduce),
                     a->count);
        else
            snprintf(what, sizeof what, "%s of %zu %s", rill__comm_reduce_name(a->reduce), a->count,
                     rill__comm_dtype_name(a->dtype));
        break;
    case RILL__COMM_REDUCE_SCATTER:
        snprintf(what, sizeof what, "%s, %zu floats per rank", rill__comm_reduce_name(a->reduce),
                 a->count);
        break;
    case RILL__COMM_BROADCAST:
        snprintf(what, sizeof what, "%zu bytes from rank %d", a->count, a->peer);
        break;
    case RILL__COMM_ALLGATHER:
        snprintf(what, sizeof what, "%zu bytes per rank", a->count);
        break;
    case RILL__COMM_SEND:
        snprintf(what, sizeof what, "%zu bytes to rank %d", a->count, a->peer);
        break;
    case RILL__COMM_RECV:
        snprintf(what, sizeof what, "%zu bytes from rank %d", a->count, a->peer);
        break;
    default:
        what[0] = '\0';
        break;
    }
    snprintf(buf, size, "%s (%s)", a->fn, what);
}

/* "rill_allreduce_f32 (sum of 1000 floats) on rank 1 of 4" */
static void describe(const rill__comm_channel *ch, const rill__comm_args *a, char *buf,
                     size_t size) {
    char what[160];
    rill__comm_describe(a, what, sizeof what);
    snprintf(buf, size, "%s on rank %d of %d", what, ch->rank, ch->size);
}

/* Breaks ch: operations after a failure would not match the other ranks'
 * (one rank skipped or lost an operation), so none is started again. */
static void break_channel(rill__comm_channel *ch, const char *why) {
    if (ch->broken)
        return;
    ch->broken = true;
    rill__fit(ch->broken_why, sizeof ch->broken_why, why);
}

/* ------------------------------------------------------------- finishing */

static void finish_control(rill__comm_task *t, rill_status status, const char *message) {
    t->status = status;
    rill__fit(t->message, sizeof t->message, message);
    /* release: pairs with the acquire load in rill__comm_engine_wait, which
     * may free t at once: t is not touched after this store. */
    atomic_store_explicit(&t->done, 1, memory_order_release);
    atomic_fetch_add(&rill__comm_engine.finished, 1);
    rill__futex_wake(&rill__comm_engine.finished, INT32_MAX);
}

enum outcome { OUT_OK, OUT_FAILED };

/* t finished, failed or was abandoned: the task chained behind it may
 * start, skipped when t failed or was skipped (its stream fails at t's
 * WAIT, as rill__stream_failed_at would tell that task's waiter). */
static void unchain(rill__comm_task *t, const char *cause) {
    rill__comm_channel *ch = t->ch;
    rill__spinlock_lock(&rill__comm_engine.lock);
    if (ch->last == t) {
        ch->last = NULL;
        ch->last_ok = !t->skipped && cause == NULL;
    }
    rill__comm_task *n = t->chained;
    t->chained = NULL;
    rill__spinlock_unlock(&rill__comm_engine.lock);
    if (n == NULL)
        return;
    const char *why = t->skipped ? t->skip_why : cause;
    if (why != NULL) {
        n->skipped = true;
        rill__fit(n->skip_why, sizeof n->skip_why, why);
    }
    /* release: pairs with the acquire load in startable. */
    atomic_store_explicit(&n->ready, 1, memory_order_release);
}

/* Ends a stream operation whose memory the transport no longer holds:
 * its proxy reaches k + 1 (failing k first when it failed), which resumes
 * the stream, and goes back to the free list. */
/* A slice for t on its proxy's track ("rill:communication"), from its
 * start to now, as number k: the stream's WAIT for k draws its arrow from
 * it. Nothing unless a trace recorded its start. */
static void trace_task(rill__comm_task *t) {
    if (t->trace_t0 == 0 || !rill__tracing())
        return;
    static const char *const kinds[] = {
        [RILL__COMM_ALLREDUCE] = "allreduce", [RILL__COMM_BROADCAST] = "broadcast",
        [RILL__COMM_ALLGATHER] = "allgather", [RILL__COMM_REDUCE_SCATTER] = "reduce-scatter",
        [RILL__COMM_SEND] = "send",           [RILL__COMM_RECV] = "receive"};
    rill__stream *p = t->proxy;
    rill__stream_trace_track(p);
    rill__trace_rec r;
    memset(&r, 0, sizeof r);
    r.type = RILL__TRACE_STREAM_SLICE;
    r.what = RILL__TRACE_COLLECTIVE;
    r.device = (int8_t)p->q.dev->base.info.ordinal;
    r.unit = -1;
    r.stream = p->q.id;
    r.seq = t->number;
    r.bytes = t->bytes[0] + t->bytes[1];
    char name[RILL__TRACE_NAME_BYTES];
    rill__comm_kind kind = t->op.a.kind;
    bool reduces = kind == RILL__COMM_ALLREDUCE || kind == RILL__COMM_REDUCE_SCATTER;
    snprintf(name, sizeof name, "%s%s%s", kinds[kind], reduces ? " " : "",
             reduces ? rill__comm_reduce_name(t->op.a.reduce) : "");
    rill__trace_set_name(&r, name);
    r.t0 = t->trace_t0;
    r.t1 = rill__trace_now();
    rill__trace_emit(&r);
}

/* The second half of finish_stream, for an operation that completed and
 * was unchained: completing the proxy resumes the stream (a wake-up,
 * which test_active defers until the next operations have started). */
static void release_stream(rill__comm_task *t) {
    rill__stream *p = t->proxy;
    if (t->stage != NULL)
        rill__comm_stage_release(t->stage);
    rill__stream_complete(p, t->number + 1);
    rill__comm_engine_give_proxy(p);
    rill__stream_unref(t->stream);
    rill__free(t);
}

static void finish_stream(rill__comm_task *t, enum outcome outcome, const char *cause) {
    rill__stream *p = t->proxy;
    trace_task(t);
    unchain(t, outcome == OUT_FAILED ? cause : NULL);
    if (outcome == OUT_FAILED) {
        rill__stream_fail(p, t->number, cause);
        rill__stream_clear_failure(p, t->number + 1); /* only this operation fails */
    }
    release_stream(t);
}

/* A stream operation missed its deadline and the transport still holds
 * its memory: the stream fails at once (k), and the memory stays held
 * (k + 1) until the transport lets it go, if ever. */
static void abandon_stream(rill__comm_task *t, const char *cause) {
    rill__stream *p = t->proxy;
    /* Before k completes, and with it the stream's WAIT, whose point held
     * the buffers until now. */
    rill__comm_task_hold_buffers(t);
    trace_task(t);
    unchain(t, cause);
    rill__stream_fail(p, t->number, cause);
    rill__stream_clear_failure(p, t->number + 1);
    rill__stream_complete(p, t->number);
    rill__stream_unref(t->stream);
    t->stream = NULL;
    t->abandoned = true;
}

/* The transport has let go of an abandoned operation's memory. */
static void release_abandoned(rill__comm_task *t) {
    if (t->stage != NULL)
        rill__comm_stage_release(t->stage);
    rill__stream_complete(t->proxy, t->number + 1);
    rill__comm_engine_give_proxy(t->proxy);
    rill__free(t);
}

/* Drops ch's abandoned tasks (CLOSE): their memory stays held for good,
 * since nothing will test them again. */
static void drop_abandoned(rill__comm_channel *ch) {
    for (rill__comm_task **p = &rill__comm_engine.active; *p != NULL;) {
        rill__comm_task *t = *p;
        if (t->ch != ch) {
            p = &t->active_next;
            continue;
        }
        RILL_ASSERT(t->abandoned);
        *p = t->active_next;
        if (t->stage != NULL)
            rill__comm_stage_lose(t->stage);
        rill__comm_engine_release_proxy(t->proxy);
        rill__free(t);
    }
}

static void activate(rill__comm_channel *ch, rill__comm_task *t) {
    if (t->op.starting)
        ch->gate = t;
    t->trace_t0 = t->proxy != NULL && rill__tracing() ? rill__trace_now() : 0;
    t->deadline_ns = ch->timeout_ns != 0 ? rill__now_ns() + ch->timeout_ns : 0;
    t->active_next = rill__comm_engine.active;
    rill__comm_engine.active = t;
    ch->active++;
    rill__comm_engine.live++;
}

/* -------------------------------------------------------------- starting */

static bool startable(const rill__comm_channel *ch, rill__comm_task *t) {
    switch (t->op.a.kind) {
    case RILL__COMM_OPEN:
        return true;
    case RILL__COMM_CLOSE:
        return ch->active == 0 && ch->users == 0;
    default:
        /* acquire: pairs with the release store in the stream's waiter. */
        return atomic_load_explicit(&t->ready, memory_order_acquire) != 0;
    }
}

/* Ends ch (CLOSE ran, or OPEN failed): its state is released at once,
 * unless the transport may still write it, and the channel is freed once
 * it leaves the list. */
static void end_channel(rill__comm_channel *ch) {
    ch->closed = true;
    if (!ch->leak_ctx)
        ch->t->release(ch->ctx);
    ch->ctx = NULL;
}

static void start_close(rill__comm_channel *ch, rill__comm_task *t) {
    char why[256], msg[RILL__ERROR_BYTES];
    rill_status st = ch->t->start(ch->ctx, &t->op, why, sizeof why);
    drop_abandoned(ch);
    end_channel(ch);
    if (st != RILL_OK)
        snprintf(msg, sizeof msg,
                 "%s: %s could not release the communicator (%s); rill released its own state",
                 t->op.a.fn, ch->t->name, why);
    finish_control(t, st, st == RILL_OK ? "" : msg);
}

static void start_task(rill__comm_channel *ch, rill__comm_task *t) {
    char what[192], why[256], cause[RILL__ERROR_BYTES];
    rill__comm_kind kind = t->op.a.kind;
    if (kind == RILL__COMM_CLOSE) {
        start_close(ch, t);
        return;
    }
    /* Sentences (describe) only on the way to a failure: formatting one
     * costs more than a small collective's start. */
    if (kind != RILL__COMM_OPEN && (t->skipped || ch->broken)) {
        describe(ch, &t->op.a, what, sizeof what);
        if (t->refused) {
            /* This rank lacks the operation the other ranks will start. */
            snprintf(cause, sizeof cause, "%s was not started: %s", what, t->skip_why);
            break_channel(ch, cause);
            finish_stream(t, OUT_FAILED, cause);
            return;
        }
        if (t->skipped) {
            /* The other ranks will wait for it: nothing after it matches. */
            snprintf(cause, sizeof cause, "%s was skipped because its stream had failed (%s)", what,
                     t->skip_why);
            break_channel(ch, cause);
            finish_stream(t, OUT_OK, NULL); /* the stream fails already */
            return;
        }
        if (ch->broken) {
            snprintf(cause, sizeof cause,
                     "%s was not started: the communicator failed before (%s), and later "
                     "operations would not match the other ranks'; destroy it and create "
                     "another on every rank, or end the job with MPI_Abort",
                     what, ch->broken_why);
            finish_stream(t, OUT_FAILED, cause);
            return;
        }
    }
    rill_status st = ch->t->start(ch->ctx, &t->op, why, sizeof why);
    if (st == RILL_OK) {
        activate(ch, t);
        return;
    }
    if (kind == RILL__COMM_OPEN) {
        char msg[RILL__ERROR_BYTES];
        snprintf(msg, sizeof msg, "%s: %s", t->op.a.fn, why);
        end_channel(ch);
        finish_control(t, st, msg);
        return;
    }
    describe(ch, &t->op.a, what, sizeof what);
    snprintf(cause, sizeof cause, "%s failed: %s", what, why);
    break_channel(ch, cause);
    finish_stream(t, OUT_FAILED, cause);
}

/* Frees the channels that left the list; their tasks are all gone. */
static void free_closed(rill__comm_channel *dead) {
    while (dead != NULL) {
        rill__comm_channel *ch = dead;
        dead = ch->next;
        rill__free(ch);
    }
}

/* Starts the ready heads of every channel's queue, in order; returns
 * whether it started (or finished) any. */
static bool start_ready(void) {
    bool progress = false;
    rill__comm_channel *dead = NULL;
    rill__spinlock_lock(&rill__comm_engine.lock);
    /* Channels are added at the front and removed only here, so the walk
     * survives the unlocked stretches. */
    for (rill__comm_channel *ch = rill__comm_engine.channels; ch != NULL; ch = ch->next) {
        rill__comm_task *t;
        while (!ch->closed && ch->gate == NULL && (t = ch->head) != NULL && startable(ch, t)) {
            ch->head = t->next;
            if (ch->head == NULL)
                ch->tail = NULL;
            rill__spinlock_unlock(&rill__comm_engine.lock);
            start_task(ch, t);
            progress = true;
            rill__spinlock_lock(&rill__comm_engine.lock);
        }
    }
    for (rill__comm_channel **p = &rill__comm_engine.channels; *p != NULL;) {
        rill__comm_channel *ch = *p;
        if (ch->closed) {
            *p = ch->next;
            ch->next = dead;
            dead = ch;
        } else {
            p = &ch->next;
        }
    }
    rill__spinlock_unlock(&rill__comm_engine.lock);
    free_closed(dead);
    return progress;
}

/* --------------------------------------------------------------- testing */

/* t is no longer under way (finished, failed or abandoned). */
static void retire(rill__comm_task *t) {
    if (t->ch->gate == t)
        t->ch->gate = NULL;
    t->ch->active--;
    rill__comm_engine.live--;
}

/* An OPEN that missed its deadline (already off the active list): the
 * transport cannot cancel it and may still write the duplicate into ctx,
 * which is never released. */
static void open_timed_out(rill__comm_task *t) {
    rill__comm_channel *ch = t->ch;
    char msg[RILL__ERROR_BYTES];
    ch->t->cancel(ch->ctx, &t->op);
    retire(t);
    snprintf(msg, sizeof msg,
             "%s: the other ranks did not create their communicators from the same one within "
             "RILL_COMM_TIMEOUT (%g s); every rank must call it, in the same order",
             t->op.a.fn, ch->timeout_s);
    ch->leak_ctx = true;
    end_channel(ch);
    finish_control(t, RILL_ERROR_INTERNAL, msg);
}

/* A stream operation that missed its deadline: the stream fails now; the
 * task stays on the active list, abandoned, until the transport lets go
 * of its memory (a cancelled point-to-point operation soon, a collective
 * perhaps never). */
static void stream_timed_out(rill__comm_task *t) {
    rill__comm_channel *ch = t->ch;
    char what[192], cause[RILL__ERROR_BYTES];
    ch->t->cancel(ch->ctx, &t->op);
    retire(t);
    describe(ch, &t->op.a, what, sizeof what);
    snprintf(cause, sizeof cause,
             "%s did not complete within RILL_COMM_TIMEOUT (%g s): a rank did not issue it, "
             "issued other operations, or stopped; the communicator can no longer be used",
             what, ch->timeout_s);
    break_channel(ch, cause);
    abandon_stream(t, cause);
}

/* Ends t (already off the active list) after its last test said r. A
 * stream operation that completed is only unchained and put on *done:
 * the caller starts what that made ready first, then releases them. */
static void complete_task(rill__comm_task *t, rill__comm_test r, const char *why,
                          rill__comm_task **done) {
    rill__comm_channel *ch = t->ch;
    char what[192], cause[RILL__ERROR_BYTES];
    retire(t);
    if (t->op.a.kind == RILL__COMM_OPEN) {
        if (r == RILL__COMM_DONE) {
            ch->rank = t->op.rank;
            ch->size = t->op.size;
            ch->cuda_aware = t->op.cuda_aware;
            finish_control(t, RILL_OK, "");
            return;
        }
        char msg[RILL__ERROR_BYTES];
        snprintf(msg, sizeof msg, "%s: %s could not duplicate the communicator: %s", t->op.a.fn,
                 ch->t->name, why);
        ch->leak_ctx = r == RILL__COMM_FAILED_HELD;
        end_channel(ch);
        finish_control(t, RILL_ERROR_INTERNAL, msg);
        return;
    }
    if (r == RILL__COMM_DONE) {
        trace_task(t);
        unchain(t, NULL);
        t->active_next = *done;
        *done = t;
        return;
    }
    describe(ch, &t->op.a, what, sizeof what);
    snprintf(cause, sizeof cause, "%s failed: %s", what, why);
    break_channel(ch, cause);
    finish_stream(t, OUT_FAILED, cause);
}

/* A stream operation failed while the transport may still use its memory:
 * the stream fails now, the memory stays held (t stays on the list). */
static void stream_failed_held(rill__comm_task *t, const char *why) {
    rill__comm_channel *ch = t->ch;
    char what[192], cause[RILL__ERROR_BYTES];
    retire(t);
    describe(ch, &t->op.a, what, sizeof what);
    snprintf(cause, sizeof cause, "%s failed: %s", what, why);
    break_channel(ch, cause);
    abandon_stream(t, cause);
}

/* Tests every started task once; returns whether any completed or timed
 * out. Stream operations that completed go on *done (complete_task). */
static bool test_active(rill__comm_task **done) {
    bool progress = false;
    uint64_t now = rill__now_ns();
    for (rill__comm_task **p = &rill__comm_engine.active; *p != NULL;) {
        rill__comm_task *t = *p;
        rill__comm_channel *ch = t->ch;
        char why[256];
        rill__comm_test r = ch->t->test(ch->ctx, &t->op, why, sizeof why);
        if (t->abandoned) {
            if (r == RILL__COMM_DONE || r == RILL__COMM_FAILED) {
                *p = t->active_next;
                release_abandoned(t);
                progress = true;
            } else {
                p = &t->active_next;
            }
            continue;
        }
        if (r == RILL__COMM_PENDING) {
            if (t->op.progressed) {
                t->op.progressed = false;
                progress = true;
            }
            if (ch->gate == t && !t->op.starting) {
                ch->gate = NULL; /* its own call is made: the next may start */
                progress = true;
            }
            if (t->deadline_ns != 0 && now >= t->deadline_ns) {
                progress = true;
                if (t->op.a.kind == RILL__COMM_OPEN) {
                    *p = t->active_next; /* the opener frees t once it is finished */
                    open_timed_out(t);
                    continue;
                }
                stream_timed_out(t);
            }
            p = &t->active_next;
            continue;
        }
        progress = true;
        if (r == RILL__COMM_FAILED_HELD && t->op.a.kind != RILL__COMM_OPEN) {
            stream_failed_held(t, why);
            p = &t->active_next;
            continue;
        }
        *p = t->active_next;
        complete_task(t, r, why, done);
    }
    return progress;
}

/* ---------------------------------------------------------------- thread */

/* Sleeps until kicked, or for timeout_ns (0: no limit). */
static void sleep_on_kick(uint32_t kick, uint64_t timeout_ns) {
    /* seq_cst, both: a Dekker pair with rill__comm_engine_kick, which
     * bumps kick and then loads sleeping. */
    atomic_store(&rill__comm_engine.sleeping, 1);
    if (atomic_load(&rill__comm_engine.kick) == kick) {
        if (timeout_ns != 0)
            rill__futex_wait_for(&rill__comm_engine.kick, kick, timeout_ns);
        else
            rill__futex_wait(&rill__comm_engine.kick, kick);
    }
    atomic_store(&rill__comm_engine.sleeping, 0);
}

void rill__comm_engine_main(void *arg) {
    (void)arg;
    uint64_t last = rill__now_ns();
    for (;;) {
        uint32_t kick = atomic_load(&rill__comm_engine.kick);
        bool progress = start_ready();
        rill__comm_task *done = NULL;
        progress |= test_active(&done);
        if (done != NULL) {
            /* Operations chained behind the completed ones start before
             * their streams are resumed, so that the next transfer is
             * under way while the wake-ups are made. */
            start_ready();
            while (done != NULL) {
                rill__comm_task *t = done;
                done = t->active_next;
                release_stream(t);
            }
        }
        uint64_t now = rill__now_ns();
        if (progress)
            last = now;
        rill__spinlock_lock(&rill__comm_engine.lock);
        bool quit = rill__comm_engine.stop && rill__comm_engine.channels == NULL;
        rill__spinlock_unlock(&rill__comm_engine.lock);
        if (quit) {
            RILL_ASSERT(rill__comm_engine.active == NULL);
            return;
        }
        if (progress)
            continue; /* a completion may have made a queued task startable */
        if (rill__comm_engine.active == NULL) {
            /* Nothing under way: no MPI call until there is. For
             * IDLE_YIELD_NS after the last progress the thread stays
             * awake, yielding, so that a stream that issues its next
             * operation soon (a synchronized loop) kicks no sleeping
             * thread: a synchronized 4-byte allreduce took 3.4 to 3.6 us
             * instead of 4.6 to 4.9. It yields rather than spins: on two
             * cores shared by two ranks, a spin took the processor its
             * issuer needed, and the same loop took 41 us. */
            if (now - last < IDLE_YIELD_NS) {
                if (atomic_load_explicit(&rill__comm_engine.kick, memory_order_relaxed) == kick)
                    rill__thread_yield();
                continue;
            }
            sleep_on_kick(kick, 0);
            last = rill__now_ns();
        } else if (rill__comm_engine.live == 0) {
            /* Only abandoned operations: a cancelled one completes at its
             * next test, a collective perhaps never. */
            sleep_on_kick(kick, ABANDONED_NS);
        } else if (now - last < SPIN_NS) {
            rill__cpu_relax();
        } else {
            sleep_on_kick(kick, SLEEP_NS);
        }
    }
}
