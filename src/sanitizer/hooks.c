/* SPDX-License-Identifier: MIT */
/* The stream sanitizer's hooks (core/hooks.h: what it learns of commands,
 * orders, events and frees), its subsystem and its public calls. The top of
 * the sanitizer: it checks through sanitizer.c and graphs.c, which never
 * call it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/calls.h"
#include "core/kernel.h"
#include "core/runtime.h"
#include "core/stream.h"
#include "core/trace_api.h"
#include "graph/graph.h"
#include "mem/pool.h"
#include "platform/thread.h"
#include "sanitizer/internal.h"
#include "sanitizer/sanitizer.h"
#include "util/alloc.h"
#include "util/ptrmap.h"
#include "util/status.h"

/* rill_sanitizer_host_accesses: the next host function of this thread. */
#define HOST_ACCESSES_MAX 16
static _Thread_local rill_access tls_host_acc[HOST_ACCESSES_MAX];
static _Thread_local size_t tls_host_n;

/* ----------------------------------------------------------------- hooks */

/* what, followed by the op that submits it when the thread names one
 * (rill_thread_exchange_op_name): "kernel 'binary_f32' of aten::add". */
static const char *of_op(char *buf, size_t size, const char *what) {
    if (rill__tls_op_name == NULL)
        return what;
    snprintf(buf, size, "%s of %s", what, rill__tls_op_name);
    return buf;
}

static void on_command(rill__stream *s, uint64_t seq, const rill__cmd *cmd, unsigned flags) {
    rill__mutex_lock(&S.lock);
    if (!rill__san_active()) {
        rill__mutex_unlock(&S.lock);
        return;
    }
    uint32_t t = rill__san_index_of(s);
    bool ok = t != UINT32_MAX;
    seen sn = {.n = 0};
    if (ok && seq > S.streams[t].last)
        S.streams[t].last = seq;
    char kernel[96], what[160];
    if (!ok) {
    } else if (cmd->kind == RILL__CMD_KERNEL) {
        snprintf(kernel, sizeof kernel, "kernel '%s'", cmd->u.kernel.kernel->image.name);
        ok = rill__san_check_kernel(t, seq, cmd->u.kernel.accesses, cmd->u.kernel.num_accesses,
                                    of_op(what, sizeof what, kernel), flags, true, &sn);
    } else if (cmd->kind == RILL__CMD_COPY) {
        const char *fn = of_op(what, sizeof what,
                               (flags & RILL__SAN_HOST) ? "rill_memcpy" : "rill_memcpy_async");
        access a = rill__san_make_access(cmd->u.copy.src, cmd->u.copy.bytes, false, fn, flags);
        ok = rill__san_check_access(t, seq, &a, &sn);
        a = rill__san_make_access(cmd->u.copy.dst, cmd->u.copy.bytes, true, fn, flags);
        ok = ok && rill__san_check_access(t, seq, &a, &sn);
    } else if (cmd->kind == RILL__CMD_SET) {
        access a = rill__san_make_access(cmd->u.set.dst, cmd->u.set.bytes, true,
                                         of_op(what, sizeof what, "rill_memset_async"), flags);
        ok = rill__san_check_access(t, seq, &a, &sn);
    } else if (cmd->kind == RILL__CMD_GRAPH) {
        ok = rill__san_check_graph(t, seq, rill__xparams_of(cmd->u.graph.launch), &sn);
    } else if (cmd->kind == RILL__CMD_HOST) {
        /* The pool does not see a host function's uses: not covered. */
        ok = rill__san_check_kernel(t, seq, tls_host_acc, tls_host_n,
                                    of_op(what, sizeof what, "host function"), flags, false, &sn);
    }
    if (!ok)
        rill__san_give_up();
    rill__mutex_unlock(&S.lock);
    rill__san_tls_file = NULL;
    rill__san_tls_line = 0;
    if (cmd->kind == RILL__CMD_HOST)
        tls_host_n = 0;
}

static void on_touches(rill__stream *s, uint64_t seq, const rill_access *acc, size_t n,
                       const char *what) {
    rill__mutex_lock(&S.lock);
    if (!rill__san_active()) {
        rill__mutex_unlock(&S.lock);
        return;
    }
    uint32_t t = rill__san_index_of(s);
    seen sn = {.n = 0};
    bool ok = t != UINT32_MAX;
    if (ok && seq > S.streams[t].last)
        S.streams[t].last = seq;
    char named[160];
    if (ok)
        ok = rill__san_check_kernel(t, seq, acc, n, of_op(named, sizeof named, what), 0, true, &sn);
    if (!ok)
        rill__san_give_up();
    rill__mutex_unlock(&S.lock);
    rill__san_tls_file = NULL;
    rill__san_tls_line = 0;
}

static void on_order(rill__stream *s, rill__stream *other, uint64_t seq, bool all) {
    rill__mutex_lock(&S.lock);
    if (!rill__san_active()) {
        rill__mutex_unlock(&S.lock);
        return;
    }
    uint32_t t = rill__san_index_of(s),
             o = t != UINT32_MAX ? rill__san_index_of(other) : UINT32_MAX;
    bool ok = o != UINT32_MAX;
    if (ok) {
        /* s's work from its next command on is ordered after other's
         * command seq and what that command was ordered after. */
        uint64_t after = atomic_load_explicit(&s->q.sub_seq, memory_order_acquire);
        vclock *tv = rill__san_vc_next(&S.streams[t], after);
        const vclock *ov = rill__san_upto(&S.streams[o], seq, all);
        ok = tv != NULL;
        for (uint32_t i = 0; ok && ov != NULL && i < ov->n; i++)
            ok = rill__san_vc_raise(tv, ov->e[i].idx, ov->e[i].seq);
        ok = ok && rill__san_vc_raise(tv, o, seq);
    }
    if (!ok)
        rill__san_give_up();
    rill__mutex_unlock(&S.lock);
}

/* Raises dst to src's entries. */
static bool vc_join(vclock *dst, const vclock *src) {
    for (uint32_t i = 0; src != NULL && i < src->n; i++)
        if (!rill__san_vc_raise(dst, src->e[i].idx, src->e[i].seq))
            return false;
    return true;
}

/* The clock of event e's last record, NULL when none was seen. */
static vclock *event_clock(const rill__event *e) {
    uint32_t v;
    return rill__ptrmap_get(&S.events, e, &v) ? &S.ev[v - 1] : NULL;
}

static void on_event_record(rill__event *e, rill__stream *s, uint64_t seq) {
    rill__mutex_lock(&S.lock);
    if (!rill__san_active()) {
        rill__mutex_unlock(&S.lock);
        return;
    }
    uint32_t t = rill__san_index_of(s);
    vclock *v = t != UINT32_MAX ? event_clock(e) : NULL;
    bool ok = t != UINT32_MAX;
    if (ok && v == NULL) {
        vclock *ev = rill__san_room_for_one(S.ev, S.num_ev, &S.cap_ev, sizeof *ev, 16);
        ok = ev != NULL;
        if (ok)
            S.ev = ev;
        ok = ok && rill__ptrmap_put(&S.events, e, S.num_ev + 1);
        if (ok) {
            v = &S.ev[S.num_ev++];
            *v = (vclock){NULL, 0, 0};
        }
    }
    if (ok) {
        v->n = 0; /* a record replaces the last one */
        ok = vc_join(v, rill__san_vc_now(&S.streams[t])) && rill__san_vc_raise(v, t, seq);
    }
    if (!ok)
        rill__san_give_up();
    rill__mutex_unlock(&S.lock);
}

static void on_event_wait(rill__stream *s, rill__event *e) {
    rill__mutex_lock(&S.lock);
    const vclock *ev = rill__san_active() ? event_clock(e) : NULL;
    if (ev != NULL) {
        uint32_t t = rill__san_index_of(s);
        uint64_t after = atomic_load_explicit(&s->q.sub_seq, memory_order_acquire);
        vclock *tv = t != UINT32_MAX ? rill__san_vc_next(&S.streams[t], after) : NULL;
        if (tv == NULL || !vc_join(tv, ev))
            rill__san_give_up();
    }
    rill__mutex_unlock(&S.lock);
}

static void on_event_observed(rill__event *e) {
    rill__mutex_lock(&S.lock);
    const vclock *ev = rill__san_active() ? event_clock(e) : NULL;
    for (uint32_t i = 0; ev != NULL && i < ev->n; i++) {
        san_stream *o = &S.streams[ev->e[i].idx];
        if (ev->e[i].seq > o->done)
            o->done = ev->e[i].seq;
    }
    rill__mutex_unlock(&S.lock);
}

static void on_observed(rill__stream *s, uint64_t seq, bool all) {
    rill__mutex_lock(&S.lock);
    if (rill__san_active()) {
        uint32_t t = rill__san_index_of(s);
        if (t == UINT32_MAX)
            rill__san_give_up();
        else
            rill__san_observe(t, seq, rill__san_upto(&S.streams[t], seq, all));
    }
    rill__mutex_unlock(&S.lock);
}

static void on_observed_device(rill__device *dev) {
    rill__mutex_lock(&S.lock);
    if (rill__san_active())
        for (uint32_t t = 0; t < S.num_streams; t++)
            if (S.streams[t].dev == dev)
                rill__san_observe(t, S.streams[t].last, rill__san_vc_now(&S.streams[t]));
    rill__mutex_unlock(&S.lock);
}

static bool recorded(uint32_t stream, uintptr_t lo, uintptr_t hi) {
    for (size_t i = 0; i < S.num_covers; i++)
        if (S.covers[i].stream == stream && S.covers[i].ptr >= lo && S.covers[i].ptr < hi)
            return true;
    return false;
}

static void on_free(const void *ptr, rill__stream *f) {
    const char *file = rill__san_tls_file;
    int line = rill__san_tls_line;
    rill__san_tls_file = NULL;
    rill__san_tls_line = 0;
    rill__stream *owner;
    size_t bytes;
    if (!rill__pool_owner(ptr, &owner, &bytes))
        return; /* not a block: rill_free says so */
    rill__mutex_lock(&S.lock);
    uint32_t fi = rill__san_active() ? rill__san_index_of(f != NULL ? f : owner) : UINT32_MAX;
    if (fi == UINT32_MAX) {
        if (rill__san_active())
            rill__san_give_up();
        rill__mutex_unlock(&S.lock);
        rill__stream_unref(owner);
        return;
    }
    uintptr_t lo = (uintptr_t)ptr, hi = lo + bytes;
    const char *fn = f != NULL ? "rill_free_async" : "rill_free";
    seen sn = {.n = 0};
    size_t first = rill__san_rec_first(lo), k, w = first;
    for (k = first; k < S.num_recs && S.recs[k].lo < hi; k++) {
        const san_rec *r = &S.recs[k];
        if (r->hi <= lo)
            continue;
        if (!r->covered && !rill__san_ordered(fi, r->stream, r->seq) &&
            !recorded(r->stream, lo, hi) && !rill__san_seen_before(&sn, r))
            rill__san_report_free(fi, fn, ptr, r->lo > lo ? r->lo : lo, r->hi < hi ? r->hi : hi, r,
                                  file, line);
    }
    /* The block's bytes are new memory for whoever allocates them next. */
    for (k = first; k < S.num_recs && S.recs[k].lo < hi; k++)
        if (!(S.recs[k].lo >= lo && S.recs[k].hi <= hi))
            S.recs[w++] = S.recs[k];
    if (k > w) /* S.recs is NULL until the first access is recorded */
        memmove(S.recs + w, S.recs + k, (S.num_recs - k) * sizeof *S.recs);
    S.num_recs -= k - w;
    size_t c = 0;
    for (size_t i = 0; i < S.num_covers; i++)
        if (!(S.covers[i].ptr >= lo && S.covers[i].ptr < hi))
            S.covers[c++] = S.covers[i];
    S.num_covers = c;
    rill__mutex_unlock(&S.lock);
    rill__stream_unref(owner);
}

static void on_record_stream(const void *ptr, rill__stream *s) {
    rill__mutex_lock(&S.lock);
    if (!rill__san_active()) {
        rill__mutex_unlock(&S.lock);
        return;
    }
    uint32_t t = rill__san_index_of(s);
    bool ok = t != UINT32_MAX;
    san_cover *covers =
        ok ? rill__san_room_for_one(S.covers, S.num_covers, &S.cap_covers, sizeof *covers, 16)
           : NULL;
    ok = covers != NULL;
    if (ok)
        S.covers = covers;
    if (ok)
        S.covers[S.num_covers++] = (san_cover){(uintptr_t)ptr, t};
    else
        rill__san_give_up();
    rill__mutex_unlock(&S.lock);
}

static const rill__san_hooks hooks = {
    .command = on_command,
    .order = on_order,
    .event_record = on_event_record,
    .event_wait = on_event_wait,
    .event_observed = on_event_observed,
    .observed = on_observed,
    .observed_device = on_observed_device,
    .free = on_free,
    .record_stream = on_record_stream,
    .touches = on_touches,
};

/* ------------------------------------------------------------ subsystem */

/* Turns the sanitizer on or off; every order and record learnt so far is
 * forgotten. S.lock held. */
static void set_mode_locked(int mode) {
    rill__san_clear_state();
    S.abort_at_first = mode == 2;
    atomic_store_explicit(&rill__san_on, mode != 0, memory_order_relaxed);
}

static void san_start(rill__runtime *rt) {
    (void)rt;
    if (!S.lock_ready) {
        rill__mutex_init(&S.lock);
        S.lock_ready = 1;
    }
    atomic_store_explicit(&rill__san_ops, &hooks, memory_order_relaxed);
    const char *env = getenv("RILL_SANITIZE");
    if (env == NULL || env[0] == '\0' || strcmp(env, "0") == 0)
        return;
    int mode = strcmp(env, "1") == 0 ? 1 : strcmp(env, "abort") == 0 ? 2 : -1;
    if (mode < 0) {
        fprintf(stderr,
                "rill: RILL_SANITIZE=%s is not 0, 1 or abort; the stream sanitizer stays as it "
                "was\n",
                env);
        return;
    }
    rill__mutex_lock(&S.lock);
    set_mode_locked(mode);
    rill__mutex_unlock(&S.lock);
}

static void san_shutdown(rill__runtime *rt, rill__shutdown_phase phase) {
    (void)rt;
    if (phase != RILL__SHUTDOWN_DEVICES)
        return;
    /* Streams and devices are gone: forget them, and stay on or off. */
    rill__mutex_lock(&S.lock);
    rill__san_clear_state();
    rill__mutex_unlock(&S.lock);
}

static void san_fork_child(rill__runtime *rt) {
    (void)rt;
    /* Another thread may have held the lock mid-change: drop the state
     * without reading or freeing it. */
    rill__mutex_init(&S.lock);
    S.streams = NULL;
    S.recs = NULL;
    S.covers = NULL;
    S.ids = (rill__ptrmap)RILL__PTRMAP_INIT;
    S.checked = (rill__ptrmap)RILL__PTRMAP_INIT;
    S.events = (rill__ptrmap)RILL__PTRMAP_INIT;
    S.ev = NULL;
    S.num_ev = S.cap_ev = 0;
    S.num_streams = S.cap_streams = 0;
    S.num_recs = S.cap_recs = S.max_len = 0;
    S.num_covers = S.cap_covers = 0;
}

const rill__subsystem rill__sanitizer_subsystem = {
    .name = "sanitizer",
    .start = san_start,
    .shutdown = san_shutdown,
    .fork_child = san_fork_child,
};

/* ---------------------------------------------------------------- public */

rill_status rill_sanitizer_enable(int enabled) {
    RILL_CALL_SCOPE();
    if (enabled < 0 || enabled > 2)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_sanitizer_enable: enabled is %d; pass 0 (off), 1 (report races "
                          "on stderr) or 2 (report, then abort at the first)",
                          enabled);
    rill__runtime *rt;
    rill_status st = rill__runtime_get(&rt);
    if (st != RILL_OK)
        return rill__fail_from(st, "rill_sanitizer_enable");
    rill__mutex_lock(&S.lock);
    set_mode_locked(enabled);
    rill__mutex_unlock(&S.lock);
    return RILL_OK;
}

uint64_t rill_sanitizer_report_count(void) {
    return atomic_load_explicit(&rill__san_reports, memory_order_relaxed);
}

rill_status rill_sanitizer_host_accesses(const rill_access *accesses, size_t num_accesses) {
    RILL_CALL_SCOPE();
    rill__runtime_enter();
    static const char fn[] = "rill_sanitizer_host_accesses";
    if (num_accesses > 0 && accesses == NULL)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: num_accesses is %zu but accesses is NULL; pass the accesses, or "
                          "NULL and 0 to declare none",
                          fn, num_accesses);
    if (num_accesses > HOST_ACCESSES_MAX)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "%s: %zu accesses; a host function declares at most %d (merge "
                          "neighbouring buffers into one access)",
                          fn, num_accesses, HOST_ACCESSES_MAX);
    for (size_t i = 0; i < num_accesses; i++)
        if (accesses[i].ptr == NULL || accesses[i].mode < RILL_READ ||
            accesses[i].mode > RILL_READ_WRITE)
            return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                              "%s: access %zu has a NULL pointer or a mode other than RILL_READ, "
                              "RILL_WRITE or RILL_READ_WRITE",
                              fn, i);
    tls_host_n = 0;
    if (!rill__san_active() || num_accesses == 0)
        return RILL_OK; /* nothing to check */
    memcpy(tls_host_acc, accesses, num_accesses * sizeof *accesses);
    tls_host_n = num_accesses;
    return RILL_OK;
}

rill_status rill_sanitizer_set_location(const char *file, int line) {
    RILL_CALL_SCOPE();
    if ((file == NULL) != (line == 0) || line < 0)
        return rill__fail(RILL_ERROR_INVALID_ARGUMENT,
                          "rill_sanitizer_set_location: file is %s and line is %d; pass a file "
                          "name and a line above 0 (RILL_SANITIZER_HERE() does), or NULL and 0 "
                          "to forget the location",
                          file == NULL ? "NULL" : "given", line);
    rill__san_tls_file = file;
    rill__san_tls_line = line;
    return RILL_OK;
}
